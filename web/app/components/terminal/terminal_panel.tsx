/**
 * The terminal panel beside a session: shells on the session's runner, in
 * its folder, one tab each (docs/api.md "Terminals"). Terminals outlive the
 * panel: opening it again re-attaches to the ones in this folder, and the
 * runner replays their scrollback. xterm.js is a separate file
 * (web/dist/xterm.js) loaded the first time a terminal shows.
 *
 * @module
 */
import { useEffect, useRef, useState } from "preact/hooks";
import type { TerminalInfo } from "../../../../shared/terminal_api.ts";
import { api } from "../../api.ts";
import { Icon } from "../icon.tsx";
import { PanelNote, SidePanel } from "../side_panel.tsx";

interface XtermModule {
  Terminal: new (opts: Record<string, unknown>) => XtermTerminal;
  FitAddon: new () => { fit(): void };
}
interface XtermTerminal {
  cols: number;
  rows: number;
  loadAddon(addon: unknown): void;
  open(el: HTMLElement): void;
  write(data: Uint8Array | string): void;
  focus(): void;
  dispose(): void;
  onData(fn: (d: string) => void): { dispose(): void };
  onResize(fn: (s: { cols: number; rows: number }) => void): { dispose(): void };
  hasSelection(): boolean;
  getSelection(): string;
  paste(text: string): void;
  attachCustomKeyEventHandler(fn: (e: KeyboardEvent) => boolean): void;
}

let loading: Promise<XtermModule> | null = null;

/** xterm.js and its stylesheet, added to the page once. */
function loadXterm(): Promise<XtermModule> {
  loading ??= new Promise((resolve, reject) => {
    const css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = "/assets/xterm.css";
    document.head.append(css);
    const script = document.createElement("script");
    script.src = "/assets/xterm.js";
    script.onload = () =>
      resolve((globalThis as unknown as { BatonXterm: XtermModule }).BatonXterm);
    script.onerror = () => {
      loading = null;
      reject(new Error("Could not load the terminal. Check your connection."));
    };
    document.head.append(script);
  });
  return loading;
}

/**
 * xterm draws with `<style>` elements of its own (font, colours, cursor),
 * which the app's Content Security Policy (`style-src 'self'`) does not
 * apply; this mirrors each into a constructed stylesheet, which it does.
 * Returns the undo.
 */
function mirrorStyles(el: HTMLElement): () => void {
  const sheets = new Map<HTMLStyleElement, { sheet: CSSStyleSheet; text: string }>();
  const sync = () => {
    for (const style of el.querySelectorAll("style")) {
      const text = style.textContent ?? "";
      let m = sheets.get(style);
      if (!m) {
        m = { sheet: new CSSStyleSheet(), text: "" };
        sheets.set(style, m);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, m.sheet];
      }
      if (m.text !== text) {
        m.sheet.replaceSync(text);
        m.text = text;
      }
    }
  };
  sync();
  const mo = new MutationObserver(sync);
  mo.observe(el, { subtree: true, childList: true, characterData: true });
  return () => {
    mo.disconnect();
    const mine = new Set([...sheets.values()].map((m) => m.sheet));
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}

