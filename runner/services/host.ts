/**
 * The runner's services seen from the daemon: found at start
 * (discovery.ts), their manifests read (manifest.ts), each started in its
 * own process (`baton _service`, service_main.ts), and what they offer put
 * together for `service_announce`.
 *
 * Why a process per service rather than `import()` in the daemon: a
 * service is someone's code with a server in it. In its own process, an
 * `init` that throws, never returns, spins or crashes the runtime takes
 * down that service only, never the daemon (and with it every session);
 * and the runner's key reaches it on stdin and lives only in its memory,
 * never in a process environment an agent's bash could read through
 * `/proc/<pid>/environ` (runner/_secrets.ts). The cost is one Deno process
 * (~40 MB) per service.
 *
 * @module
 */
import { join } from "node:path";
import type {
  PanelInfo,
  ServiceAnnouncePayload,
  ServiceInfo,
  SigilDef,
} from "../../shared/services_api.ts";
import { readLines } from "../_lines.ts";
import { withoutSecrets } from "../_secrets.ts";
import { selfCommand } from "../_self.ts";
import { parseDuration } from "../config.ts";
import { discoverServices, type FoundService } from "./discovery.ts";
import { readManifest, type ServiceManifest } from "./manifest.ts";
import { HOST_LINE, type ServiceStart, type ServiceToHost } from "./service_main.ts";

/** How long a service's `init` may take before it is called failed and stopped. */
export const INIT_TIMEOUT_MS = 20_000;

/**
 * `BATON_SERVICE_INIT_TIMEOUT` (a duration: `20s`, `500ms`, a bare number
 * of seconds) or {@linkcode INIT_TIMEOUT_MS}; an unusable value is ignored.
 */
export function serviceInitTimeoutMs(raw: string | undefined): number {
  if (!raw?.trim()) return INIT_TIMEOUT_MS;
  try {
    return parseDuration(raw, "BATON_SERVICE_INIT_TIMEOUT") || INIT_TIMEOUT_MS;
  } catch {
    return INIT_TIMEOUT_MS;
  }
}
/** How long `dispose()` may take at shutdown before the process is killed. */
export const DISPOSE_TIMEOUT_MS = 5_000;

/** Options of {@linkcode ServiceHost}. */
export interface ServiceHostOptions {
  batonDir: string;
  home: string;
  runnerId: string;
  relayUrl: string | null;
  apiKey: string | null;
  skipPlugins: boolean;
  /** Safe mode: no service starts, `~/.baton/services/` included. */
  skipServices?: boolean;
  log: (line: string) => void;
  /** Something a service offers changed after the first announcement (a late panel, a crash). */
  onChange?: () => void;
  initTimeoutMs?: number;
}

/** One discovered service and, while it runs, its process. */
interface Entry {
  info: ServiceInfo;
  manifest: ServiceManifest | null;
  child: Deno.ChildProcess | null;
  writer: WritableStreamDefaultWriter<Uint8Array> | null;
  panelPort: number | null;
  disposed: Promise<void> | null;
}

const encoder = new TextEncoder();

/** Starts, lists and stops the runner's services. */
export class ServiceHost {
  readonly #opts: ServiceHostOptions;
  readonly #entries: Entry[] = [];
  #loaded: Promise<void> | null = null;
  #stopping = false;

  constructor(options: ServiceHostOptions) {
    this.#opts = options;
  }

  /** Finds and starts every service; resolves once each is running or failed. */
  start(): Promise<void> {
    return this.#loaded ??= this.#start();
  }

  async #start(): Promise<void> {
    const o = this.#opts;
    if (o.skipServices) {
      o.log("services: skipped (safe mode)");
      return;
    }
    let found: FoundService[];
    try {
      found = await discoverServices(o);
    } catch (err) {
      o.log(`services: discovery failed: ${err instanceof Error ? err.message : err}`);
      return;
    }
    const ids = new Set<string>();
    const starting: Promise<void>[] = [];
    for (const f of found) {
      const e: Entry = {
        info: { id: f.dir, label: f.dir, icon: "square", source: f.source, status: "failed" },
        manifest: null,
        child: null,
        writer: null,
        panelPort: null,
        disposed: null,
      };
      this.#entries.push(e);
      try {
        const m = await readManifest(f.dir);
        e.info = { ...e.info, id: m.id, label: m.label, icon: m.icon };
        if (ids.has(m.id)) throw new Error(`Another service already has the id '${m.id}'`);
        ids.add(m.id);
        e.manifest = m;
      } catch (err) {
        this.#fail(e, `${err instanceof Error ? err.message : err}`);
        continue;
      }
      starting.push(this.#run(e));
    }
    await Promise.all(starting);
    const ok = this.#entries.filter((e) => e.info.status === "running").length;
    if (found.length > 0) o.log(`services: ${ok} of ${found.length} running`);
  }

