/**
 * The attachments of an input, made into what the agent can use: images go
 * to the model as image content (it sees them); any other file is written
 * into the session's folder under `.baton/attachments/<attachmentId>/<name>`
 * and named in the message by that path (the agent reads it with its tools,
 * as it would any file of the project: a PDF, a log, a CSV is no use to a
 * model as raw bytes, and a path keeps big files out of the context until
 * the agent decides to look).
 *
 * The daemon fetches the bytes from the relay over HTTP with its own token
 * (`GET /api/attachments/{id}`), one file at a time and streamed to disk, so
 * the control channel's messages stay small whatever the files weigh.
 *
 * @module
 */
import { join, sep } from "node:path";
import { Buffer } from "node:buffer";
import type { AttachmentRef, ImageInput } from "../../shared/attachments_api.ts";
import { RequestError } from "../control_link.ts";

/** Types a model takes as images (what pi's providers accept). */
export const MODEL_IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** Where, under a session's folder, its attached files are written. */
export const ATTACHMENTS_FOLDER = join(".baton", "attachments");

/** Options of {@linkcode prepareAttachments}. */
export interface PrepareAttachmentsOptions {
  /** The relay's http(s) address. */
  relayUrl: string;
  /** The runner's token (or key). */
  apiKey: string;
  /** The session's folder (inside a workspace root). */
  cwd: string;
  signal?: AbortSignal;
}

/** The input's text with the files named, and the images for the model. */
export interface PreparedInput {
  text: string;
  images: ImageInput[];
}

/**
 * The text and images a worker gets for an input: as sent when it has no
 * attachments (or its session is unknown here: the worker lookup answers that).
 */
export function withAttachments(
  req: { attachments?: AttachmentRef[] },
  text: string,
  cwd: string | undefined,
  config: { relayUrl?: string | null; apiKey?: string | null },
): Promise<PreparedInput> {
  if (!Array.isArray(req?.attachments) || !req.attachments.length || !cwd) {
    return Promise.resolve({ text, images: [] });
  }
  if (!config.relayUrl || !config.apiKey) {
    return Promise.reject(new RequestError("attachment_failed", "No relay to fetch from"));
  }
  return prepareAttachments(text, req.attachments, {
    relayUrl: config.relayUrl,
    apiKey: config.apiKey,
    cwd,
  });
}

/** Fetches the attachments of an input; a failure is a RequestError `attachment_failed`. */
export async function prepareAttachments(
  text: string,
  refs: AttachmentRef[],
  options: PrepareAttachmentsOptions,
): Promise<PreparedInput> {
  const images: ImageInput[] = [];
  const imageNames: string[] = [];
  const files: string[] = [];
  for (const ref of refs) {
    if (!isRef(ref)) throw new RequestError("bad_request", "Invalid attachment");
    const res = await fetchAttachment(ref, options);
    if (MODEL_IMAGE_TYPES.has(ref.mimeType)) {
      const bytes = await readCapped(res.body!, ref);
      images.push({
        type: "image",
        data: Buffer.from(bytes).toString("base64"),
        mimeType: ref.mimeType,
      });
      imageNames.push(ref.filename);
    } else {
      const path = await writeInFolder(res.body!, ref, options.cwd);
      files.push(`- ${path} (${ref.mimeType}, ${ref.size} bytes)`);
    }
  }
  const notes: string[] = [];
  if (imageNames.length) notes.push(`Attached images: ${imageNames.join(", ")}`);
  if (files.length) {
    notes.push(`Attached files, saved in the session's folder:\n${files.join("\n")}`);
  }
  return { text: notes.length ? `${text}\n\n${notes.join("\n\n")}`.trim() : text, images };
}

function isRef(r: AttachmentRef): boolean {
  return typeof r?.attachmentId === "string" && /^[0-9a-f-]{36}$/.test(r.attachmentId) &&
    typeof r.filename === "string" && r.filename !== "" && !/[\\/\0]/.test(r.filename) &&
    r.filename !== "." && r.filename !== ".." && typeof r.mimeType === "string" &&
    Number.isSafeInteger(r.size) && r.size >= 0;
}

