/**
 * Files uploaded into a session: stored under `<data-dir>/attachments` by
 * their sha-256 (one blob for equal bytes), with a row per upload saying
 * whose it is and until when. Uploads are read as they stream in
 * (`_multipart.ts`) into owner-only temporary files, each capped, so no
 * upload is ever held in memory; a sweep removes expired rows, the rows of
 * deleted sessions, and blobs that no row names any more.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { join } from "node:path";
import type { AttachmentInfo } from "../shared/attachments_api.ts";
import { type Clock, isoNow, systemClock } from "./_clock.ts";
import { readMultipart } from "./_multipart.ts";
import { notFound } from "./errors.ts";
import type { AsyncStore, AttachmentRecord, NewAttachment } from "./store/mod.ts";

/** What the relay accepts and keeps; see docs/configuration.md. */
export interface AttachmentPolicy {
  /** Largest file (bytes). */
  maxFileBytes: number;
  /** Most files in one upload request. */
  maxFiles: number;
  /** How long an attachment can be read after its upload (ms). */
  ttlMs: number;
  /** Most bytes one user's unexpired attachments may hold; 0: no limit. */
  userMaxBytes: number;
}

const MiB = 1024 * 1024;

/** 10 MiB a file, 10 files a request, kept 7 days, 1 GiB per user. */
export const DEFAULT_ATTACHMENT_POLICY: AttachmentPolicy = {
  maxFileBytes: 10 * MiB,
  maxFiles: 10,
  ttlMs: 7 * 86_400_000,
  userMaxBytes: 1024 * MiB,
};

/** Bytes a form field that is not a file may carry (it is read and dropped). */
const MAX_FIELD_BYTES = 64 * 1024;
/** Headers of one part (name, file name, type). */
const MAX_PART_HEADER_BYTES = 8 * 1024;

/** Most bytes an upload request may send under `policy`: its files plus room for the framing. */
export function maxUploadBytes(policy: AttachmentPolicy): number {
  return policy.maxFiles * policy.maxFileBytes + MiB;
}

function quotaMessage(userMaxBytes: number): string {
  return `Your attachments would pass their quota of ${userMaxBytes} bytes; ` +
    "older ones free their space when they expire";
}

/** An upload refused for its size (413): a file over the cap, or the user's quota. */
export class UploadTooLarge extends Error {
  constructor(readonly code: "file_too_large" | "quota_exceeded", message: string) {
    super(message);
    this.name = "UploadTooLarge";
  }
}

/** An upload with nothing to store (400). */
export class NoFiles extends Error {
  constructor() {
    super("Send one or more files in the form field 'file' or 'files'");
    this.name = "NoFiles";
  }
}

/** Who reads an attachment: the account, and the one runner its credential is bound to. */
export interface Reader {
  userId: string;
  scope: string;
  runnerId: string | null;
}

/** Options of {@linkcode Attachments}. */
export interface AttachmentsOptions {
  store: AsyncStore;
  /** Folder of the blobs (`<data-dir>/attachments`); created owner-only. */
  dir: string;
  policy?: AttachmentPolicy;
  clock?: Clock;
  log?: (line: string) => void;
}

/** A file of an upload in progress: its temporary file, hash and size. */
interface Incoming {
  tmp: string;
  file: Deno.FsFile;
  hash: ReturnType<typeof createHash>;
  size: number;
  filename: string;
  mimeType: string;
  sha256?: string;
}

