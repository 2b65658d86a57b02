/**
 * Runner services as the relay knows them: what each runner last announced
 * in `service_announce` (its panels, sigil definitions and services with
 * their status; the trigger definitions go to the trigger catalog), checked
 * here, kept in memory while the relay runs, and passed on to the owner's
 * viewers. A runner announces again on every connection, so nothing of it
 * needs storing.
 *
 * Not to confuse with `services.ts`: the git `service_message` channel.
 *
 * @module
 */
import {
  checkSigilDef,
  ICON_NAME,
  MAX_SERVICES,
  MAX_SIGILS,
  type PanelInfo,
  type RunnerServicesResponse,
  SERVICE_ID,
  type ServiceInfo,
  type SigilDef,
} from "../shared/services_api.ts";
import type { RelayToViewer } from "../shared/protocol.ts";

/** Options of {@linkcode RunnerServices}. */
export interface RunnerServicesOptions {
  /** The connected viewers of a user (every one hears of a change). */
  viewersOf: (userId: string) => Iterable<{ send(msg: RelayToViewer): void }>;
}

const EMPTY: RunnerServicesResponse = { serviceIds: [], panels: [], sigils: [], services: [] };

function text(v: unknown, max: number, fallback: string): string {
  return typeof v === "string" && v.trim() ? v.trim().slice(0, max) : fallback;
}

/** A panel as announced, or null when it is unusable. */
function checkPanel(p: unknown): PanelInfo | null {
  const o = p as Record<string, unknown> | null;
  if (!o || typeof o !== "object" || typeof o.id !== "string" || !SERVICE_ID.test(o.id)) {
    return null;
  }
  if (!Number.isInteger(o.port) || (o.port as number) < 1 || (o.port as number) > 65535) {
    return null;
  }
  return {
    id: o.id,
    title: text(o.title, 100, o.id),
    icon: typeof o.icon === "string" && ICON_NAME.test(o.icon) && o.icon.length <= 64
      ? o.icon
      : "square",
    port: o.port as number,
  };
}

/** A service's status as announced, or null when it is unusable. */
function checkService(s: unknown): ServiceInfo | null {
  const o = s as Record<string, unknown> | null;
  if (!o || typeof o !== "object" || typeof o.id !== "string" || !o.id) return null;
  const info: ServiceInfo = {
    id: o.id.slice(0, 300),
    label: text(o.label, 100, o.id.slice(0, 100)),
    icon: typeof o.icon === "string" && ICON_NAME.test(o.icon) && o.icon.length <= 64
      ? o.icon
      : "square",
    source: o.source === "plugin" ? "plugin" : "home",
    status: o.status === "running" ? "running" : "failed",
  };
  if (typeof o.error === "string" && o.error) info.error = o.error.slice(0, 1000);
  return info;
}

/** The services each connected runner announced. */
export class RunnerServices {
  readonly #opts: RunnerServicesOptions;
  readonly #byRunner = new Map<string, RunnerServicesResponse>();

  constructor(options: RunnerServicesOptions) {
    this.#opts = options;
  }

  /**
   * Keeps what a runner announced (what cannot be used is dropped and named
   * in the returned problems) and tells its owner's viewers.
   */
  announce(
    runner: { runnerId: string; userId: string },
    msg: { panels?: unknown; sigils?: unknown; services?: unknown },
  ): string[] {
    const problems: string[] = [];
    const list = <T>(v: unknown, max: number) => (Array.isArray(v) ? v.slice(0, max) : []) as T[];
    const services = list<unknown>(msg.services, MAX_SERVICES).map(checkService)
      .filter((s) => s !== null);
    const running = new Set(services.filter((s) => s.status === "running").map((s) => s.id));
    const panels: PanelInfo[] = [];
    for (const p of list<unknown>(msg.panels, MAX_SERVICES)) {
      const panel = checkPanel(p);
      if (!panel) problems.push("Panel ignored: it needs an id and a port");
      else if (!panels.some((x) => x.id === panel.id)) panels.push(panel);
    }
    const sigils: SigilDef[] = [];
    for (const d of list<unknown>(msg.sigils, MAX_SIGILS)) {
      const def = checkSigilDef(d);
      if (typeof def === "string") problems.push(`Sigil ignored: ${def}`);
      else if (!sigils.some((s) => s.type === def.type)) sigils.push(def);
    }
    // A runner without a `services` list (an older one) has its panels' ids as services.
    const serviceIds = services.length > 0 ? [...running] : panels.map((p) => p.id);
    const view: RunnerServicesResponse = { serviceIds, panels, sigils, services };
    this.#byRunner.set(runner.runnerId, view);
    for (const v of this.#opts.viewersOf(runner.userId)) {
      v.send({ t: "services", runnerId: runner.runnerId, services: view });
    }
    return problems;
  }

  /** What the runner last announced (empty before it has). */
  view(runnerId: string): RunnerServicesResponse {
    return this.#byRunner.get(runnerId) ?? EMPTY;
  }

  /** The sigil definitions of a runner (for its agents). */
  sigils(runnerId: string): SigilDef[] {
    return this.view(runnerId).sigils;
  }
}
