/**
 * A session's header: its title (renamed in place), where and with what it
 * runs, what it used, its state and its actions.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { Conversation } from "../../../../shared/conversation.ts";
import type { SessionInfo } from "../../../../shared/protocol.ts";
import { baseName, cost, tokens } from "../../format.ts";
import { statusOf } from "../../session_status.ts";
import { runnerName, runners } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { RenameForm } from "./_rename_form.tsx";
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
  },
) {
  const [renaming, setRenaming] = useState(false);
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
              setRenaming(false);
              document.getElementById("rename-session")?.focus();
            }}
          />
        )}
        <SessionMeta info={info} conv={conv} />
      </div>
      <div class="session-head-side">
        <span class={`pill ${st.tone}`} role="status" aria-label={`Status: ${st.label}`}>
          {st.tone === "busy" && <span class="spinner" aria-hidden="true" />}
          {st.label}
        </span>
        <button
          type="button"
          class={`btn small ${panel ? "on" : ""}`}
          aria-pressed={panel}
          aria-label="Triggers"
          title="Triggers"
          onClick={onTogglePanel}
        >
          {/* Icons alone on a phone, so that the header's actions keep one row. */}
          <Icon name="bolt" size={14} />
          <span class="wide-only">Triggers</span>
        </button>
        {onToggleFiles && (
          <button
            type="button"
            class={`btn small ${files ? "on" : ""}`}
            aria-pressed={files}
            aria-label="Files"
            title="Files"
            onClick={onToggleFiles}
          >
            <Icon name="folder" size={14} />
            <span class="wide-only">Files</span>
          </button>
        )}
        {onToggleChanges && !ended && (
          <button
            type="button"
            class={`btn small ${changes ? "on" : ""}`}
            aria-pressed={changes}
            aria-label="Changes"
            title="Changes: the repository's diff, commit and push"
            onClick={onToggleChanges}
          >
            <Icon name="branch" size={14} />
            <span class="wide-only">Changes</span>
          </button>
        )}
        {info && (
          <SessionMenu
            id={id}
            pinned={info.isPinned}
            ended={ended}
            onRename={() => setRenaming(true)}
          />
        )}
      </div>
    </header>
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
