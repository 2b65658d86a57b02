/**
 * Live previews of a session: a strip above the composer with "Open
 * preview" for each port the session's processes listen on (announced by
 * the runner, docs/protocol.md "Live previews"), and a small form to open any
 * port by number. Each opens the HTTP tunnel in a new tab (on a phone too:
 * a plain link, and the form opens from the person's tap).
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { isPort, type PreviewPort, previewUrl } from "../../../../shared/previews_api.ts";
import { Icon } from "../icon.tsx";

/** The strip; `ports` as last announced. */
export function PreviewBar({ runnerId, ports }: { runnerId: string; ports: PreviewPort[] }) {
  const [asking, setAsking] = useState(false);
  const [value, setValue] = useState("");
  const [error, setError] = useState<string | null>(null);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => {
    if (asking) input.current?.focus();
  }, [asking]);

  const openPort = (e: Event) => {
    e.preventDefault();
    const n = Number(value.trim());
    if (!/^\d+$/.test(value.trim()) || !isPort(n)) {
      setError("Enter a port from 1 to 65535");
      return;
    }
    setError(null);
    globalThis.open(previewUrl(runnerId, n), "_blank", "noopener");
    setAsking(false);
    setValue("");
  };

  return (
    <nav class="preview-bar" aria-label="Live previews">
      {ports.map((p) => (
        <a
          key={p.port}
          class="btn small preview-link"
          href={previewUrl(runnerId, p.port)}
          target="_blank"
          rel="noopener"
          title={`Opens port ${p.port} on the runner through the tunnel, in a new tab`}
        >
          <Icon name="eye" size={14} /> Open preview <span class="mono">:{p.port}</span>
          {p.process && <span class="muted preview-proc">{p.process}</span>}
        </a>
      ))}
      {asking
        ? (
          <form class="preview-form" onSubmit={openPort}>
            <label for="preview-port" class="muted">Port</label>
            <input
              id="preview-port"
              class="mono"
              type="text"
              inputMode="numeric"
              autoComplete="off"
              size={6}
              maxLength={5}
              value={value}
              aria-invalid={error ? "true" : undefined}
              aria-describedby={error ? "preview-port-error" : undefined}
              onInput={(e) => {
                setValue(e.currentTarget.value);
                setError(null);
              }}
              ref={input}
            />
            <button type="submit" class="btn small primary">Open</button>
            <button
              type="button"
              class="icon-btn"
              aria-label="Cancel"
              onClick={() => {
                setAsking(false);
                setError(null);
              }}
            >
              <Icon name="x" size={14} />
            </button>
            {error && <span id="preview-port-error" class="error" role="alert">{error}</span>}
          </form>
        )
        : (
          <button type="button" class="btn small" onClick={() => setAsking(true)}>
            Open a port…
          </button>
        )}
    </nav>
  );
}
