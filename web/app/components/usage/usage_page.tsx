/**
 * The Usage page of a runner: totals, cost per day, the models and the
 * sessions that cost the most, over 7, 30 or 90 days or all time. The numbers
 * come from the runner (`GET /api/runners/{runnerId}/usage`).
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import { USAGE_RANGES, type UsageRange, type UsageResponse } from "../../../../shared/usage_api.ts";
import { api } from "../../api.ts";
import { baseName, cost, tokens } from "../../format.ts";
import { navigate } from "../../route.ts";
import { runners, sessions } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { AppLink } from "../widgets.tsx";
import { bars, CostChart } from "./_chart.tsx";

const RANGE_LABEL: Record<UsageRange, string> = {
  "7d": "7 days",
  "30d": "30 days",
  "90d": "90 days",
  all: "All",
};
const TOP = 10;

/** `/usage` (the first connected runner's) and `/runners/{id}/usage`. */
export function UsagePage({ runnerId }: { runnerId: string | null }) {
  const list = runners.value;
  const chosen = runnerId ?? (list.find((r) => r.connected) ?? list[0])?.id ?? null;
  useEffect(() => {
    if (!runnerId && chosen) navigate(`/runners/${chosen}/usage`, true);
  }, [runnerId, chosen]);
  const [range, setRange] = useState<UsageRange>("30d");
  const [state, setState] = useState<
    { loading: boolean; data: UsageResponse | null; error: string | null }
  >({ loading: false, data: null, error: null });

  useEffect(() => {
    if (!chosen) return;
    let live = true;
    setState((s) => ({ ...s, loading: true, error: null }));
    api<UsageResponse>(`/api/runners/${encodeURIComponent(chosen)}/usage?range=${range}`)
      .then((data) => live && setState({ loading: false, data, error: null }))
      .catch((err: Error) => live && setState({ loading: false, data: null, error: err.message }));
    return () => {
      live = false;
    };
  }, [chosen, range]);

  const runner = list.find((r) => r.id === chosen);
  return (
    <main class="page usage-page" aria-labelledby="usage-title" aria-busy={state.loading}>
      <div class="usage-head">
        <h1 id="usage-title">Usage</h1>
        {list.length > 1 && (
          <label class="usage-runner">
            <span class="sr-only">Runner</span>
            <select
              value={chosen ?? ""}
              onChange={(e) => navigate(`/runners/${(e.target as HTMLSelectElement).value}/usage`)}
            >
              {list.map((r) => (
                <option key={r.id} value={r.id}>
                  {r.name}
                  {r.connected ? "" : " (offline)"}
                </option>
              ))}
            </select>
          </label>
        )}
        <div class="seg push" role="radiogroup" aria-label="Range">
          {USAGE_RANGES.map((r) => (
            <button
              key={r}
              type="button"
              role="radio"
              aria-checked={r === range}
              class={r === range ? "on" : ""}
              onClick={() => setRange(r)}
            >
              {RANGE_LABEL[r]}
            </button>
          ))}
        </div>
      </div>
      {!chosen && <p class="card empty">No runner yet: usage is counted on each runner.</p>}
      {chosen && runner && list.length <= 1 && (
        <p class="hint">
          On <strong>{runner.name}</strong>
          {runner.connected ? "" : " (offline)"}, from pi's session files on that machine
        </p>
      )}
      {state.error && <p class="error" role="alert">{state.error}</p>}
      {state.loading && !state.data && <p class="hint" role="status">Counting…</p>}
      {state.data && <Summary data={state.data} range={range} />}
    </main>
  );
}

