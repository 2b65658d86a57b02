/**
 * Counts what each client address holds open (TCP connections, WebSockets
 * not yet authenticated) and refuses more than a limit, so one address
 * cannot take the relay's memory or file descriptors with idle connections.
 *
 * @module
 */

/** Open things per address, up to a limit (0: no limit). */
export class AddressCounter {
  readonly #open = new Map<string, number>();

  constructor(readonly limit: number) {}

  /** Takes one slot for `address`; false (and nothing taken) when it has `limit` already. */
  tryAcquire(address: string): boolean {
    const n = this.#open.get(address) ?? 0;
    if (this.limit > 0 && n >= this.limit) return false;
    this.#open.set(address, n + 1);
    return true;
  }

  /** Gives back a slot taken by tryAcquire. */
  release(address: string): void {
    const n = this.#open.get(address) ?? 0;
    if (n <= 1) this.#open.delete(address);
    else this.#open.set(address, n - 1);
  }

  /** How many `address` holds. */
  count(address: string): number {
    return this.#open.get(address) ?? 0;
  }
}
