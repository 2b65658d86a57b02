/**
 * The tunnel's frames (docs/protocol.md, "Tunnel frames"): one binary
 * message each, a kind byte, a 32-bit big-endian stream id, then the
 * payload. The codec and the frame size limits; the credit protocol that
 * frames carry is in streams.ts.
 *
 * @module
 */

/** Frame kinds (the first byte of a frame). */
export const FrameKind = {
  open: 1,
  data: 2,
  credit: 3,
  end: 4,
  reset: 5,
} as const;

/** A frame kind. */
export type FrameKind = typeof FrameKind[keyof typeof FrameKind];

/** One decoded frame. */
export interface Frame {
  streamId: number;
  kind: FrameKind;
  bytes: Uint8Array;
}

/** Bytes of a frame's header (kind and stream id). */
export const FRAME_HEADER_BYTES = 5;
/** Largest data payload per frame: 64 KiB keeps a frame well under the channel's 1 MiB cap. */
export const MAX_DATA_BYTES = 64 * 1024;
/** Largest open payload (a request's head). */
export const MAX_OPEN_BYTES = 64 * 1024;

/** Encodes a frame. */
export function encodeFrame(frame: Frame): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + frame.bytes.byteLength);
  writeHeader(out, frame.kind, frame.streamId);
  out.set(frame.bytes, FRAME_HEADER_BYTES);
  return out;
}

/** Writes a frame's kind and stream id into its first {@linkcode FRAME_HEADER_BYTES}. */
export function writeHeader(out: Uint8Array, kind: FrameKind, streamId: number): void {
  out[0] = kind;
  new DataView(out.buffer, out.byteOffset, FRAME_HEADER_BYTES).setUint32(1, streamId);
}

/** Decodes a frame; null for one too short or of an unknown kind. */
export function decodeFrame(bytes: Uint8Array): Frame | null {
  if (bytes.byteLength < FRAME_HEADER_BYTES) return null;
  const kind = bytes[0] as FrameKind;
  if (kind < FrameKind.open || kind > FrameKind.reset) return null;
  const streamId = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
  return { kind, streamId, bytes: bytes.subarray(FRAME_HEADER_BYTES) };
}
