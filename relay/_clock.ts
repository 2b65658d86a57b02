import { setImmediate } from "node:timers";

/**
 * Time and timers, given to the relay's services through their options so
 * that tests drive them (see `testdata/fakes.ts`) instead of waiting.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
  setTimeout(fn: () => void, ms: number): number;
  clearTimeout(id: number): void;
  setInterval(fn: () => void, ms: number): number;
  clearInterval(id: number): void;
  /** Runs `fn` once the I/O of this turn of the event loop is read. */
  setImmediate(fn: () => void): void;
}

/** The real clock and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  // Deno's timers return numbers; the types of node:timers, once loaded, say otherwise.
  setTimeout: (fn, ms) => setTimeout(fn, ms) as unknown as number,
  clearTimeout: (id) => clearTimeout(id),
  setInterval: (fn, ms) => setInterval(fn, ms) as unknown as number,
  clearInterval: (id) => clearInterval(id),
  setImmediate: (fn) => {
    setImmediate(fn);
  },
};

/** The clock's time as an ISO string, as rows store it. */
export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString();
}