/** The panel: tabs of terminals in `cwd` on `runnerId`. */
export function TerminalPanel(
  { runnerId, cwd, onClose }: { runnerId: string; cwd: string; onClose: () => void },
) {
  const [terms, setTerms] = useState<string[] | null>(null);
  const [active, setActive] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const create = async () => {
    setError(null);
    try {
      const t = await api<TerminalInfo>("/api/runners/terminal", {
        method: "POST",
        body: { runnerId, cwd, cols: 80, rows: 24 },
      });
      setTerms((ts) => [...(ts ?? []), t.terminalId]);
      setActive(t.terminalId);
    } catch (e) {
      setError((e as Error).message);
      setTerms((ts) => ts ?? []);
    }
  };

  // Re-attach to this folder's terminals, or start one.
  useEffect(() => {
    let live = true;
    api<{ terminals: TerminalInfo[] }>(`/api/runners/${runnerId}/terminals`).then((r) => {
      if (!live) return;
      const mine = r.terminals.filter((t) => t.cwd === cwd).map((t) => t.terminalId);
      if (mine.length === 0) return create();
      setTerms(mine);
      setActive(mine[0]!);
    }, (e) => live && setError(e.message));
    return () => live = false;
  }, [runnerId, cwd]);

  const close = async (id: string) => {
    await api(`/api/runners/${runnerId}/terminals/${id}`, { method: "DELETE" }).catch(() => {});
    gone(id);
  };
  const gone = (id: string) => {
    setTerms((ts) => {
      const rest = (ts ?? []).filter((t) => t !== id);
      setActive((a) => (a === id ? rest[0] ?? null : a));
      return rest;
    });
  };

  return (
    <SidePanel
      name="terminal"
      class="terminal-panel"
      icon="terminal"
      title="Terminal"
      closeTitle="Close (the terminals keep running)"
      onClose={onClose}
    >
      <div class="term-tabs" role="group" aria-label="Terminals">
        {(terms ?? []).map((id, i) => (
          <span key={id} class={`term-tab ${id === active ? "on" : ""}`}>
            <button
              type="button"
              aria-pressed={id === active}
              onClick={() =>
                setActive(id)}
            >
              Shell {i + 1}
            </button>
            <button
              type="button"
              class="icon-btn"
              aria-label={`End shell ${i + 1}`}
              title="End this shell"
              onClick={() =>
                close(id)}
            >
              <Icon name="x" size={12} />
            </button>
          </span>
        ))}
        <button type="button" class="btn small" aria-label="New terminal" onClick={create}>
          +
        </button>
      </div>
      {error && <p class="error pad" role="alert">{error}</p>}
      {terms === null && !error && <PanelNote busy>Opening a shell…</PanelNote>}
      {terms?.length === 0 && !error && <PanelNote>No shell open.</PanelNote>}
      {(terms ?? []).map((id) => (
        <TermView
          key={id}
          runnerId={runnerId}
          terminalId={id}
          shown={id === active}
          onEnded={() => gone(id)}
        />
      ))}
    </SidePanel>
  );
}

/** Bytes the phone's key bar sends. */
const KEYS: [label: string, name: string, bytes: string][] = [
  ["Esc", "Escape", "\x1b"],
  ["Tab", "Tab", "\t"],
  ["←", "Left", "\x1b[D"],
  ["↑", "Up", "\x1b[A"],
  ["↓", "Down", "\x1b[B"],
  ["→", "Right", "\x1b[C"],
];