function Summary({ data, range }: { data: UsageResponse; range: UsageRange }) {
  const [all, setAll] = useState(false);
  const today = new Date().toISOString().slice(0, 10);
  const from = range === "all"
    ? null
    : new Date(Date.now() - (Number(range.slice(0, -1)) - 1) * 86_400_000).toISOString().slice(
      0,
      10,
    );
  const shown = all ? data.sessions : data.sessions.slice(0, TOP);
  const maxModel = data.models[0]?.costUsd ?? 0;
  return (
    <>
      <section class="usage-totals" aria-label="Totals">
        <Stat label="Cost" value={cost(data.totalCostUsd)} />
        <Stat
          label="Input tokens"
          value={tokens(data.totalInputTokens)}
          hint={data.totalCacheReadTokens
            ? `${tokens(data.totalCacheReadTokens)} from cache`
            : undefined}
        />
        <Stat label="Output tokens" value={tokens(data.totalOutputTokens)} />
        <Stat label="Sessions" value={String(data.sessionCount)} />
      </section>

      <section class="card" aria-labelledby="usage-chart-title">
        <h2 id="usage-chart-title">Cost per day</h2>
        {data.days.length === 0
          ? <p class="muted">No model use in this range.</p>
          : <CostChart data={bars(data.days, from, today)} />}
      </section>

      <div class="usage-cols">
        <section class="card" aria-labelledby="usage-models-title">
          <h2 id="usage-models-title">Models</h2>
          {data.models.length === 0 ? <p class="muted">None.</p> : (
            <ul class="usage-list">
              {data.models.map((m) => (
                <li key={m.model}>
                  <div class="usage-row">
                    <span class="usage-name">{m.model}</span>
                    <strong>{cost(m.costUsd)}</strong>
                  </div>
                  <div class="usage-meter" aria-hidden="true">
                    <span style={{ width: `${maxModel ? (m.costUsd / maxModel) * 100 : 0}%` }} />
                  </div>
                  <div class="hint">
                    {tokens(m.inputTokens)} in · {tokens(m.outputTokens)} out
                  </div>
                </li>
              ))}
            </ul>
          )}
        </section>

        <section class="card" aria-labelledby="usage-sessions-title">
          <h2 id="usage-sessions-title">Top sessions</h2>
          {shown.length === 0 ? <p class="muted">None.</p> : (
            <ol class="usage-list">
              {shown.map((s, i) => <SessionRow key={`${s.piSessionId}-${i}`} s={s} />)}
            </ol>
          )}
          {data.sessions.length > TOP && (
            <button
              type="button"
              class="btn small"
              onClick={() => setAll(!all)}
            >
              {all ? "Show fewer" : `Show all ${data.sessions.length}`}
            </button>
          )}
          {data.truncated && all && (
            <p class="hint">
              The {data.sessions.length} most expensive of {data.sessionCount} sessions.
            </p>
          )}
        </section>
      </div>
      {data.skippedLines > 0 && (
        <p class="hint">
          {data.skippedLines} unreadable line(s) in the session files were left out.
        </p>
      )}
    </>
  );
}

function SessionRow({ s }: { s: UsageResponse["sessions"][number] }) {
  const known = s.sessionId ? sessions.value.find((x) => x.sessionId === s.sessionId) : undefined;
  const name = known?.title || (s.cwd ? baseName(s.cwd) : "Session");
  return (
    <li>
      <div class="usage-row">
        <span class="usage-name">
          {known
            ? <AppLink href={`/session/${known.sessionId}`}>{name}</AppLink>
            : <span title={s.sessionId ? undefined : "Not a baton session"}>{name}</span>}
        </span>
        <strong>{cost(s.costUsd)}</strong>
      </div>
      <div class="hint">
        {s.model ?? "unknown model"} · {tokens(s.inputTokens)} in · {tokens(s.outputTokens)} out
        {s.startedAt ? ` · ${new Date(s.startedAt).toLocaleDateString()}` : ""}
        {s.sessionId ? "" : " · outside baton"}
      </div>
    </li>
  );
}

function Stat({ label, value, hint }: { label: string; value: string; hint?: string | undefined }) {
  return (
    <div class="card usage-stat">
      <div class="usage-stat-label">{label}</div>
      <div class="usage-stat-value">{value}</div>
      {hint && <div class="hint">{hint}</div>}
    </div>
  );
}

/** The link to a runner's usage, for the Runners card. */
export function UsageLink({ runnerId }: { runnerId: string }) {
  return (
    <AppLink href={`/runners/${runnerId}/usage`} class="btn small">
      <Icon name="chart" /> Usage
    </AppLink>
  );
}
