import { type ServedRelay, serveRelay } from "../../relay/serve.ts";
import type { AttachmentPolicy } from "../../relay/attachments.ts";
import type { RunnerListResponse } from "../../shared/api.ts";
import { json, signUp, type User } from "./client.ts";
import { MockLlm, MODEL, type Responder } from "./mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./procs.ts";
import { webClient } from "../../web/mod.ts";

/** A relay served inside the test process on a free port, with a temporary data folder. */
export interface TestRelay extends ServedRelay {
  dataDir: string;
  /** Shuts the relay down and removes its data. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts a relay in-process (faster than a subprocess when no crash is simulated). */
export async function startTestRelay(
  options: {
    allowSignup?: boolean;
    eventBufferSize?: number;
    dataDir?: string;
    /** Public address (e.g. an https one, as behind a TLS proxy); default the listening URL. */
    baseUrl?: string;
    /** Take the client IP from the last X-Forwarded-For entry. */
    trustProxy?: boolean;
    /** Attachment caps and lifetime. */
    attachments?: AttachmentPolicy;
    /** Push endpoint origins allowed although http on loopback (a test push service). */
    pushAllowedOrigins?: string[];
  } = {},
): Promise<TestRelay> {
  const dataDir = options.dataDir ?? await tempDir("baton-relay-");
  const logs: string[] = [];
  const served = await serveRelay({
    web: await webClient(),
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    allowSignup: options.allowSignup ?? false,
    eventBufferSize: options.eventBufferSize ?? 1000,
    ...(options.baseUrl ? { baseUrl: options.baseUrl } : {}),
    trustProxy: options.trustProxy ?? false,
    ...(options.attachments ? { attachments: options.attachments } : {}),
    ...(options.pushAllowedOrigins ? { pushAllowedOrigins: options.pushAllowedOrigins } : {}),
    log: (line) => logs.push(line),
  });
  return {
    ...served,
    dataDir,
    async [Symbol.asyncDispose]() {
      await served.shutdown();
      if (!options.dataDir) await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    },
  };
}

/** An in-process relay, its first user, and a real runner of theirs on a scripted model. */
export interface Stack {
  relay: TestRelay;
  llm: MockLlm;
  user: User;
  runner: RunnerProcess;
  runnerId: string;
  /** The runner's HOME, also the folder sessions run in. */
  home: string;
}

export interface StackOptions {
  /** Model ids the runner offers (default: the mock's one model). */
  models?: string[];
  /** Answers the model's requests (default: the mock's queue). */
  responder?: Responder;
  /** The user's display name. */
  name?: string;
  /** Extra environment for the runner. */
  runnerEnv?: Record<string, string>;
  /** The mock provider's `apiKey` in models.json (a key, or a variable's name). */
  modelsApiKey?: string;
  /** Options of the relay. */
  relay?: Parameters<typeof startTestRelay>[0];
}

/**
 * Runs `fn` against a fresh {@linkcode Stack} and tears it down after, printing
 * the runner's output when `fn` failed.
 */
export async function withStack(
  options: StackOptions,
  fn: (s: Stack) => Promise<void>,
): Promise<void> {
  const llm = MockLlm.start();
  if (options.responder) llm.responder = options.responder;
  const relay = await startTestRelay(options.relay);
  const home = await tempDir("baton-home-");
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url, { name: options.name });
    await llm.writeModelsJson(home, options.models, options.modelsApiKey);
    runner = await startRunner({
      relayUrl: relay.url,
      apiKey: user.apiKey,
      home,
      env: options.runnerEnv,
    });
    const [r]: RunnerListResponse = await (await user.api("/api/runners")).json();
    if (!r) throw new Error("The runner is not listed once connected");
    await fn({ relay, llm, user, runner, runnerId: r.id, home });
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await relay[Symbol.asyncDispose]();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
}

/** Spawns a session on the stack's runner in its home folder, on the mock model; its id. */
export async function spawnOnStack(w: Stack, prompt: string): Promise<string> {
  const res = await w.user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: w.runnerId, cwd: w.home, model: MODEL, prompt }),
  );
  const body = await res.text();
  if (res.status !== 200) throw new Error(`spawn answered ${res.status}: ${body}`);
  return JSON.parse(body).sessionId;
}
