/**
 * Two small parts of NatsBus: how much it published that the server has not
 * confirmed yet (the bound that keeps a lagging node elsewhere from growing
 * this one), and the table of nodes it heard announce themselves.
 *
 * @module
 */
import type { NodeInfo } from "./types.ts";

/**
 * Bytes published that the server has not confirmed: one flush at a time,
 * whose answer confirms everything published before it.
 */
export class Unconfirmed {
  #sent = 0;
  #confirmed = 0;
  #confirming = false;

  constructor(
    /** Resolves when the server answered a ping sent after what was published. */
    readonly flush: () => Promise<void>,
    /** Whether a flush can be sent now (connected). */
    readonly canFlush: () => boolean,
    /** Called when everything published was confirmed. */
    readonly onCaughtUp: () => void,
  ) {}

  /** Bytes published and not confirmed yet. */
  get bytes(): number {
    return this.#sent - this.#confirmed;
  }

  published(bytes: number): void {
    this.#sent += bytes;
    this.#confirm();
  }

  /** The connection was lost with what was in flight: nothing is pending any more. */
  reset(): void {
    this.#confirmed = this.#sent;
  }

  #confirm(): void {
    if (this.#confirming || !this.canFlush()) return;
    this.#confirming = true;
    const mark = this.#sent;
    this.flush().then(
      () => void (this.#confirmed = Math.max(this.#confirmed, mark)),
      () => {},
    ).finally(() => {
      this.#confirming = false;
      if (this.#sent > this.#confirmed) this.#confirm();
      else this.onCaughtUp();
    });
  }
}

/** The other nodes as their announcements say; one silent for `ttlMs` is gone. */
export class NodeTable {
  readonly #nodes = new Map<string, NodeInfo>();

  constructor(readonly selfId: string, readonly ttlMs: number) {}

  /**
   * Takes a message of `baton.nodes.<kind>` (`{node, runners?}`). Returns
   * true when its sender asks everyone to announce (a hello).
   */
  heard(kind: string, body: { node?: unknown; runners?: unknown }): boolean {
    if (typeof body.node !== "string" || body.node === this.selfId) return false;
    if (kind === "leave") this.#nodes.delete(body.node);
    else if (kind === "hello") return true;
    else if (kind === "announce" && Array.isArray(body.runners)) {
      const runners = body.runners.filter((r): r is string => typeof r === "string");
      this.#nodes.set(body.node, { nodeId: body.node, runners, seenAt: Date.now() });
    }
    return false;
  }

  /** This node (holding `runners`) and the others heard from lately. */
  list(runners: string[]): NodeInfo[] {
    const now = Date.now();
    for (const [id, n] of this.#nodes) if (now - n.seenAt > this.ttlMs) this.#nodes.delete(id);
    return [{ nodeId: this.selfId, runners, seenAt: now }, ...this.#nodes.values()];
  }
}