async function fetchAttachment(
  ref: AttachmentRef,
  options: PrepareAttachmentsOptions,
): Promise<Response> {
  const url = `${options.relayUrl.replace(/\/+$/, "")}/api/attachments/${ref.attachmentId}`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: { "x-api-key": options.apiKey },
      ...(options.signal ? { signal: options.signal } : {}),
    });
  } catch (err) {
    throw failed(ref, String(err));
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw failed(ref, `the relay answered ${res.status}`);
  }
  return res;
}

function failed(ref: AttachmentRef, why: string): RequestError {
  return new RequestError(
    "attachment_failed",
    `Could not fetch the attachment '${ref.filename}': ${why}`,
  );
}

/** The whole body, refused past the size the relay announced. */
async function readCapped(
  body: ReadableStream<Uint8Array>,
  ref: AttachmentRef,
): Promise<Uint8Array> {
  const out = new Uint8Array(ref.size);
  let at = 0;
  for await (const chunk of body) {
    if (at + chunk.length > ref.size) throw failed(ref, "it is larger than announced");
    out.set(chunk, at);
    at += chunk.length;
  }
  if (at !== ref.size) throw failed(ref, "it is shorter than announced");
  return out;
}

/**
 * Makes each folder of `parts` under `base`, one at a time, refusing (false)
 * when one that exists is a symlink or not a folder: a recursive mkdir would
 * create folders wherever a planted symlink points.
 */
async function foldersInside(base: string, parts: string[]): Promise<boolean> {
  let at = base;
  for (const part of parts) {
    at = join(at, part);
    try {
      const st = await Deno.lstat(at);
      if (st.isSymlink || !st.isDirectory) return false;
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
      try {
        await Deno.mkdir(at);
      } catch (e) {
        if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
        if (!(await Deno.lstat(at)).isDirectory) return false;
      }
    }
  }
  return true;
}

/**
 * Writes the body to `<cwd>/.baton/attachments/<id>/<filename>` and returns
 * that path relative to `cwd`. Each folder on the way must be a plain
 * folder (a `.baton` the agent made a symlink to elsewhere is refused, and
 * nothing is created there) and the file must not exist (a symlink planted
 * there is not followed).
 */
async function writeInFolder(
  body: ReadableStream<Uint8Array>,
  ref: AttachmentRef,
  cwd: string,
): Promise<string> {
  const relDir = join(ATTACHMENTS_FOLDER, ref.attachmentId);
  const realCwd = await Deno.realPath(cwd);
  if (!await foldersInside(realCwd, relDir.split(sep))) {
    await body.cancel();
    throw new RequestError(
      "attachment_failed",
      `The attachments folder is not a plain folder inside the session's folder: '${relDir}'`,
    );
  }
  // Uploaded files are not the project's: git leaves the folder alone.
  await Deno.writeTextFile(join(realCwd, ATTACHMENTS_FOLDER, ".gitignore"), "*\n", {
    createNew: true,
  }).catch((err) => {
    if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
  });
  const rel = join(relDir, ref.filename);
  let file: Deno.FsFile;
  try {
    file = await Deno.open(join(realCwd, rel), { write: true, createNew: true, mode: 0o600 });
  } catch (err) {
    await body.cancel();
    if (err instanceof Deno.errors.AlreadyExists) return rel; // given with an earlier input
    throw err;
  }
  let size = 0;
  try {
    for await (const chunk of body) {
      size += chunk.length;
      if (size > ref.size) throw failed(ref, "it is larger than announced");
      let at = 0;
      while (at < chunk.length) at += await file.write(chunk.subarray(at));
    }
  } catch (err) {
    file.close();
    await Deno.remove(join(realCwd, rel)).catch(() => {});
    throw err;
  }
  file.close();
  return rel;
}