  #fail(e: Entry, reason: string): void {
    const was = e.info.status;
    e.info = { ...e.info, status: "failed", error: reason.slice(0, 1000) };
    e.panelPort = null;
    this.#opts.log(`service ${e.info.id} failed: ${reason}`);
    if (was === "running") this.#opts.onChange?.();
  }

  /** Starts one service's process and waits for its init to end. */
  #run(e: Entry): Promise<void> {
    const o = this.#opts;
    const m = e.manifest!;
    const { cmd, args } = selfCommand("_service");
    let child: Deno.ChildProcess;
    try {
      child = new Deno.Command(cmd, {
        args,
        cwd: m.dir,
        // Never the daemon's credentials by inheritance: the key goes on stdin.
        env: withoutSecrets(),
        clearEnv: true,
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
    } catch (err) {
      this.#fail(e, `Could not start: ${err instanceof Error ? err.message : err}`);
      return Promise.resolve();
    }
    e.child = child;
    e.writer = child.stdin.getWriter();
    const start: ServiceStart = {
      manifest: m,
      runnerId: o.runnerId,
      relayUrl: o.relayUrl,
      apiKey: o.apiKey,
    };
    e.writer.write(encoder.encode(JSON.stringify(start) + "\n")).catch(() => {});
    const tag = `[service ${m.id}]`;
    (async () => {
      for await (const line of readLines(child.stderr)) o.log(`${tag} ${line}`);
    })().catch(() => {});

    return new Promise<void>((settled) => {
      let initDone = false;
      const done = () => {
        if (initDone) return;
        initDone = true;
        clearTimeout(timer);
        settled();
      };
      const timer = setTimeout(() => {
        if (initDone) return;
        this.#fail(e, `init() did not finish within ${o.initTimeoutMs ?? INIT_TIMEOUT_MS} ms`);
        this.#kill(e);
        done();
      }, o.initTimeoutMs ?? INIT_TIMEOUT_MS);
      const onMessage = (msg: ServiceToHost) => {
        switch (msg.t) {
          case "panel":
            if (!m.panelDir) o.log(`${tag} announced a panel but its manifest has no panel.dir`);
            e.panelPort = msg.port;
            if (initDone && e.info.status === "running") o.onChange?.();
            return;
          case "ready":
            e.info = { ...e.info, status: "running" };
            delete e.info.error;
            o.log(`${tag} running${e.panelPort ? `; panel on port ${e.panelPort}` : ""}`);
            done();
            return;
          case "failed":
            this.#fail(e, `init failed: ${msg.message}`);
            done();
            return;
        }
      };
      (async () => {
        for await (const line of readLines(child.stdout)) {
          if (!line.startsWith(HOST_LINE)) {
            o.log(`${tag} ${line}`);
            continue;
          }
          try {
            onMessage(JSON.parse(line.slice(HOST_LINE.length)));
          } catch {
            o.log(`${tag} ${line}`);
          }
        }
      })().catch(() => {});
      child.status.then((st) => {
        e.child = null;
        if (!initDone) {
          this.#fail(e, `exited during init (${st.signal ?? `exit code ${st.code}`})`);
          done();
        } else if (!this.#stopping && e.info.status === "running") {
          this.#fail(e, `exited (${st.signal ?? `exit code ${st.code}`})`);
        }
      });
    });
  }

  #kill(e: Entry): void {
    try {
      e.child?.kill("SIGKILL");
    } catch { /* gone */ }
  }

  /** What the services offer, with `~/.baton/triggers.json` merged in (runner-level triggers). */
  async announcement(): Promise<ServiceAnnouncePayload> {
    await this.start();
    const triggerDefs: unknown[] = [];
    const sigils: SigilDef[] = [];
    const panels: PanelInfo[] = [];
    for (const e of this.#entries) {
      if (e.info.status !== "running" || !e.manifest) continue;
      triggerDefs.push(...e.manifest.triggers);
      for (const s of e.manifest.sigils) {
        if (s && typeof s === "object" && !Array.isArray(s)) {
          sigils.push({ ...(s as SigilDef), serviceId: e.manifest.id });
        }
      }
      if (e.panelPort) {
        panels.push({
          id: e.manifest.id,
          title: e.manifest.label,
          icon: e.manifest.icon,
          port: e.panelPort,
        });
      }
    }
    const seen = new Set(triggerDefs.map((d) => (d as { type?: unknown })?.type));
    for (const d of await runnerTriggers(this.#opts.batonDir, this.#opts.log)) {
      // A service's own definition wins over the runner file's of the same type.
      if (!seen.has((d as { type?: unknown })?.type)) triggerDefs.push(d);
    }
    return { triggerDefs, panels, sigils, services: this.list() };
  }

  /** Every discovered service with its status. */
  list(): ServiceInfo[] {
    return this.#entries.map((e) => ({ ...e.info }));
  }

  /** Calls every service's `dispose()` and waits (a bounded time) for the processes to end. */
  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#loaded?.catch(() => {});
    await Promise.all(this.#entries.map((e) => this.#stopOne(e)));
  }

  #stopOne(e: Entry): Promise<void> {
    const child = e.child;
    if (!child) return Promise.resolve();
    return e.disposed ??= (async () => {
      await e.writer?.write(encoder.encode('{"t":"stop"}\n')).catch(() => {});
      const timeout = new Promise<"timeout">((r) => {
        const t = setTimeout(() => r("timeout"), DISPOSE_TIMEOUT_MS);
        child.status.finally(() => clearTimeout(t));
      });
      if (await Promise.race([child.status, timeout]) === "timeout") {
        this.#opts.log(`service ${e.info.id}: dispose() did not end it in time; killing it`);
        this.#kill(e);
        await child.status;
      }
    })();
  }
}

/** `~/.baton/triggers.json`: the runner's own trigger definitions (bare array or `{triggers}`). */
export async function runnerTriggers(
  batonDir: string,
  log: (line: string) => void,
): Promise<unknown[]> {
  const path = join(batonDir, "triggers.json");
  try {
    const parsed = JSON.parse(await Deno.readTextFile(path));
    return Array.isArray(parsed) ? parsed : Array.isArray(parsed?.triggers) ? parsed.triggers : [];
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) {
      log(`ignoring ${path}: ${err instanceof Error ? err.message : err}`);
    }
    return [];
  }
}
