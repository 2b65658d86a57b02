/**
 * A session's header: its title (renamed in place), where and with what it
 * runs, what it used, its state and its actions.
 *
 * @module
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Conversation } from "../../../../shared/conversation.ts";
import type { SessionInfo } from "../../../../shared/protocol.ts";
import { baseName, cost, tokens } from "../../format.ts";
import { statusOf } from "../../session_status.ts";
import { runnerName, runners } from "../../store.ts";
import { Icon, type IconName } from "../icon.tsx";
import { RenameForm } from "./_rename_form.tsx";
import { ParentLink } from "../subagents/subagents.tsx";
import { SessionMenu } from "./_session_menu.tsx";

/** The header; `info` is null until the relay sent it. */
export function SessionHeader(
  {
    id,
    info,
    conv,
    ended,
    panel,
    onTogglePanel,
    files,
    onToggleFiles,
    changes = false,
    onToggleChanges,
    terminal = false,
    onToggleTerminal = null,
    services = false,
    onToggleServices = null,
    approvals = false,
    onToggleApprovals = null,
  }: {
    id: string;
    info: SessionInfo | null;
    conv: Conversation;
    ended: boolean;
    /** Whether the triggers panel is open. */
    panel: boolean;
    onTogglePanel: () => void;
    /** Whether the files panel is open; null: no folder to browse yet. */
    files: boolean;
    onToggleFiles: (() => void) | null;
    /** Whether the changes (git) panel is open. */
    changes?: boolean;
    onToggleChanges?: () => void;
    /** Whether the terminal panel is open; null: no terminal to open here. */
    terminal?: boolean;
    onToggleTerminal?: (() => void) | null;
    /** Whether the services panel is open; null: the runner's services show no panel. */
    services?: boolean;
    onToggleServices?: (() => void) | null;
    /** Whether the approvals panel (collab mode, policy) is open; null: not for this session. */
    approvals?: boolean;
    onToggleApprovals?: (() => void) | null;
  },
) {
  const [renaming, setRenaming] = useState(false);
  /** Set when a rename ends, so that focus goes back to the Rename button once it shows again. */
  const refocus = useRef(false);
  useEffect(() => {
    if (renaming || !refocus.current) return;
    refocus.current = false;
    document.getElementById("rename-session")?.focus();
  }, [renaming]);
  const st = info ? statusOf(info) : { label: "loading", tone: "off" };
  return (
    <header class="session-head">
      <div class="session-head-main">
        <h1
          id="session-title"
          class={`session-name ${renaming ? "sr-only" : ""}`}
          title={info?.title || undefined}
        >
          {info?.title || "Untitled session"}
        </h1>
        {renaming && info && (
          <RenameForm
            id={id}
            title={info.title}
            onDone={() => {
              refocus.current = true;
              setRenaming(false);
            }}
          />
        )}
        <SessionMeta info={info} conv={conv} />
        <ParentLink info={info} />
      </div>
      <div class="session-head-side">
        <span class={`pill ${st.tone}`} role="status" aria-label={`Status: ${st.label}`}>
          {st.tone === "busy" && <span class="spinner" aria-hidden="true" />}
          {st.label}
        </span>
        {/* While renaming, the title box has the row: the actions come back when it is done. */}
        {!renaming && (
          <>
            {/* Icons alone on a phone, so that the header's actions keep one row. */}
            <PanelToggle
              icon="bolt"
              label="Triggers"
              title="Triggers"
              on={panel}
              onClick={onTogglePanel}
            />
            {(onToggleFiles || (onToggleChanges && !ended) || onToggleTerminal ||
              onToggleServices || onToggleApprovals) && (
              <MoreActions>
                {onToggleFiles && (
                  <PanelToggle
                    icon="folder"
                    label="Files"
                    title="Files: browse the session's folder"
                    on={files}
                    onClick={onToggleFiles}
                  />
                )}
                {onToggleChanges && !ended && (
                  <PanelToggle
                    icon="branch"
                    label="Changes"
                    title="Changes: the repository's diff, commit and push"
                    on={changes}
                    onClick={onToggleChanges}
                  />
                )}
                {onToggleApprovals && (
                  <PanelToggle
                    icon="shield"
                    label="Approvals"
                    title="Approvals and collab mode: what waits for you, and answers from notifications"
                    iconOnly
                    on={approvals}
                    onClick={onToggleApprovals}
                  />
                )}
                {onToggleTerminal && (
                  <PanelToggle
                    icon="terminal"
                    label="Terminal"
                    title="Terminal: a shell in the session's folder on its runner"
                    on={terminal}
                    onClick={onToggleTerminal}
                  />
                )}
                {onToggleServices && (
                  <PanelToggle
                    icon="square"
                    label="Services"
                    title="Services: the panels of the runner's services"
                    on={services}
                    onClick={onToggleServices}
                  />
                )}
              </MoreActions>
            )}
            {info && (
              <SessionMenu
                id={id}
                pinned={info.isPinned}
                ended={ended}
                onRename={() => setRenaming(true)}
              />
            )}
          </>
        )}
      </div>
    </header>
  );
}

