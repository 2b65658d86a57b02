import type { StoredEvent } from "./store/mod.ts";

/** Default cap on the bytes of one session's ring (its events' JSON). */
export const RING_MAX_BYTES = 1024 * 1024;

/**
 * The in-memory tail of one session's event log: the last `capacity` events
 * in their wire form, so live viewers and short reconnects never touch SQLite.
 * It also holds at most `maxBytes` of event JSON (always at least the newest
 * event), so a session of big tool outputs cannot pin much memory; older
 * events are read from the database instead.
 */
export class EventRing {
  /** Held events from `#start` on; evicted slots are emptied at once so their JSON can be collected. */
  #items: (StoredEvent | undefined)[] = [];
  /** Index of the oldest event held; the ones before it are dropped. */
  #start = 0;
  #bytes = 0;
  readonly #capacity: number;
  readonly #maxBytes: number;

  constructor(capacity: number, maxBytes = RING_MAX_BYTES) {
    this.#capacity = Math.max(1, capacity);
    this.#maxBytes = Math.max(1, maxBytes);
  }

  push(ev: StoredEvent): void {
    this.#items.push(ev);
    this.#bytes += ev.json.length;
    while (
      this.#items.length - this.#start > 1 &&
      (this.#items.length - this.#start > this.#capacity || this.#bytes > this.#maxBytes)
    ) {
      this.#bytes -= this.#items[this.#start]!.json.length;
      this.#items[this.#start++] = undefined;
    }
    // Compact in bulk so pushes stay O(1) amortised.
    if (this.#start >= this.#capacity && this.#start * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#start);
      this.#start = 0;
    }
  }

  /** Forgets every event held (what follows does not continue them). */
  clear(): void {
    this.#items = [];
    this.#start = 0;
    this.#bytes = 0;
  }

  /** The oldest seq held, or Infinity when empty. */
  get firstSeq(): number {
    return this.#items[this.#start]?.seq ?? Infinity;
  }

  get size(): number {
    return this.#items.length - this.#start;
  }

  /**
   * Up to `limit` events after `afterSeq`, or null when the ring does not
   * reach back that far (the caller then reads the database).
   */
  after(afterSeq: number, limit: number): StoredEvent[] | null {
    if (this.firstSeq > afterSeq + 1) return null;
    let lo = this.#start;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#items[mid]!.seq <= afterSeq) lo = mid + 1;
      else hi = mid;
    }
    return this.#items.slice(lo, lo + limit) as StoredEvent[];
  }
}
