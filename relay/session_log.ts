import type { StoredEvent } from "./store/mod.ts";

/**
 * The in-memory tail of one session's event log: the last `capacity` events
 * in their wire form, so live viewers and short reconnects never touch SQLite.
 */
export class EventRing {
  #items: StoredEvent[] = [];
  readonly #capacity: number;

  constructor(capacity: number) {
    this.#capacity = Math.max(1, capacity);
  }

  push(ev: StoredEvent): void {
    this.#items.push(ev);
    // Trim in bulk so pushes stay O(1) amortised.
    if (this.#items.length >= this.#capacity * 2) {
      this.#items = this.#items.slice(this.#items.length - this.#capacity);
    }
  }

  /** The oldest seq held, or Infinity when empty. */
  get firstSeq(): number {
    const start = Math.max(0, this.#items.length - this.#capacity);
    return this.#items[start]?.seq ?? Infinity;
  }

  get size(): number {
    return Math.min(this.#items.length, this.#capacity);
  }

  /**
   * Up to `limit` events after `afterSeq`, or null when the ring does not
   * reach back that far (the caller then reads the database).
   */
  after(afterSeq: number, limit: number): StoredEvent[] | null {
    if (this.firstSeq > afterSeq + 1) return null;
    const start = Math.max(0, this.#items.length - this.#capacity);
    let lo = start;
    let hi = this.#items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#items[mid]!.seq <= afterSeq) lo = mid + 1;
      else hi = mid;
    }
    return this.#items.slice(lo, lo + limit);
  }
}