/** The attachment store and its sweep. */
export class Attachments {
  readonly policy: AttachmentPolicy;
  readonly #store: AsyncStore;
  readonly #dir: string;
  readonly #tmp: string;
  readonly #clock: Clock;
  readonly #log: (line: string) => void;
  #timer: number | null = null;
  /**
   * Blob moves (an upload's renames and rows) and blob deletions (the
   * sweep's) take turns: a sweep never deletes a blob an upload is naming.
   */
  #blobs: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(options: AttachmentsOptions) {
    this.policy = options.policy ?? DEFAULT_ATTACHMENT_POLICY;
    this.#store = options.store;
    this.#dir = options.dir;
    this.#tmp = join(options.dir, "tmp");
    this.#clock = options.clock ?? systemClock;
    this.#log = options.log ?? (() => {});
  }

  /** How often the sweep runs: a quarter of the lifetime, from 1 s to 10 minutes. */
  get sweepEveryMs(): number {
    return Math.min(10 * 60_000, Math.max(1000, Math.floor(this.policy.ttlMs / 4)));
  }

  /** Creates the folders, drops temporary files an earlier process left, sweeps now and then. */
  async start(): Promise<void> {
    await Deno.mkdir(this.#tmp, { recursive: true, mode: 0o700 });
    await Deno.remove(this.#tmp, { recursive: true });
    await Deno.mkdir(this.#tmp, { recursive: true, mode: 0o700 });
    const sweep = () => {
      this.sweep().catch((err) => this.#log(`attachment sweep failed: ${err}`));
    };
    sweep();
    this.#timer = this.#clock.setInterval(sweep, this.sweepEveryMs);
  }

  /** Stops the sweep; waits for blob work in progress. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== null) this.#clock.clearInterval(this.#timer);
    this.#timer = null;
    await this.#blobs.catch(() => {});
  }

  /** Where the bytes of the blob `sha256` are. */
  blobPath(sha256: string): string {
    return join(this.#dir, sha256);
  }

  #turn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#blobs.then(fn, fn);
    this.#blobs = run.catch(() => {});
    return run;
  }

  /**
   * Stores the files of a multipart body into a session the caller owns
   * (checked by the caller). All or nothing: a file over the cap, the quota
   * passed or a malformed body stores none of them.
   */
  async upload(
    userId: string,
    sessionId: string,
    body: ReadableStream<Uint8Array>,
    boundary: string,
  ): Promise<AttachmentInfo[]> {
    const { maxFileBytes, maxFiles, userMaxBytes } = this.policy;
    const held = userMaxBytes > 0
      ? await this.#store.attachments.userBytes(userId, this.#now())
      : 0;
    const files: Incoming[] = [];
    let total = 0;
    try {
      await readMultipart(body, boundary, async (part) => {
        if ((part.name !== "file" && part.name !== "files") || part.filename === null) {
          let n = 0;
          return {
            write(chunk) {
              n += chunk.length;
              if (n > MAX_FIELD_BYTES) {
                throw new UploadTooLarge(
                  "file_too_large",
                  `Form field '${part.name.slice(0, 100)}' is larger than ${MAX_FIELD_BYTES} bytes`,
                );
              }
            },
            end() {},
          };
        }
        if (files.length >= maxFiles) {
          throw new UploadTooLarge("file_too_large", `More than ${maxFiles} files in one upload`);
        }
        const tmp = join(this.#tmp, crypto.randomUUID());
        const file = await Deno.open(tmp, { write: true, createNew: true, mode: 0o600 });
        const f: Incoming = {
          tmp,
          file,
          hash: createHash("sha256"),
          size: 0,
          filename: cleanFilename(part.filename),
          mimeType: cleanMimeType(part.contentType, part.filename),
        };
        files.push(f);
        return {
          async write(chunk) {
            f.size += chunk.length;
            total += chunk.length;
            if (f.size > maxFileBytes) {
              throw new UploadTooLarge(
                "file_too_large",
                `File is larger than ${maxFileBytes} bytes: '${f.filename}'`,
              );
            }
            if (userMaxBytes > 0 && held + total > userMaxBytes) {
              throw new UploadTooLarge("quota_exceeded", quotaMessage(userMaxBytes));
            }
            f.hash.update(chunk);
            let at = 0;
            while (at < chunk.length) at += await f.file.write(chunk.subarray(at));
          },
          end() {
            f.sha256 = f.hash.digest("hex");
            f.file.close();
          },
        };
      }, { maxHeaderBytes: MAX_PART_HEADER_BYTES, maxParts: maxFiles + 20 });
      if (files.length === 0) throw new NoFiles();
      return await this.#turn(() => this.#commit(userId, sessionId, files));
    } finally {
      for (const f of files) {
        try {
          f.file.close();
        } catch {
          // Closed at the part's end.
        }
        await Deno.remove(f.tmp).catch(() => {});
      }
    }
  }

  /** Moves the uploaded files to their blobs and records them, in one turn of the blob queue. */
  async #commit(userId: string, sessionId: string, files: Incoming[]): Promise<AttachmentInfo[]> {
    // Checked again here, one commit at a time: uploads that ran side by side each
    // saw the quota as it was when they began, and together may pass it.
    const { userMaxBytes } = this.policy;
    if (userMaxBytes > 0) {
      const held = await this.#store.attachments.userBytes(userId, this.#now());
      if (held + files.reduce((n, f) => n + f.size, 0) > userMaxBytes) {
        throw new UploadTooLarge("quota_exceeded", quotaMessage(userMaxBytes));
      }
    }
    for (const f of files) {
      const target = this.blobPath(f.sha256!);
      try {
        await Deno.lstat(target);
      } catch (err) {
        if (!(err instanceof Deno.errors.NotFound)) throw err;
        await Deno.rename(f.tmp, target);
      }
    }
    const now = this.#clock.now();
    const rows: NewAttachment[] = files.map((f) => ({
      attachmentId: crypto.randomUUID(),
      sessionId,
      userId,
      sha256: f.sha256!,
      filename: f.filename,
      mimeType: f.mimeType,
      size: f.size,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + this.policy.ttlMs).toISOString(),
    }));
    await this.#store.attachments.insertAll(rows);
    return rows.map(info);
  }

  /**
   * An attachment `reader` may read: its session's owner, through a
   * credential not bound to another runner. Unknown, foreign and expired
   * ids throw the same 404.
   */
  async get(reader: Reader, attachmentId: string): Promise<AttachmentRecord> {
    const a = await this.#store.attachments.get(attachmentId, this.#now());
    if (!a || a.userId !== reader.userId) throw notFound("Attachment");
    if (reader.scope === "runner" && reader.runnerId === null) throw notFound("Attachment");
    if (reader.runnerId !== null && reader.runnerId !== a.runnerId) throw notFound("Attachment");
    return a;
  }

  /** What the API says of an attachment. */
  info(a: AttachmentRecord): AttachmentInfo {
    return info(a);
  }

  /**
   * Deletes expired rows and those of deleted sessions, then every blob no
   * row names. Returns how many rows and blobs went.
   */
  async sweep(): Promise<{ rows: number; blobs: number }> {
    if (this.#closed) return { rows: 0, blobs: 0 };
    const now = this.#now();
    const rows = await this.#store.attachments.deleteDead(now);
    const blobs = await this.#turn(async () => {
      let n = 0;
      for await (const e of Deno.readDir(this.#dir)) {
        if (this.#closed) break;
        if (!e.isFile || !/^[0-9a-f]{64}$/.test(e.name)) continue;
        if (await this.#store.attachments.referenced(e.name)) continue;
        await Deno.remove(join(this.#dir, e.name)).catch(() => {});
        n++;
      }
      return n;
    });
    if (rows > 0 || blobs > 0) {
      this.#log(`attachment sweep removed ${rows} expired attachments and ${blobs} files`);
    }
    return { rows, blobs };
  }

  #now(): string {
    return isoNow(this.#clock);
  }
}

function info(a: Pick<AttachmentRecord, keyof AttachmentInfo>): AttachmentInfo {
  return {
    attachmentId: a.attachmentId,
    filename: a.filename,
    mimeType: a.mimeType,
    size: a.size,
    expiresAt: a.expiresAt,
  };
}

/**
 * A file name safe to store and show: its last path segment, without control
 * or bidirectional-override characters, at most 200 characters; "file" when
 * nothing is left.
 */
export function cleanFilename(raw: string): string {
  const base = raw.split(/[\\/]/).pop() ?? "";
  const clean = [...base.replace(/[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu, "").trim()]
    .slice(0, 200).join("");
  return clean === "" || clean === "." || clean === ".." ? "file" : clean;
}

/** Types by file name ending, for a part sent without a (useful) type. */
const BY_EXTENSION: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  txt: "text/plain",
  md: "text/markdown",
  json: "application/json",
  csv: "text/csv",
  html: "text/html",
  htm: "text/html",
  svg: "image/svg+xml",
};

/** The part's type as `type/subtype` (parameters dropped), or one guessed from the name. */
export function cleanMimeType(raw: string | null, filename: string): string {
  const t = (raw ?? "").split(";")[0]!.trim().toLowerCase();
  const token = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$/;
  if (token.test(t) && t !== "application/octet-stream") return t;
  const ext = /\.([a-z0-9]{1,8})$/i.exec(filename)?.[1]?.toLowerCase();
  return (ext && BY_EXTENSION[ext]) ?? "application/octet-stream";
}
