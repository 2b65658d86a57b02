/**
 * What the trigger and webhook tests share: a relay served in-process (with
 * every relay option passed through), a real runner whose HOME declares a
 * trigger catalog in `~/.baton/triggers.json`, a scripted model whose
 * requests can be awaited and read as text, and a viewer that watches the
 * sessions.
 *
 * @module
 */
import { join } from "node:path";
import { type ServedRelay, serveRelay, type ServeRelayOptions } from "../../relay/serve.ts";
import type {
  RunnerListResponse,
  SessionListResponse,
  SpawnSessionRequest,
} from "../../shared/api.ts";
import { json, signUp, type User, Viewer } from "./client.ts";
import { type ChatRequest, MockLlm, MODEL, type Turn } from "./mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./procs.ts";
import { Conditions } from "./wait.ts";
import { webClient } from "../../web/mod.ts";

/** Status and parsed JSON body of a response (null for an empty body). */
// deno-lint-ignore no-explicit-any
export async function answer(res: Response): Promise<{ status: number; body: any }> {
  const text = await res.text();
  return { status: res.status, body: text === "" ? null : JSON.parse(text) };
}

/** The text of one chat message (string content or text parts). */
export function messageText(m: ChatRequest["messages"][number]): string {
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) {
    return m.content
      .map((p) => (p && typeof p === "object" && "text" in p ? String(p.text) : ""))
      .join("");
  }
  return "";
}

/** The texts of the user messages of a model request, oldest first. */
export function userTexts(req: ChatRequest): string[] {
  return req.messages.filter((m) => m.role === "user").map(messageText);
}

/** Every message of a request as plain text (tool results included). */
export function requestText(req: ChatRequest): string {
  return req.messages.map(messageText).join("\n");
}

/** A `<trigger>` block as the agent reads it. */
export interface TriggerBlock {
  id: string;
  type: string;
  source: string;
  summary?: string;
  /** The payload parsed back from the message (undefined when it was cut). */
  payload: unknown;
  /** Text before the block (the listener's or webhook's instruction). */
  before: string;
  /** Text after the block (the request to answer, if any). */
  after: string;
}

/** Parses the `<trigger ...>` blocks of a message, in order. */
export function triggerBlocks(text: string): TriggerBlock[] {
  const out: TriggerBlock[] = [];
  const re =
    /<trigger id="([^"]*)" type="([^"]*)" source="([^"]*)">\n(?:Summary: (.*)\n)?Payload:\n([\s\S]*?)\n<\/trigger>/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    let payload: unknown;
    try {
      payload = JSON.parse(m[5]!);
    } catch {
      payload = undefined;
    }
    out.push({
      id: m[1]!,
      type: m[2]!,
      source: m[3]!,
      ...(m[4] !== undefined ? { summary: m[4] } : {}),
      payload,
      before: text.slice(last, m.index).trim(),
      after: "",
    });
    last = m.index! + m[0].length;
  }
  if (out.length > 0) out[out.length - 1]!.after = text.slice(last).trim();
  return out;
}

/** Scripted answers by rule; the first rule that returns a turn wins. */
export type Rule = (req: ChatRequest) => Turn | undefined;

/**
 * The model's requests as they arrive: await the first one matching a
 * predicate, and answer by rules (else from the mock's queue, else "OK.").
 */
export class ModelWatch {
  rules: Rule[] = [];
  readonly #conditions = new Conditions((what) =>
    `model: timed out waiting for ${what} (${this.requests.length} requests)`
  );

  constructor(readonly llm: MockLlm) {
    llm.responder = (req) => {
      // The request is already in llm.requests: wake whoever waits for it.
      this.#conditions.check();
      for (const rule of this.rules) {
        const turn = rule(req);
        if (turn) return turn;
      }
      return undefined;
    };
  }

  get requests(): ChatRequest[] {
    return this.llm.requests;
  }

  /** The requests (so far) matching `pred`. */
  matching(pred: (req: ChatRequest) => boolean): ChatRequest[] {
    return this.requests.filter(pred);
  }

  /** Resolves once `pred` holds (checked on every new request). */
  until(pred: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    return this.#conditions.until(pred, what, timeoutMs);
  }

  /** The first request (past or future) whose text contains `marker`. */
  async withText(marker: string, timeoutMs = 20_000): Promise<ChatRequest> {
    const has = (r: ChatRequest) => requestText(r).includes(marker);
    await this.until(() => this.requests.some(has), `a request containing '${marker}'`, timeoutMs);
    return this.requests.find(has)!;
  }
}

/** Options of {@linkcode startWorld}. */
export interface WorldOptions {
  /** Written to the runner's `~/.baton/triggers.json` before it starts. */
  triggerDefs?: unknown[];
  /** Extra environment of the runner. */
  runnerEnv?: Record<string, string>;
  /** Prepares the runner's HOME (services, plugins) before the runner starts. */
  beforeRunner?: (home: string) => Promise<void>;
  /** Relay options passed through to serveRelay/createRelay. */
  relay?: Partial<Omit<ServeRelayOptions, "hostname" | "port" | "dataDir">>;
}

