/**
 * The connected runners: one link per runner id, and the requests sent
 * through it.
 *
 * @module
 */
import { CloseCode, type RunnerInfo } from "../shared/protocol.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import type { Bus } from "./bus/mod.ts";
import { notFound, offline } from "./errors.ts";
import { RemoteRunner, RunnerServer } from "./remote_runner.ts";
import type { RunnerConnection } from "./runner_connection.ts";

export type { RunnerConnection };
import type { AsyncStore, RunnerRecord } from "./store/mod.ts";

/** Whether a runner is connected, for services that only need to check. */
export interface RunnerPresence {
  /** The runner's link; throws 503 `runner_offline` ("`what` is not connected") without one. */
  connected(runnerId: string, what?: string): RunnerConnection;
}

/** Options of {@linkcode RunnerRegistry}. */
export interface RunnerRegistryOptions {
  store: Pick<AsyncStore, "runners" | "sessions">;
  clock?: Clock;
  /** Receives one line per notable incident (a failed write of a runner's last sight). */
  log?: (line: string) => void;
  /**
   * The bus between relay nodes: this node serves requests for the runners it
   * holds, and reaches the ones other nodes hold through it. Without one, a
   * runner is reachable only when its link is here.
   */
  bus?: Bus;
}

/** The runner links by runner id. */
export class RunnerRegistry implements RunnerPresence {
  readonly #links = new Map<string, RunnerConnection>();
  readonly #store: RunnerRegistryOptions["store"];
  readonly #clock: Clock;
  readonly #log: (line: string) => void;
  readonly #bus: Bus | undefined;
  /** Stops serving each held runner's requests over the bus. */
  readonly #serving = new Map<string, () => void>();
  /** Answers other nodes' requests for the runners held here. */
  readonly #server = new RunnerServer((runnerId) => this.#links.get(runnerId));

  constructor(options: RunnerRegistryOptions) {
    this.#store = options.store;
    this.#clock = options.clock ?? systemClock;
    this.#log = options.log ?? (() => {});
    this.#bus = options.bus;
  }

  /** Registers an authenticated link, closing an older one of the same runner. */
  attach(link: RunnerConnection): void {
    const old = this.#links.get(link.runnerId);
    if (old && old !== link) old.close(CloseCode.replaced, "Replaced by a newer connection");
    this.#links.set(link.runnerId, link);
    if (this.#bus && !this.#serving.has(link.runnerId)) {
      const { runnerId } = link;
      this.#serving.set(
        runnerId,
        this.#bus.serveRunner(
          runnerId,
          (op, data, ms) => this.#server.serve(runnerId, op, data, ms),
        ),
      );
    }
  }

  /** Forgets a link that closed; false when a newer one had replaced it already. */
  detach(link: RunnerConnection): boolean {
    if (this.#links.get(link.runnerId) !== link) return false;
    this.#links.delete(link.runnerId);
    this.#serving.get(link.runnerId)?.();
    this.#serving.delete(link.runnerId);
    void this.#store.runners.touch(link.runnerId, isoNow(this.#clock)).catch((err) =>
      this.#log(`storing when runner ${link.runnerId} was last seen: ${err}`)
    );
    return true;
  }

  link(runnerId: string): RunnerConnection | undefined {
    return this.#links.get(runnerId);
  }

  links(): RunnerConnection[] {
    return [...this.#links.values()];
  }

  connected(runnerId: string, what = "Runner", userId = ""): RunnerConnection {
    const link = this.#links.get(runnerId) ?? this.#elsewhere(runnerId, userId);
    if (!link) throw offline(what);
    return link;
  }

  /** Whether a node (this one or another) holds the runner's link. */
  isConnected(runnerId: string): boolean {
    return this.#links.has(runnerId) || this.#heldElsewhere(runnerId);
  }

  #heldElsewhere(runnerId: string): boolean {
    const bus = this.#bus;
    if (!bus) return false;
    return bus.nodes().some((n) => n.nodeId !== bus.nodeId && n.runners.includes(runnerId));
  }

  /** The runner as reached through the bus, when another node announced it holds it. */
  #elsewhere(runnerId: string, userId: string): RunnerConnection | undefined {
    const bus = this.#bus;
    if (!bus || !this.#heldElsewhere(runnerId)) return undefined;
    return new RemoteRunner(bus, runnerId, userId, this.#log);
  }

  /** Throws the same 404 for a foreign and an unknown runner. */
  async assertOwned(userId: string, runnerId: string): Promise<void> {
    // A connected runner's owner is its link's (the hello checked it against its row).
    const link = this.#links.get(runnerId);
    if (link) {
      if (link.userId !== userId) throw notFound("Runner");
      return;
    }
    // A runner held by another node is checked against its row, as an offline one.
    if (!await this.#store.runners.getOwned(userId, runnerId)) throw notFound("Runner");
  }

  /** The connected link of a runner `userId` owns; 404 for foreign or unknown, 503 when offline. */
  async connectedRunner(userId: string, runnerId: string): Promise<RunnerConnection> {
    await this.assertOwned(userId, runnerId);
    return this.connected(runnerId, "Runner", userId);
  }

  /** Asks a runner of `userId` to restart or stop its daemon. */
  async control(userId: string, runnerId: string, op: "restart" | "stop"): Promise<void> {
    await (await this.connectedRunner(userId, runnerId)).request(op, {}, 10_000);
  }

  async runnerInfo(runnerId: string): Promise<RunnerInfo | undefined> {
    const r = await this.#store.runners.get(runnerId);
    return r ? await this.#info(r) : undefined;
  }

  async #info(r: RunnerRecord): Promise<RunnerInfo> {
    const live = await this.#store.sessions.listLiveForRunner(r.id);
    const connected = this.isConnected(r.id);
    return {
      id: r.id,
      name: r.name,
      connected,
      sessions: live.map((s) => s.sessionId),
      platform: r.platform,
      version: r.version,
      roots: r.roots,
      lastSeenAt: connected ? isoNow(this.#clock) : r.lastSeenAt,
    };
  }

  async list(userId: string): Promise<RunnerInfo[]> {
    const out: RunnerInfo[] = [];
    for (const r of await this.#store.runners.listForUser(userId)) out.push(await this.#info(r));
    return out;
  }

  /** Closes every link (the relay shuts down). */
  closeAll(code: number, reason: string): void {
    for (const stop of this.#serving.values()) stop();
    this.#serving.clear();
    this.#server.close();
    for (const link of this.links()) link.close(code, reason);
  }
}
