/**
 * `baton _service`: one runner service in its own process, started by the
 * daemon (runner/services/host.ts). It reads one JSON line on stdin (the
 * service's checked manifest, the runner id, the relay URL and the runner's
 * key), lets the service read the key as `BATON_RUNNER_API_KEY` through
 * `Deno.env.get` and `process.env` without putting it in the process's
 * environment (a program the service starts would inherit it, and its
 * `/proc/<pid>/environ` is readable by an agent's bash), imports the
 * entry module, constructs its default export and calls
 * `init(service, {announcePanel})`. A `stop` line calls `dispose()`.
 *
 * What it tells the daemon goes on stdout as lines starting with
 * {@linkcode HOST_LINE}; the service's own `console.log` goes to stderr, so
 * the protocol cannot be mixed up with it.
 *
 * @module
 */
import { pathToFileURL } from "node:url";
import { readLines } from "../_lines.ts";
import type { ServiceManifest } from "./manifest.ts";

/** Prefix of the lines this process writes for the daemon. */
export const HOST_LINE = "@@baton-service ";

/** The first line the daemon sends. */
export interface ServiceStart {
  manifest: ServiceManifest;
  runnerId: string;
  relayUrl: string | null;
  apiKey: string | null;
}

/** What the service process tells the daemon. */
export type ServiceToHost =
  | { t: "panel"; port: number }
  | { t: "ready" }
  | { t: "failed"; message: string }
  | { t: "disposed" };

/** The first argument of a service's `init`. */
export interface ServiceContext {
  id: string;
  label: string;
  /** The service's folder. */
  dir: string;
  /** Its static panel folder, or null. */
  panelDir: string | null;
  runnerId: string;
  relayUrl: string | null;
  /** Writes a line to the runner's log, prefixed with the service's id. */
  log: (line: string) => void;
}

/** What a service module's default export is constructed into. */
interface ServiceInstance {
  id?: unknown;
  init?: (service: ServiceContext, api: { announcePanel: (port: number) => void }) => unknown;
  dispose?: () => unknown;
}

const encoder = new TextEncoder();

function tell(msg: ServiceToHost): void {
  Deno.stdout.writeSync(encoder.encode(HOST_LINE + JSON.stringify(msg) + "\n"));
}

function message(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 1000);
}

/** Runs one service until the daemon says stop (or its stdin closes). */
export async function serviceMain(argv: string[]): Promise<number> {
  if (argv[0] === "--plugins" && argv[1] && argv[2]) {
    const { pluginPaths } = await import("./discovery.ts");
    console.log(JSON.stringify({ paths: await pluginPaths(argv[1], argv[2]) }));
    return 0;
  }
  // The service's console output is for the runner's log, not the protocol.
  console.log = console.info = console.debug = console.error;
  const lines = readLines(Deno.stdin.readable);
  const first = await lines.next();
  if (first.done) return 2;
  const start = JSON.parse(first.value) as ServiceStart;
  const m = start.manifest;
  if (start.apiKey) keepSecretInMemory("BATON_RUNNER_API_KEY", start.apiKey);
  if (start.relayUrl) Deno.env.set("BATON_RELAY_URL", start.relayUrl);
  Deno.env.set("BATON_RUNNER_ID", start.runnerId);
  Deno.env.set("BATON_SERVICE_DIR", m.dir);
  Deno.chdir(m.dir);

  let instance: ServiceInstance | null = null;
  let disposed = false;
  const dispose = async () => {
    if (disposed) return;
    disposed = true;
    try {
      await instance?.dispose?.();
    } catch (err) {
      console.error(`dispose failed: ${message(err)}`);
    }
  };
  // A service that throws later (an unhandled rejection, an error in a
  // handler) is reported and ends this process only.
  globalThis.addEventListener("unhandledrejection", (e) => {
    e.preventDefault();
    console.error(`unhandled rejection: ${message(e.reason)}`);
  });

  try {
    const mod = await import(pathToFileURL(m.entry).href);
    const Exported = mod.default;
    if (typeof Exported !== "function" && (typeof Exported !== "object" || !Exported)) {
      throw new Error(`${m.entry} has no default export (a class with id, init and dispose)`);
    }
    instance = typeof Exported === "function" ? new Exported() : Exported;
    const id = instance!.id ?? (Exported as { id?: unknown }).id;
    if (id !== undefined && id !== m.id) {
      throw new Error(`The class's id '${String(id)}' differs from the manifest's '${m.id}'`);
    }
    if (typeof instance!.init !== "function") throw new Error("The service has no init()");
    const context: ServiceContext = {
      id: m.id,
      label: m.label,
      dir: m.dir,
      panelDir: m.panelDir,
      runnerId: start.runnerId,
      relayUrl: start.relayUrl,
      log: (line) => console.error(line),
    };
    await instance!.init(context, {
      announcePanel(port: number) {
        if (!Number.isInteger(port) || port < 1 || port > 65535) {
          throw new RangeError(`announcePanel needs a port from 1 to 65535: '${port}'`);
        }
        tell({ t: "panel", port });
      },
    });
    tell({ t: "ready" });
  } catch (err) {
    tell({ t: "failed", message: message(err) });
    await dispose();
    return 1;
  }

  for await (const line of lines) {
    if (line.trim() === '{"t":"stop"}') break;
  }
  await dispose();
  tell({ t: "disposed" });
  return 0;
}

/**
 * Makes `Deno.env.get(name)` and `Deno.env.has(name)` (and so node's
 * `process.env[name]`) answer `value` while the real environment never holds
 * it: `Deno.env.set` would, and every program the service starts (a dev
 * server, git) would inherit the key in its `/proc/<pid>/environ`. Not
 * listed by `toObject()` either, which is what children's environments are
 * made of; a service passes the key to a program of its own explicitly.
 */
function keepSecretInMemory(name: string, value: string): void {
  const env = Deno.env;
  const get = env.get.bind(env);
  const has = env.has.bind(env);
  Object.defineProperty(env, "get", { value: (k: string) => k === name ? value : get(k) });
  Object.defineProperty(env, "has", { value: (k: string) => k === name || has(k) });
}