/** One relay, one runner, one scripted model and a viewer. */
export interface World {
  relay: ServedRelay;
  dataDir: string;
  relayLog: string[];
  llm: MockLlm;
  model: ModelWatch;
  user: User;
  runner: RunnerProcess;
  runnerId: string;
  /** The runner's HOME. */
  home: string;
  /** The runner's only workspace root; sessions work in it. */
  root: string;
  viewer: Viewer;
}

/** Writes a runner HOME: models.json pointing at the mock model, and the trigger catalog. */
export async function prepareHome(
  llm: MockLlm,
  triggerDefs: unknown[] | undefined,
  home?: string,
): Promise<string> {
  const dir = home ?? await tempDir("baton-trigger-home-");
  await llm.writeModelsJson(dir, ["mock-1"]);
  if (triggerDefs) {
    await Deno.writeTextFile(join(dir, ".baton", "triggers.json"), JSON.stringify(triggerDefs));
  }
  return dir;
}

/** Starts the world; call {@linkcode closeWorld} in `finally`. */
export async function startWorld(options: WorldOptions = {}): Promise<World> {
  const llm = MockLlm.start();
  const model = new ModelWatch(llm);
  const dataDir = await tempDir("baton-trigger-relay-");
  const relayLog: string[] = [];
  const relay = await serveRelay({
    web: await webClient(),
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    log: (line) => relayLog.push(line),
    ...options.relay,
  });
  let runner: RunnerProcess | undefined;
  try {
    const user = await signUp(relay.url, { name: "Alice" });
    const home = await prepareHome(llm, options.triggerDefs);
    const root = join(home, "work");
    await Deno.mkdir(root, { recursive: true });
    await options.beforeRunner?.(home);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      env: { BATON_WORKSPACE_ROOTS: root, ...options.runnerEnv },
    });
    const [r]: RunnerListResponse = await (await user.api("/api/runners")).json();
    if (!r) throw new Error("The runner is not listed once connected");
    const viewer = await Viewer.connect(relay.url, { apiKey: user.apiKey });
    return {
      relay,
      dataDir,
      relayLog,
      llm,
      model,
      user,
      runner,
      runnerId: r.id,
      home,
      root,
      viewer,
    };
  } catch (err) {
    if (runner) console.error(runner.proc.output());
    await runner?.stop();
    await relay.shutdown();
    await llm.close();
    throw err;
  }
}

/** Stops everything; prints the runner's and relay's output when the test failed. */
export async function closeWorld(w: World | undefined, ok: boolean): Promise<void> {
  if (!w) return;
  if (!ok) {
    console.error(w.runner.proc.output());
    console.error(w.relayLog.map((l) => `    relay| ${l}`).join("\n"));
  }
  await w.viewer.close();
  await w.runner.stop();
  await w.relay.shutdown();
  await w.llm.close();
  await Deno.remove(w.dataDir, { recursive: true }).catch(() => {});
  await Deno.remove(w.home, { recursive: true }).catch(() => {});
}

/** The number of finished agent runs of a session the viewer saw. */
export function runs(v: Viewer, sessionId: string): number {
  return v.eventsOf(sessionId).filter((e) => e.e.type === "agent_end").length;
}

/** Spawns a session with `prompt` in the world's root; resolves with its id once it has started. */
export async function spawn(
  w: World,
  prompt: string,
  extra: Omit<SpawnSessionRequest, "runnerId"> = {},
): Promise<string> {
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: w.root, model: MODEL, prompt, ...extra }),
  );
  const { status, body } = await answer(res);
  if (status !== 200) throw new Error(`spawn: ${status} ${JSON.stringify(body)}`);
  w.viewer.subscribe(body.sessionId);
  await w.viewer.waitForEvent(body.sessionId, "session_start");
  return body.sessionId;
}

/** Ends a session and waits until the relay lists it as ended. */
export async function endSession(w: World, sessionId: string): Promise<void> {
  const res = await w.user.api(`/api/sessions/${sessionId}/input`, json("POST", { kind: "end" }));
  if (res.status !== 200) throw new Error(`end: ${res.status} ${await res.text()}`);
  await res.body?.cancel();
  w.viewer.subscribe(sessionId);
  await w.viewer.waitForEvent(sessionId, "session_end");
}

/** Every session id of the user, live and past. */
export async function allSessionIds(user: User): Promise<string[]> {
  const { sessions, persistedSessions }: SessionListResponse =
    await (await user.api("/api/sessions")).json();
  return [...sessions, ...persistedSessions].map((s) => s.sessionId).sort();
}

/** Runs a step and remembers whether it failed (steps do not throw). */
export function stepper(t: Deno.TestContext) {
  let failed = false;
  return {
    step: async (name: string, fn: () => Promise<void>) => {
      if (!(await t.step(name, fn))) failed = true;
    },
    get ok() {
      return !failed;
    },
  };
}