/** One terminal attached over `/_terminal`. */
function TermView(
  { runnerId, terminalId, shown, onEnded }: {
    runnerId: string;
    terminalId: string;
    shown: boolean;
    onEnded: () => void;
  },
) {
  const box = useRef<HTMLDivElement>(null);
  const send = useRef<(s: string) => void>(() => {});
  const fitNow = useRef<() => void>(() => {});
  const focus = useRef<() => void>(() => {});
  const copy = useRef<() => void>(() => {});
  const paste = useRef<() => void>(() => {});
  const [ctrl, setCtrl] = useState(false);
  const ctrlRef = useRef(false);
  ctrlRef.current = ctrl;
  const [state, setState] = useState<"loading" | "open" | "closed">("loading");

  useEffect(() => {
    let disposed = false;
    let cleanup = () => {};
    loadXterm().then(({ Terminal, FitAddon }) => {
      if (disposed || !box.current) return;
      const term = new Terminal({
        cursorBlink: true,
        fontSize: 13,
        fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
        scrollback: 5000,
      });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box.current);
      const unmirror = mirrorStyles(box.current);
      const enc = new TextEncoder();
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      const ws = new WebSocket(
        `${proto}//${location.host}/_terminal?runnerId=${encodeURIComponent(runnerId)}` +
          `&terminalId=${encodeURIComponent(terminalId)}`,
      );
      ws.binaryType = "arraybuffer";
      const resize = () => {
        if (ws.readyState === WebSocket.OPEN) {
          ws.send(JSON.stringify({ t: "resize", cols: term.cols, rows: term.rows }));
        }
      };
      send.current = (s) => {
        if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(s));
      };
      fitNow.current = () => {
        if (box.current && box.current.offsetWidth > 0) fit.fit();
      };
      focus.current = () => term.focus();
      // Copy and paste: Ctrl+Shift+C / Ctrl+Shift+V (Ctrl+C stays the shell's interrupt), the
      // browser's own paste (Ctrl+V, a long press on a phone), and the key bar's buttons.
      copy.current = () => {
        if (term.hasSelection()) {
          navigator.clipboard?.writeText(term.getSelection()).catch(() => {});
        }
      };
      paste.current = () => {
        navigator.clipboard?.readText().then((t) => t && term.paste(t), () => {});
      };
      term.attachCustomKeyEventHandler((e) => {
        if (e.type !== "keydown" || !e.ctrlKey || !e.shiftKey) return true;
        const k = e.key.toLowerCase();
        if (k === "c" && term.hasSelection()) {
          copy.current();
          e.preventDefault();
          return false;
        }
        if (k === "v") {
          paste.current();
          e.preventDefault();
          return false;
        }
        return true;
      });
      ws.onopen = () => {
        setState("open");
        fitNow.current();
        resize();
      };
      ws.onmessage = (e) => {
        if (e.data instanceof ArrayBuffer) term.write(new Uint8Array(e.data));
      };
      ws.onclose = (e) => {
        if (disposed) return;
        setState("closed");
        // Ended on the runner (its shell exited, or closed elsewhere).
        if (e.code === 1000 || e.code === 4404) onEnded();
      };
      const data = term.onData((d) => {
        // The key bar's Ctrl applies to the next key typed.
        if (ctrlRef.current && d.length === 1 && /[a-z@\[\\\]^_ ]/i.test(d)) {
          setCtrl(false);
          d = String.fromCharCode(d.toUpperCase().charCodeAt(0) & 31);
        }
        send.current(d);
      });
      const resized = term.onResize(resize);
      const ro = new ResizeObserver(() => fitNow.current());
      ro.observe(box.current);
      fitNow.current();
      term.focus();
      cleanup = () => {
        ro.disconnect();
        data.dispose();
        resized.dispose();
        ws.close();
        term.dispose();
        unmirror();
      };
    }, () => setState("closed"));
    return () => {
      disposed = true;
      cleanup();
    };
  }, [runnerId, terminalId]);

  useEffect(() => {
    if (shown) {
      fitNow.current();
      focus.current();
    }
  }, [shown]);

  return (
    <div class="term-view" hidden={!shown}>
      {state === "loading" && <p class="muted pad" aria-busy="true">Connecting…</p>}
      {state === "closed" && <p class="muted pad" role="status">Disconnected.</p>}
      <div class="term-box" ref={box} />
      <div class="term-keys" role="toolbar" aria-label="Terminal keys">
        {KEYS.map(([label, name, bytes]) => (
          <button
            key={name}
            type="button"
            class="btn small"
            aria-label={name}
            // Keep the keyboard up: the terminal keeps the focus.
            onPointerDown={(e) => e.preventDefault()}
            onClick={() => {
              send.current(bytes);
              focus.current();
            }}
          >
            {label}
          </button>
        ))}
        <button
          type="button"
          class={`btn small ${ctrl ? "on" : ""}`}
          aria-pressed={ctrl}
          aria-label="Ctrl"
          onPointerDown={(e) => e.preventDefault()}
          onClick={() => {
            setCtrl(!ctrl);
            focus.current();
          }}
        >
          Ctrl
        </button>
        <button
          type="button"
          class="btn small"
          title="Copy the selected text"
          onPointerDown={(e) => e.preventDefault()}
          onClick={() => copy.current()}
        >
          Copy
        </button>
        <button
          type="button"
          class="btn small"
          title="Paste from the clipboard"
          onPointerDown={(e) => e.preventDefault()}
          onClick={() => {
            paste.current();
            focus.current();
          }}
        >
          Paste
        </button>
      </div>
    </div>
  );
}
