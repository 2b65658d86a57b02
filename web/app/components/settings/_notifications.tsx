/**
 * The Notifications card: subscribe this device to push notifications,
 * pick the kinds, skip subagents' sessions, and see the account's other
 * devices. What is sent when is in docs/push.md.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type { PushSubscriptionInfo } from "../../../../shared/api.ts";
import { api } from "../../api.ts";
import {
  currentSubscription,
  listSubscriptions,
  pushSupported,
  subscribeDevice,
  unsubscribeDevice,
} from "../../push.ts";
import { Icon } from "../icon.tsx";

/** The kinds a user picks here (`agent_needs_input` waits for questions and approvals). */
const KINDS = [
  { kind: "agent_finished", label: "An agent finished its task" },
  { kind: "agent_error", label: "An agent failed (error, crash)" },
] as const;

function kindsOf(enabledEvents: string): Set<string> {
  const list = enabledEvents.split(",").map((s) => s.trim());
  return new Set(list.includes("*") ? KINDS.map((k) => k.kind) : list);
}

/** Push notifications of this device and the account's others. */
export function Notifications() {
  const supported = pushSupported();
  const [endpoint, setEndpoint] = useState<string | null>(null);
  const [subs, setSubs] = useState<PushSubscriptionInfo[] | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);

  async function reload() {
    try {
      const [mine, list] = await Promise.all([currentSubscription(), listSubscriptions()]);
      setEndpoint(mine?.endpoint ?? null);
      setSubs(list);
    } catch (err) {
      setError((err as Error).message);
    }
  }
  useEffect(() => {
    reload();
  }, []);

  async function run(fn: () => Promise<unknown>) {
    setBusy(true);
    setError(null);
    try {
      await fn();
      await reload();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  const here = subs?.find((s) => s.endpoint === endpoint) ?? null;
  const others = (subs ?? []).filter((s) => s !== here);
  const kinds = here ? kindsOf(here.enabledEvents) : new Set<string>();
  const setKinds = (next: Set<string>) =>
    run(() =>
      api("/api/push/events", {
        method: "PUT",
        body: {
          endpoint: here!.endpoint,
          enabledEvents: next.size === KINDS.length ? "*" : [...next].join(","),
        },
      })
    );

  return (
    <section class="card" aria-labelledby="notifications-title">
      <h2 id="notifications-title">
        <Icon name="bell" /> Notifications
      </h2>
      <p class="muted">
        Get a notification on this device when an agent finishes or fails, unless you are looking at
        that session. Tap it to open the session.
      </p>
      {!supported && (
        <p class="muted">
          This browser cannot receive push notifications here: they need the relay over https (or
          localhost), and on iPhone the app added to the home screen.
        </p>
      )}
      {supported && !here && (
        <button
          type="button"
          class="btn primary"
          disabled={busy || subs === null}
          onClick={() => run(() => subscribeDevice("*"))}
        >
          <Icon name="bell" /> Notify this device
        </button>
      )}
      {here && (
        <fieldset class="push-kinds">
          <legend>This device is notified when</legend>
          {KINDS.map(({ kind, label }) => (
            <label class="check" key={kind}>
              <input
                type="checkbox"
                checked={kinds.has(kind)}
                disabled={busy || (kinds.has(kind) && kinds.size === 1)}
                onChange={() => {
                  const next = new Set(kinds);
                  if (next.has(kind)) next.delete(kind);
                  else next.add(kind);
                  setKinds(next);
                }}
              />
              {label}
            </label>
          ))}
          <label class="check">
            <input
              type="checkbox"
              checked={here.suppressChildNotifications}
              disabled={busy}
              onChange={() =>
                run(() =>
                  api("/api/push/child-notifications", {
                    method: "PUT",
                    body: { endpoint: here.endpoint, suppress: !here.suppressChildNotifications },
                  })
                )}
            />
            Skip subagents' sessions (their parent still notifies)
          </label>
          <button
            type="button"
            class="btn"
            disabled={busy}
            onClick={() => run(unsubscribeDevice)}
          >
            Stop notifications on this device
          </button>
        </fieldset>
      )}
      {others.length > 0 && (
        <>
          <h3>Other devices</h3>
          <ul class="push-devices">
            {others.map((s) => (
              <li key={s.id}>
                <span>
                  {new URL(s.endpoint).host}{" "}
                  <span class="muted">since {new Date(s.createdAt).toLocaleDateString()}</span>
                </span>
                <button
                  type="button"
                  class="btn"
                  disabled={busy}
                  aria-label={`Stop notifications on the device of ${new URL(s.endpoint).host}`}
                  onClick={() =>
                    run(() =>
                      api("/api/push/unsubscribe", {
                        method: "POST",
                        body: { endpoint: s.endpoint },
                      })
                    )}
                >
                  <Icon name="trash" /> Remove
                </button>
              </li>
            ))}
          </ul>
        </>
      )}
      {error && <p class="error" role="alert">{error}</p>}
    </section>
  );
}
