/**
 * The runner's files through the relay: listing, search and reads are
 * passed to the runner, which checks every path against its workspace roots
 * (the relay never touches a runner's disk). A read's content streams from
 * the runner's `chunk` frames to the HTTP client with a bounded window
 * (chunked_reply.ts), so the relay holds ~512 KiB of a 10 MiB read at most.
 *
 * @module
 */
import type {
  ListFilesRequest,
  ListFilesResponse,
  ReadFileRequest,
  SearchFilesRequest,
  SearchFilesResponse,
} from "../shared/workspace_files_api.ts";
import { ChunkQueue } from "./chunked_reply.ts";
import { RateLimited, rejected } from "./errors.ts";
import type { RunnerRegistry } from "./runner_registry.ts";

/** How long the runner may take to list or search, and between two pieces of a read. */
const FILES_TIMEOUT_MS = 30_000;
/**
 * Reads one runner streams at once: each holds up to READ_WINDOW_CHUNKS
 * (512 KiB) in the relay, so a runner's reads hold 4 MiB at most.
 */
export const MAX_READS_PER_RUNNER = 8;

/** Options of {@linkcode WorkspaceFilesService}. */
export interface WorkspaceFilesOptions {
  runners: Pick<RunnerRegistry, "connectedRunner">;
}

/** The file requests of the API, each asked of the caller's runner. */
export class WorkspaceFilesService {
  readonly #runners: WorkspaceFilesOptions["runners"];
  readonly #reads = new Map<string, number>();

  constructor(options: WorkspaceFilesOptions) {
    this.#runners = options.runners;
  }

  async list(userId: string, runnerId: string, body: ListFilesRequest): Promise<ListFilesResponse> {
    const link = await this.#runners.connectedRunner(userId, runnerId);
    const res = await link.request("files", { path: body.path }, FILES_TIMEOUT_MS);
    const r = res as Partial<ListFilesResponse>;
    if (typeof r?.path !== "string" || !Array.isArray(r.files)) throw badAnswer("files");
    return { ok: true, path: r.path, files: r.files, truncated: r.truncated === true };
  }

  async search(
    userId: string,
    runnerId: string,
    body: SearchFilesRequest,
  ): Promise<SearchFilesResponse> {
    const link = await this.#runners.connectedRunner(userId, runnerId);
    const res = await link.request("search_files", body, FILES_TIMEOUT_MS);
    const r = res as Partial<SearchFilesResponse>;
    if (!Array.isArray(r?.files)) throw badAnswer("search_files");
    return {
      ok: true,
      files: r.files.filter((f) => typeof f === "string"),
      truncated: r.truncated === true,
      engine: r.engine === "ripgrep" ? "ripgrep" : "walker",
    };
  }

  /**
   * Starts a read and waits for its first piece (or its refusal, which then
   * throws with the runner's code); answers the body of `{ok, content,
   * encoding, size, mtime}` as a stream. A failure after that breaks the
   * stream, so the client never takes a cut file for a whole one.
   */
  async read(
    userId: string,
    runnerId: string,
    body: ReadFileRequest,
  ): Promise<ReadableStream<Uint8Array>> {
    const link = await this.#runners.connectedRunner(userId, runnerId);
    const held = this.#reads.get(runnerId) ?? 0;
    if (held >= MAX_READS_PER_RUNNER) {
      throw new RateLimited(
        "too_many_reads",
        `This runner is already streaming ${held} files; try again in a moment`,
        1,
      );
    }
    this.#reads.set(runnerId, held + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      const n = (this.#reads.get(runnerId) ?? 1) - 1;
      if (n <= 0) this.#reads.delete(runnerId);
      else this.#reads.set(runnerId, n);
    };
    const encoding = body.encoding ?? "utf8";
    const queue = new ChunkQueue();
    queue.settle(link.request("read_file", { path: body.path, encoding }, FILES_TIMEOUT_MS, queue));
    try {
      await queue.ready();
    } catch (err) {
      release();
      throw err;
    }
    const enc = new TextEncoder();
    let head = false;
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          if (!head) {
            head = true;
            controller.enqueue(enc.encode('{"ok":true,"content":"'));
            return;
          }
          const next = await queue.next();
          if ("piece" in next) {
            // Base64 needs no escaping; text is escaped as JSON, piece by piece.
            const piece = encoding === "base64"
              ? next.piece
              : JSON.stringify(next.piece).slice(1, -1);
            controller.enqueue(enc.encode(piece));
            return;
          }
          const t = next.result as { size?: unknown; mtime?: unknown; chunks?: unknown };
          if (
            t?.chunks !== queue.taken || typeof t.size !== "number" ||
            !(t.mtime === null || typeof t.mtime === "string")
          ) {
            throw badAnswer("read_file");
          }
          const tail = JSON.stringify({ encoding, size: t.size, mtime: t.mtime }).slice(1);
          controller.enqueue(enc.encode(`",${tail}`));
          controller.close();
          release();
        } catch (err) {
          release();
          controller.error(err);
        }
      },
      cancel() {
        queue.cancel();
        release();
      },
    }, { highWaterMark: 0 });
  }
}

function badAnswer(op: string) {
  return rejected("bad_runner_answer", `Runner sent an invalid answer to '${op}'`);
}
