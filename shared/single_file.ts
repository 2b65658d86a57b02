/**
 * baton as one file: `deno task bundle` writes the whole program (web
 * client included) into a single JavaScript file that runs with nothing but
 * the `deno` binary. Such a file has no module files beside it, so what a
 * source tree or a compiled binary loads from a file (a Worker's module)
 * comes from the program itself. The bundle's first line sets the marker
 * read here (scripts/bundle.ts writes it).
 *
 * @module
 */
/** The global the bundle's first line sets. */
export const SINGLE_FILE_MARKER = "__batonSingleFile";

/** Whether this program runs from the single-file bundle. */
export function isSingleFile(): boolean {
  return (globalThis as Record<string, unknown>)[SINGLE_FILE_MARKER] === true;
}

/** The prefix of a Worker's name that says which entry main.ts runs in it. */
export const THREAD_PREFIX = "baton-thread:";

/** The module-file Workers baton starts, by the name main.ts knows them. */
export type ThreadEntry = "store-thread" | "git-watch";

/**
 * Starts a module Worker. From a source tree or a compiled binary (which
 * carries the file) it is `url` itself; from the single-file bundle it is the
 * bundle, told by the Worker's name which entry to run (main.ts dispatches).
 */
export function moduleWorker(entry: ThreadEntry, url: URL): Worker {
  const name = `${THREAD_PREFIX}${entry}`;
  return new Worker(isSingleFile() ? Deno.mainModule : url.href, { type: "module", name });
}

/** The entry this thread was started for, when it is one of baton's Workers. */
export function threadEntry(): ThreadEntry | null {
  const name = (globalThis as { name?: unknown }).name;
  const inWorker = typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope !==
    "undefined";
  if (!inWorker || typeof name !== "string" || !name.startsWith(THREAD_PREFIX)) return null;
  return name.slice(THREAD_PREFIX.length) as ThreadEntry;
}
