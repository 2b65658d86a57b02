/**
 * Each runner's services as the client knows them: asked of
 * `GET /api/runners/{runnerId}/services` when a session of that runner
 * shows, and replaced whenever the relay passes on a new announcement
 * (`services` on the viewer socket). Also the cache of resolved sigils.
 *
 * @module
 */
import { signal } from "@preact/signals";
import type {
  RunnerServicesResponse,
  ServicesMessage,
  SigilDef,
  SigilResolved,
} from "../../shared/services_api.ts";
import { api } from "./api.ts";

/** Runner id → what its services offer (absent: not asked yet). */
export const runnerServices = signal<Record<string, RunnerServicesResponse>>({});
const asked = new Set<string>();

/** Asks the relay for a runner's services once (again after `force`). */
export function loadRunnerServices(runnerId: string, force = false): void {
  if (!runnerId || (asked.has(runnerId) && !force)) return;
  asked.add(runnerId);
  api<RunnerServicesResponse>(`/api/runners/${encodeURIComponent(runnerId)}/services`).then(
    (s) => runnerServices.value = { ...runnerServices.value, [runnerId]: s },
    () => asked.delete(runnerId),
  );
}

/** A runner announced its services again (the viewer socket). */
export function servicesChanged(msg: ServicesMessage): void {
  asked.add(msg.runnerId);
  runnerServices.value = { ...runnerServices.value, [msg.runnerId]: msg.services };
}

/** The tunnel prefix of a port on a runner (no trailing slash). */
export function tunnelBase(runnerId: string, port: number): string {
  return `/api/tunnel/runner/${encodeURIComponent(runnerId)}/${port}`;
}

/** How long a resolved sigil is reused before it is asked again. */
export const SIGIL_CACHE_MS = 30_000;
const resolved = new Map<string, { at: number; value: Promise<SigilResolved | null> }>();

/**
 * What a sigil's `resolve` endpoint says of `id` (through the tunnel, to
 * the port of the service that declared it); null when it cannot be asked
 * or does not answer usably. Cached for {@linkcode SIGIL_CACHE_MS}.
 */
export function resolveSigil(
  runnerId: string,
  def: SigilDef,
  id: string,
): Promise<SigilResolved | null> {
  const services = runnerServices.value[runnerId];
  const panel = services?.panels.find((p) => p.id === def.serviceId);
  if (!def.resolve || !panel) return Promise.resolve(null);
  const url = tunnelBase(runnerId, panel.port) +
    def.resolve.replaceAll("{id}", encodeURIComponent(id));
  const hit = resolved.get(url);
  if (hit && Date.now() - hit.at < SIGIL_CACHE_MS) return hit.value;
  const value = fetch(url, { credentials: "same-origin", headers: { accept: "application/json" } })
    .then(async (res) => {
      if (!res.ok) return null;
      const body = await res.json() as Record<string, unknown>;
      const text = (v: unknown, max: number) =>
        typeof v === "string" && v ? { ok: v.slice(0, max) } : null;
      const out: SigilResolved = {};
      const title = text(body.title ?? body.label ?? body.name, 120);
      if (title) out.title = title.ok;
      const description = text(body.description, 500);
      if (description) out.description = description.ok;
      const status = text(body.status, 40);
      if (status) out.status = status.ok;
      return out;
    })
    .catch(() => null);
  resolved.set(url, { at: Date.now(), value });
  if (resolved.size > 500) resolved.delete(resolved.keys().next().value!);
  return value;
}
