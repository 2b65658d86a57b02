/**
 * What the agent waits on, above the message box: its questions (options as
 * buttons, and a reply in the person's own words) and the tool calls its
 * approval policy holds (Approve, Deny, or Deny with a reason). Each is a
 * `question` event of the session, so every open viewer and a reload show it.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { AskedQuestion, PendingQuestion } from "../../../../shared/questions_api.ts";
import { api } from "../../api.ts";
import { Icon } from "../icon.tsx";

/** Sends an answer; the card goes once the `question_answered` event arrives. */
function answer(sessionId: string, toolCallId: string, text: string): Promise<unknown> {
  return api(`/api/sessions/${sessionId}/answer`, {
    method: "POST",
    body: { toolCallId, text },
  });
}

/** Every waiting question and approval of session `id`, oldest first. */
export function PendingQuestions({ id, questions }: { id: string; questions: PendingQuestion[] }) {
  if (questions.length === 0) return null;
  return (
    <section class="pending-questions" aria-label="The agent is waiting for you">
      {questions.map((q) =>
        q.kind === "approval"
          ? <ApprovalCard key={q.toolCallId} sessionId={id} q={q} />
          : <QuestionCard key={q.toolCallId} sessionId={id} q={q} />
      )}
    </section>
  );
}

function useSend(sessionId: string, toolCallId: string) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const send = async (text: string) => {
    setBusy(true);
    setError(null);
    try {
      await answer(sessionId, toolCallId, text);
    } catch (err) {
      setError((err as Error).message);
      setBusy(false);
    }
  };
  return { busy, error, send };
}

/** A tool call waiting for Approve or Deny. */
function ApprovalCard({ sessionId, q }: { sessionId: string; q: PendingQuestion }) {
  const { busy, error, send } = useSend(sessionId, q.toolCallId);
  const [reason, setReason] = useState("");
  return (
    <div class="question-card approval" role="group" aria-label={`Approve ${q.toolName}?`}>
      <p class="question-title">
        <Icon name="shield" size={16} /> The agent wants to run <code>{q.toolName}</code>
      </p>
      <pre class="question-summary">{q.summary}</pre>
      <form
        class="question-reply"
        onSubmit={(e) => {
          e.preventDefault();
          send(reason.trim() ? `deny: ${reason.trim()}` : "deny");
        }}
      >
        <label class="sr-only" for={`deny-${q.toolCallId}`}>Reason to deny (optional)</label>
        <input
          id={`deny-${q.toolCallId}`}
          value={reason}
          placeholder="Reason, if you deny (optional)"
          onInput={(e) => setReason(e.currentTarget.value)}
        />
        <button type="submit" class="btn danger" disabled={busy}>Deny</button>
        <button type="button" class="btn primary" disabled={busy} onClick={() => send("approve")}>
          Approve
        </button>
      </form>
      {error && <p class="error" role="alert">{error}</p>}
    </div>
  );
}

/** One `ask_user` call: its questions, each with its options, and a reply box. */
function QuestionCard({ sessionId, q }: { sessionId: string; q: PendingQuestion }) {
  const { busy, error, send } = useSend(sessionId, q.toolCallId);
  const many = q.questions.length > 1;
  const [picked, setPicked] = useState<string[][]>(() => q.questions.map(() => []));
  const [texts, setTexts] = useState<string[]>(() => q.questions.map(() => ""));

  /** One answer per question, in the order asked. */
  const compose = () =>
    q.questions.map((qq, i) => {
      const a = [...picked[i]!, texts[i]!.trim()].filter(Boolean).join(", ");
      return many ? `${qq.header ?? `Question ${i + 1}`}: ${a || "(no answer)"}` : a;
    }).join("\n");
  const ready = q.questions.every((_, i) => picked[i]!.length > 0 || texts[i]!.trim() !== "");

  const pick = (i: number, qq: AskedQuestion, label: string) => {
    // A single question with one choice answers at once: one tap, as on the notification.
    if (!many && !qq.multiSelect && !texts[0]!.trim()) return void send(label);
    setPicked((all) =>
      all.map((p, j) =>
        j !== i
          ? p
          : qq.multiSelect
          ? (p.includes(label) ? p.filter((x) => x !== label) : [...p, label])
          : [label]
      )
    );
  };

  return (
    <form
      class="question-card"
      aria-label="The agent asks"
      onSubmit={(e) => {
        e.preventDefault();
        if (ready && !busy) send(compose());
      }}
    >
      {q.questions.map((qq, i) => (
        <fieldset key={i} class="question">
          <legend>
            {qq.header && <span class="badge">{qq.header}</span>} {qq.question}
          </legend>
          {qq.options.length > 0 && (
            <div class="question-options">
              {qq.options.map((o) => (
                <button
                  key={o.label}
                  type="button"
                  class={`btn option ${picked[i]!.includes(o.label) ? "on" : ""}`}
                  aria-pressed={picked[i]!.includes(o.label)}
                  disabled={busy}
                  title={o.description}
                  onClick={() => pick(i, qq, o.label)}
                >
                  <span class="option-label">{o.label}</span>
                  {o.description && <span class="option-desc">{o.description}</span>}
                </button>
              ))}
            </div>
          )}
          <label class="sr-only" for={`reply-${q.toolCallId}-${i}`}>Your answer</label>
          <input
            id={`reply-${q.toolCallId}-${i}`}
            class="question-text"
            value={texts[i]}
            placeholder={qq.options.length ? "Or answer in your own words…" : "Your answer…"}
            onInput={(e) => {
              const v = e.currentTarget.value;
              setTexts((all) => all.map((t, j) => (j === i ? v : t)));
            }}
          />
        </fieldset>
      ))}
      <div class="question-actions">
        <button type="submit" class="btn primary" disabled={!ready || busy}>
          <Icon name="send" size={16} /> Answer
        </button>
      </div>
      {error && <p class="error" role="alert">{error}</p>}
    </form>
  );
}
