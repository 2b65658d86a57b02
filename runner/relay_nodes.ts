/**
 * The relay nodes a runner may use (`--relay URL[,URL…]`) and which one its
 * channels are on. Every node of a deployment shares one store (and a bus),
 * so any of them takes the runner: the control channel dials `current`, and
 * a failed dial or a dropped connection moves it on to the next URL, round
 * robin (the wait between attempts stays the control link's backoff). The
 * tunnel dials the node the control channel is welcomed on, so both
 * channels sit on one node (runner/tunnel.ts), and HTTP calls the daemon
 * makes on behalf of a request (attachments) go to that node too: it is the
 * one that just spoke.
 *
 * Nothing of the outbox is per node: a session's unacknowledged events are
 * re-sent to whichever node welcomes the runner, from the seq that node's
 * welcome says is stored (daemon.ts `#onWelcome`).
 *
 * @module
 */

/** A change of the control channel's node: the URL it is welcomed on, or null when lost. */
export type NodeListener = (connected: string | null) => void;

/** The relay nodes of a runner, and the one its control channel is on. */
export class RelayNodes {
  /** The nodes' http(s) base URLs, in the order given. */
  readonly urls: readonly string[];
  #index = 0;
  #connected: string | null = null;
  readonly #listeners = new Set<NodeListener>();

  constructor(urls: readonly string[]) {
    if (urls.length === 0) throw new RangeError("A runner needs at least one relay URL");
    this.urls = [...urls];
  }

  /** The node the control channel is on, or dials next: where HTTP calls go. */
  get current(): string {
    return this.urls[this.#index]!;
  }

  /** The node the control channel is welcomed on, or null while it is away. */
  get connected(): string | null {
    return this.#connected;
  }

  /** The control channel was welcomed on `url`. */
  welcomed(url: string): void {
    const i = this.urls.indexOf(url);
    if (i >= 0) this.#index = i;
    if (this.#connected === url) return;
    this.#connected = url;
    this.#emit();
  }

  /**
   * The control channel's dial of `url` failed, or its connection there
   * dropped: the next dial goes to the following node.
   */
  failed(url: string): void {
    if (this.current === url) this.#index = (this.#index + 1) % this.urls.length;
    if (this.#connected !== url) return;
    this.#connected = null;
    this.#emit();
  }

  /** Calls `listener` on each change of the control channel's node; returns the unsubscribe. */
  onChange(listener: NodeListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #emit(): void {
    for (const listener of [...this.#listeners]) listener(this.#connected);
  }
}
