/**
 * Wire types of attachments: the upload's answer (HTTP), and what the relay
 * tells a runner of the attachments that come with an input or a spawn.
 *
 * @module
 */

/** One stored attachment, as `POST /api/sessions/{sessionId}/attachments` lists it. */
export interface AttachmentInfo {
  attachmentId: string;
  /** The uploaded file's name (its last path segment, cleaned). */
  filename: string;
  /** `type/subtype`, as uploaded (or guessed from the name). */
  mimeType: string;
  /** Bytes. */
  size: number;
  /** ISO 8601: after this it answers 404 and its bytes are deleted. */
  expiresAt: string;
}

/** The answer of `POST /api/sessions/{sessionId}/attachments`. */
export interface UploadAttachmentsResponse {
  attachments: AttachmentInfo[];
}

/**
 * An attachment as the relay hands it to a runner with an input: the runner
 * fetches the bytes itself (`GET /api/attachments/{attachmentId}` with its
 * token), so the control message stays small whatever the files weigh.
 */
export interface AttachmentRef {
  attachmentId: string;
  filename: string;
  mimeType: string;
  size: number;
}

/** An image as pi's model input takes it (pi-ai's `ImageContent`). */
export interface ImageInput {
  type: "image";
  /** Base64. */
  data: string;
  mimeType: string;
}

/** Most attachments one input or spawn may carry. */
export const MAX_INPUT_ATTACHMENTS = 10;
