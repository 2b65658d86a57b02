/**
 * A response body piped into a tunnel stream, framed in place (see
 * {@linkcode pipeBytes}): the runner's side of a tunnelled HTTP response.
 *
 * @module
 */
import { FRAME_HEADER_BYTES, MAX_DATA_BYTES } from "./stream_frames.ts";
import { type MuxStream, StreamResetError } from "./streams.ts";

/**
 * Pipes a byte stream (a fetch body) into `stream` and ends it, reading
 * each chunk straight into the buffer of the frame that carries it (a
 * BYOB read after the header's room) instead of copying every chunk into
 * a new frame: on a 1 GB body that copy and its zero-filled buffer were a
 * fifth of the runner's CPU. Only a read that filled under a quarter of its
 * frame is copied out, into a frame of its own size. A stream without BYOB
 * reads is piped as usual. When `stream` is reset, `body` is cancelled; when
 * `body` fails, `stream` is reset, and the error is thrown.
 */
export async function pipeBytes(
  body: ReadableStream<Uint8Array>,
  stream: MuxStream,
): Promise<void> {
  let reader: ReadableStreamBYOBReader;
  try {
    reader = body.getReader({ mode: "byob" });
  } catch {
    return await body.pipeTo(stream.writable);
  }
  // A reset while a read waits (an SSE body between events) cancels the body at once, as pipeTo does.
  let reading = true;
  stream.closed.then(() => {
    if (reading && stream.resetReason !== null) reader.cancel(stream.resetReason).catch(() => {});
  });
  try {
    for (;;) {
      const credit = await stream.waitForCredit();
      const n = Math.min(credit, MAX_DATA_BYTES);
      const frame = new Uint8Array(FRAME_HEADER_BYTES + n);
      const { done, value } = await reader.read(frame.subarray(FRAME_HEADER_BYTES));
      if (done || !value) break;
      if (value.byteLength === 0) continue;
      const filled = new Uint8Array(
        value.buffer,
        value.byteOffset - FRAME_HEADER_BYTES,
        FRAME_HEADER_BYTES + value.byteLength,
      );
      // A small read is sent in a copy of its own size: the frame's whole buffer would
      // be held while it waits to be written, up to 64 KiB for a few bytes of an SSE event.
      stream.sendFrame(value.byteLength < value.buffer.byteLength / 4 ? filled.slice() : filled);
    }
  } catch (err) {
    reading = false;
    reader.cancel(err).catch(() => {});
    if (stream.resetReason !== null) throw new StreamResetError(stream.resetReason);
    stream.reset("body failed");
    throw err;
  }
  reading = false;
  reader.releaseLock();
  await stream.writable.close();
}
