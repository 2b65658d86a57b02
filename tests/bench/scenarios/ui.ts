/**
 * Scenario 7: the web client in a real Chromium opening a session with
 * 2,000 stored events (a realistic mix: prompts, streamed answers, thinking,
 * tool calls with output), from navigation to the last message on screen.
 * The baseline is the same page opening a session with one event, so the
 * ratio shows what the 2,000 events cost beyond loading the app.
 *
 * @module
 */
import type { SessionEvent, SessionEventBody } from "../../../shared/protocol.ts";
import type { BenchContext } from "../_report.ts";
import { ms, percentileOf } from "../_stats.ts";
import { launchBrowser } from "../../harness/browser.ts";
import { signUp } from "../../harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "../../harness/fake_runner.ts";
import { startTestRelay } from "../../harness/in_process.ts";

const END = "END-OF-SESSION-MARKER";

/** A conversation of about `n` events, as a worker would produce them. */
export function conversationEvents(n: number): SessionEventBody[] {
  const out: SessionEventBody[] = [{
    type: "session_start",
    cwd: "/work",
    model: { provider: "mock", id: "m" },
    resumed: false,
  }];
  const usage = { input: 1200, output: 300, cacheRead: 0, cacheWrite: 0, cost: { total: 0.004 } };
  let turn = 0;
  while (out.length + 2 < n) {
    turn++;
    const words = Array.from({ length: 60 }, (_, i) => `word${turn}-${i} `);
    out.push(
      { type: "agent_start" },
      {
        type: "message_start",
        message: {
          role: "user",
          content: [{ type: "text", text: `Step ${turn}: fix the next test` }],
        },
      },
      { type: "message_start", message: { role: "assistant", content: [] } },
      {
        type: "message_update",
        role: "assistant",
        assistantMessageEvent: {
          type: "thinking_delta",
          contentIndex: 0,
          delta: "Thinking it over.",
        },
      },
      ...words.map((w) => ({
        type: "message_update",
        role: "assistant",
        assistantMessageEvent: { type: "text_delta", contentIndex: 1, delta: w },
      })),
      {
        type: "message_end",
        message: {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Thinking it over." },
            {
              type: "text",
              text: `**Turn ${turn}.** ${words.join("")}\n\n\`\`\`ts\nconst x = ${turn};\n\`\`\``,
            },
            {
              type: "toolCall",
              id: `c${turn}`,
              name: "bash",
              arguments: { command: `npm test -- ${turn}` },
            },
          ],
          usage,
          stopReason: "toolUse",
        },
      },
      {
        type: "tool_execution_start",
        toolCallId: `c${turn}`,
        toolName: "bash",
        args: { command: `npm test -- ${turn}` },
      },
      ...[1, 2, 3].map((k) => ({
        type: "tool_execution_update",
        toolCallId: `c${turn}`,
        toolName: "bash",
        partialResult: { content: [{ type: "text", text: `ok ${k}\n`.repeat(k * 10) }] },
      })),
      {
        type: "tool_execution_end",
        toolCallId: `c${turn}`,
        toolName: "bash",
        result: { content: [{ type: "text", text: "ok 3\n".repeat(30) + "all passed\n" }] },
        isError: false,
      },
      { type: "agent_end" },
    );
  }
  out.push(
    { type: "message_start", message: { role: "assistant", content: [] } },
    {
      type: "message_end",
      message: {
        role: "assistant",
        content: [{ type: "text", text: END }],
        usage,
        stopReason: "stop",
      },
    },
  );
  return out;
}

async function seed(runner: FakeRunner, sessionId: string, bodies: SessionEventBody[]) {
  const events: SessionEvent[] = bodies.map((e, i) => ({ seq: i + 1, ts: Date.now(), e }));
  for (let i = 0; i < events.length; i += 200) {
    runner.sendEvents(sessionId, events.slice(i, i + 200));
  }
  await runner.waitForAck(sessionId, events.length);
}

export async function uiRender(ctx: BenchContext): Promise<void> {
  const runs = ctx.quick ? 1 : 7;
  const relay = await startTestRelay();
  const browser = await launchBrowser();
  let runner: FakeRunner | undefined;
  try {
    const user = await signUp(relay.url);
    runner = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    const big = await spawnSession(user, runner.runnerId);
    const bigEvents = conversationEvents(2000);
    await seed(runner, big, bigEvents);
    const small = await spawnSession(user, runner.runnerId);
    await seed(runner, small, [
      { type: "message_start", message: { role: "assistant", content: [] } },
      {
        type: "message_end",
        message: { role: "assistant", content: [{ type: "text", text: END }], stopReason: "stop" },
      },
    ]);
    const cookie = user.cookie.split("; ").map((c) => {
      const [name, ...v] = c.split("=");
      return { name: name!, value: v.join("="), url: relay.url };
    });

    const measure = async (sessionId: string) => {
      const times: number[] = [];
      for (let i = 0; i < runs + 1; i++) {
        // A fresh context each time: nothing cached, as on a first visit.
        const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
        await context.addCookies(cookie);
        const page = await context.newPage();
        const t0 = performance.now();
        await page.goto(`${relay.url}/session/${sessionId}`);
        await page.getByText(END).waitFor({ timeout: 30_000 });
        const t = performance.now() - t0;
        if (i > 0) times.push(t); // the first run warms Chromium itself
        await context.close();
      }
      return times;
    };
    const bigTimes = await measure(big);
    const smallTimes = await measure(small);
    const p50 = percentileOf(bigTimes, 50);
    const base = percentileOf(smallTimes, 50);
    ctx.row({
      scenario: "7 web client",
      case: `open a session of ${bigEvents.length} events (fresh browser context, p50 of ${runs})`,
      metric: "navigation → last message on screen",
      baton: { name: "baton", value: p50, text: ms(p50) },
      baselines: [{ name: "same page, 2-event session", value: base, text: ms(base) }],
      ratios: [{ of: 0 }],
      goal: { text: "under 1 s", test: (f) => f.baton < 1000 },
      detail: { bigTimes, smallTimes },
    });
  } finally {
    runner?.ws.close();
    await browser.close();
    await relay[Symbol.asyncDispose]();
  }
}
