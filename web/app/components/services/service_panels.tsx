/**
 * The Services panel of a session: the panels its runner's services serve,
 * one at a time in an iframe 280 px tall, loaded through the tunnel
 * (`/api/tunnel/runner/{runnerId}/{port}/`) so that its relative
 * `./api/...` calls reach the service. The iframe is sandboxed (scripts and
 * forms, no same-origin: the panel cannot read the relay's cookie or call
 * `/api` as the person), and services that failed to load are listed with
 * the reason.
 *
 * Where the tunnel does not let the sandboxed panel's own requests through,
 * this page makes them for it: a `baton:fetch` message from the iframe is
 * answered with the response of the same request, only ever to a path under
 * that panel's own tunnel prefix (see docs/services.md, "Panels").
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { PanelInfo } from "../../../../shared/services_api.ts";
import { loadRunnerServices, runnerServices, tunnelBase } from "../../runner_services.ts";
import { Icon } from "../icon.tsx";
import { PanelNote, SidePanel } from "../side_panel.tsx";
import { serviceIcon } from "./sigil_pill.tsx";

/** The iframe's sandbox: scripts and forms run, in an opaque origin. */
export const PANEL_SANDBOX = "allow-scripts allow-forms allow-popups";
/** Spec: panels are 280 px tall. */
export const PANEL_HEIGHT = 280;
/** Largest answer relayed to a panel over postMessage. */
const MAX_BRIDGED_BYTES = 1024 * 1024;

/** The panels of runner `runnerId`. */
export function ServicePanels({ runnerId, onClose }: { runnerId: string; onClose: () => void }) {
  useEffect(() => loadRunnerServices(runnerId, true), [runnerId]);
  const services = runnerServices.value[runnerId];
  const panels = services?.panels ?? [];
  const [chosen, setChosen] = useState<string | null>(null);
  const panel = panels.find((p) => p.id === chosen) ?? panels[0];
  const failed = (services?.services ?? []).filter((s) => s.status === "failed");
  return (
    <SidePanel
      name="services"
      class="services-panel"
      icon="square"
      title="Services"
      closeTitle="Close"
      onClose={onClose}
    >
      {panels.length > 1 && (
        <div class="term-tabs" role="group" aria-label="Service panels">
          {panels.map((p) => (
            <span key={p.id} class={`term-tab ${p.id === panel?.id ? "on" : ""}`}>
              <button
                type="button"
                aria-pressed={p.id === panel?.id}
                onClick={() => setChosen(p.id)}
              >
                <Icon name={serviceIcon(p.icon)} size={12} /> {p.title}
              </button>
            </span>
          ))}
        </div>
      )}
      {!services && <PanelNote busy>Asking the runner…</PanelNote>}
      {services && panels.length === 0 && (
        <PanelNote>
          No service on this runner shows a panel. See docs/services.md to add one.
        </PanelNote>
      )}
      {panel && <PanelFrame key={`${panel.id}:${panel.port}`} runnerId={runnerId} panel={panel} />}
      {failed.length > 0 && (
        <ul class="service-failures pad" aria-label="Services that failed">
          {failed.map((s) => (
            <li key={s.id}>
              <Icon name="alert" size={14} /> <strong>{s.label}</strong>: {s.error}
            </li>
          ))}
        </ul>
      )}
    </SidePanel>
  );
}

/** One panel in its sandboxed iframe, and the fetch bridge for it. */
function PanelFrame({ runnerId, panel }: { runnerId: string; panel: PanelInfo }) {
  const frame = useRef<HTMLIFrameElement>(null);
  const base = `${tunnelBase(runnerId, panel.port)}/`;
  useEffect(() => {
    const onMessage = (e: MessageEvent) => {
      const win = frame.current?.contentWindow;
      const m = e.data as Record<string, unknown> | null;
      if (!win || e.source !== win || !m || m.type !== "baton:fetch") return;
      bridge(base, m).then((answer) =>
        win.postMessage({ type: "baton:response", id: m.id, ...answer }, "*")
      );
    };
    addEventListener("message", onMessage);
    return () => removeEventListener("message", onMessage);
  }, [base]);
  return (
    <iframe
      ref={frame}
      class="service-frame"
      title={`${panel.title} panel`}
      src={base}
      sandbox={PANEL_SANDBOX}
      height={PANEL_HEIGHT}
      referrerpolicy="same-origin"
    />
  );
}

/**
 * Makes a panel's request for it, if it stays under the panel's own tunnel
 * prefix; answers `{status, contentType, body}` or `{error}`.
 */
async function bridge(
  base: string,
  m: Record<string, unknown>,
): Promise<{ status?: number; contentType?: string; body?: string; error?: string }> {
  const path = typeof m.path === "string" ? m.path : "";
  const method = typeof m.method === "string" ? m.method.toUpperCase() : "GET";
  if (!["GET", "POST", "PUT", "PATCH", "DELETE"].includes(method)) return { error: "Bad method" };
  let url: URL;
  try {
    url = new URL(path, location.origin + base);
  } catch {
    return { error: "Bad path" };
  }
  // Only this panel's service: same origin, under its prefix, no way back up.
  if (url.origin !== location.origin || !url.pathname.startsWith(base) || path.includes("..")) {
    return { error: "A panel may only call its own service" };
  }
  const body = typeof m.body === "string" ? m.body : null;
  const contentType = typeof m.contentType === "string" ? m.contentType.slice(0, 200) : "";
  try {
    const res = await fetch(url, {
      method,
      credentials: "same-origin",
      headers: contentType ? { "content-type": contentType } : {},
      ...(body !== null && method !== "GET" ? { body } : {}),
    });
    const text = await res.text();
    if (text.length > MAX_BRIDGED_BYTES) return { error: "Answer too large" };
    return { status: res.status, contentType: res.headers.get("content-type") ?? "", body: text };
  } catch {
    return { error: "Cannot reach the relay" };
  }
}
