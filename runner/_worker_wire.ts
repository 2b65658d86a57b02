/**
 * The worker's side of the worker channel (docs/protocol.md): protocol
 * lines on its stdout, written whole and in order.
 *
 * @module
 */
import type { WorkerToDaemon } from "../shared/protocol.ts";

const encoder = new TextEncoder();

/** Writes one protocol message to stdout, synchronously so order and delivery hold. */
export function send(msg: WorkerToDaemon): void {
  const bytes = encoder.encode(JSON.stringify(msg) + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

/** Tells the daemon which step of the start this is (its start timeout names it). */
export function stage(what: string): void {
  send({ t: "stage", stage: what });
}
