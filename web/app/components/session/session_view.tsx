/**
 * The heart of the app: one session's header, live conversation, triggers
 * panel and composer.
 *
 * @module
 */
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { Conversation } from "../../../../shared/conversation.ts";
import { link, openSession } from "../../store.ts";
import { ConversationView } from "../conversation/conversation.tsx";
import { FileBrowser } from "../files/file_browser.tsx";
import { Icon } from "../icon.tsx";
import { Composer } from "./_composer.tsx";
import { SessionHeader } from "./_session_header.tsx";
import { SessionTriggers } from "./_triggers_panel.tsx";
import { ChangesPanel } from "../git/changes_panel.tsx";
import { TerminalPanel } from "../terminal/terminal_panel.tsx";
import { PreviewBar } from "../previews/preview_bar.tsx";
import { ServicePanels } from "../services/service_panels.tsx";
import { SigilRunner } from "../services/sigil_pill.tsx";
import { loadRunnerServices, runnerServices } from "../../runner_services.ts";
import { PendingQuestions } from "../questions/pending_questions.tsx";
import { SessionAgentSettings } from "../questions/approval_settings.tsx";

/** Session `id`, or a word that there is none the account may see. */
export function SessionView({ id }: { id: string }) {
  const open = openSession(id);
  const info = open.info.value;
  const conv = open.conv.value;
  const { scroller, stuck, setStuck } = useFollow(id, conv);
  const [panel, setPanel] = useState(false);
  const [files, setFiles] = useState(false);
  const cwd = conv.cwd ?? info?.cwd ?? null;
  const [changes, setChanges] = useState(false);
  const [terminal, setTerminal] = useState(false);
  const [services, setServices] = useState(false);
  const runnerId = info?.runnerId ?? null;
  useEffect(() => {
    if (runnerId) loadRunnerServices(runnerId);
  }, [runnerId]);
  // The Services panel shows panels, and services that failed with the reason.
  const hasServices = !!runnerId && (runnerServices.value[runnerId]?.services.length ?? 0) > 0;
  const [approvals, setApprovals] = useState(false);
  const ended = info?.status === "ended" || info?.status === "error";
  const working = conv.working;
  // A prompt the agent lost in a runner restart goes again as a new message
  // (queued after the current turn while it works).
  const resend = useCallback(
    (text: string) => link.input(id, working ? "followUp" : "prompt", text).catch(() => {}),
    [id, working],
  );

  if (open.deleted.value) return <SessionNotFound deleted />;
  if (open.error.value && !info) return <SessionNotFound />;
  return (
    <main class="session" aria-labelledby="session-title">
      <SessionHeader
        id={id}
        info={info}
        conv={conv}
        ended={ended}
        panel={panel}
        onTogglePanel={() => {
          setPanel(!panel);
          setChanges(false);
        }}
        files={files}
        onToggleFiles={cwd && info ? () => setFiles(!files) : null}
        changes={changes}
        onToggleChanges={() => {
          setChanges(!changes);
          setPanel(false);
        }}
        terminal={terminal}
        onToggleTerminal={cwd && info && !ended ? () => setTerminal(!terminal) : null}
        services={services}
        onToggleServices={hasServices || services ? () => setServices(!services) : null}
        approvals={approvals}
        onToggleApprovals={info && !ended ? () => setApprovals(!approvals) : null}
      />
      <div class="session-body">
        <div
          class="scroller"
          ref={scroller}
          onScroll={(e) => {
            const el = e.currentTarget;
            setStuck(el.scrollHeight - el.scrollTop - el.clientHeight < 40);
          }}
        >
          {!open.caughtUp.value && conv.items.length === 0 && (
            <p class="muted pad" aria-busy="true">Loading the conversation…</p>
          )}
          {open.caughtUp.value && conv.items.length === 0 && !conv.working && (
            <p class="muted pad">Nothing here yet. Send the agent a message below.</p>
          )}
          <SigilRunner.Provider value={runnerId}>
            <ConversationView conv={conv} resend={ended ? null : resend} />
          </SigilRunner.Provider>
        </div>
        {changes && !ended && (
          <ChangesPanel
            id={id}
            working={working}
            onClose={() => setChanges(false)}
          />
        )}
        {panel && (
          <SessionTriggers
            id={id}
            version={conv.items.length}
            onClose={() => setPanel(false)}
          />
        )}
        {terminal && cwd && info && !ended && (
          <TerminalPanel
            runnerId={info.runnerId}
            cwd={cwd}
            onClose={() => setTerminal(false)}
          />
        )}
        {services && runnerId && (
          <ServicePanels
            runnerId={runnerId}
            onClose={() => setServices(false)}
          />
        )}
        {approvals && info && !ended && (
          <SessionAgentSettings
            id={id}
            onClose={() => setApprovals(false)}
          />
        )}
        {files && cwd && info && (
          <FileBrowser
            runnerId={info.runnerId}
            cwd={cwd}
            onClose={() => setFiles(false)}
          />
        )}
      </div>
      {!stuck && (
        <button type="button" class="btn jump" onClick={() => setStuck(true)}>
          Jump to latest
        </button>
      )}
      {info && !ended && <PreviewBar runnerId={info.runnerId} ports={conv.previewPorts} />}
      {!ended && <PendingQuestions id={id} questions={conv.questions} />}
      <Composer id={id} working={conv.working} ended={ended} queue={conv.queue} />
    </main>
  );
}

/**
 * Follows the stream while the reader is at the bottom (`stuck`), and stops
 * when they scroll up; another session starts at the bottom.
 */
function useFollow(id: string, conv: Conversation) {
  const scroller = useRef<HTMLDivElement>(null);
  const [stuck, setStuck] = useState(true);
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stuck) el.scrollTop = el.scrollHeight;
  }, [conv, stuck]);
  useEffect(() => setStuck(true), [id]);
  return { scroller, stuck, setStuck };
}

function SessionNotFound({ deleted = false }: { deleted?: boolean }) {
  return (
    <main class="page narrow">
      <div class="card empty">
        <Icon name="alert" size={28} />
        <h1>{deleted ? "Session deleted" : "Session not found"}</h1>
        <p>
          {deleted
            ? "It was deleted with its whole conversation."
            : "It does not exist, or it belongs to another account."}
        </p>
      </div>
    </main>
  );
}