/** A header button that opens or closes a panel: its icon, and its name on a wide screen. */
function PanelToggle(
  { icon, label, title, on, onClick, iconOnly = false }: {
    icon: IconName;
    label: string;
    title: string;
    on: boolean;
    onClick: () => void;
    /** The icon alone on a wide screen (a crowded row keeps room for the title); named in a phone's list. */
    iconOnly?: boolean;
  },
) {
  return (
    <button
      type="button"
      class={`btn small ${on ? "on" : ""}`}
      aria-pressed={on}
      aria-label={label}
      title={title}
      onClick={onClick}
    >
      <Icon name={icon} size={14} />
      <span class={iconOnly ? "narrow-only" : "wide-only"}>{label}</span>
    </button>
  );
}

/**
 * Files and Changes: in the row on a wide screen; on a phone, where the row
 * has room for the status, Triggers and the session's own actions only, behind
 * a "More actions" button that shows them in a small list under it (closed by
 * a choice, Escape or a click elsewhere).
 */
function MoreActions({ children }: { children: ComponentChildren }) {
  const [open, setOpen] = useState(false);
  const box = useRef<HTMLDivElement>(null);
  const toggle = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (!open) return;
    const away = (e: PointerEvent) => {
      if (!box.current?.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("pointerdown", away);
    return () => document.removeEventListener("pointerdown", away);
  }, [open]);
  return (
    <div
      ref={box}
      class={`head-more ${open ? "open" : ""}`}
      onKeyDown={(e) => {
        if (e.key === "Escape" && open) {
          setOpen(false);
          toggle.current?.focus();
        }
      }}
    >
      <button
        type="button"
        ref={toggle}
        class={`btn small head-more-toggle ${open ? "on" : ""}`}
        aria-expanded={open}
        aria-controls="session-more"
        aria-label="More actions"
        title="More: files, changes and terminal"
        onClick={() => setOpen(!open)}
      >
        <Icon name="menu" size={14} />
      </button>
      {/* A choice closes the list (the panel it opens takes the screen on a phone). */}
      <div id="session-more" class="head-more-items" onClick={() => setOpen(false)}>
        {children}
      </div>
    </div>
  );
}

/** The runner (offline or not), the folder, the model and the usage of a session. */
function SessionMeta({ info, conv }: { info: SessionInfo | null; conv: Conversation }) {
  const runner = info ? runners.value.find((r) => r.id === info.runnerId) : undefined;
  const model = conv.model ?? info?.model ?? null;
  return (
    <p class="session-meta">
      <span>
        <Icon name="server" size={13} /> {info ? runnerName(info.runnerId) : "…"}
        {runner && !runner.connected && <span class="warn-text">(offline)</span>}
      </span>
      <span title={conv.cwd ?? info?.cwd}>
        <Icon name="folder" size={13} />{" "}
        <span class="wide-only">{conv.cwd ?? info?.cwd ?? "…"}</span>
        <span class="narrow-only">{baseName(conv.cwd ?? info?.cwd ?? "…")}</span>
      </span>
      {model && (
        <span>
          <Icon name="sparkle" size={13} /> {model.provider}/{model.id}
        </span>
      )}
      <span class="usage" title="Tokens in / out and cost of this session">
        {tokens(conv.usage.input + conv.usage.cacheRead)} in · {tokens(conv.usage.output)} out ·
        {" "}
        {cost(conv.usage.cost)}
      </span>
    </p>
  );
}
