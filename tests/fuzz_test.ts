/**
 * A fuzzer (fast-check) that throws malformed and hostile input at every
 * HTTP route of the relay (listed from the app itself, so a new route is
 * fuzzed without editing this file), at every message type of the viewer
 * and runner control channels, and at the answers a runner gives. The relay
 * runs as a real subprocess; afterwards it must still be healthy, its log
 * free of internal errors, and its database consistent.
 *
 * Re-run a failure with BATON_FUZZ_SEED=<seed>; BATON_FUZZ_SHRINK=1 shrinks
 * the counterexample; BATON_FUZZ_COLLECT=1 runs every case and lists each
 * kind of failure; BATON_FUZZ_SCALE=<x> multiplies the number of cases.
 */
import fc from "fast-check";
import assert from "node:assert/strict";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { createRelay } from "../relay/app.ts";
import { jsonTooDeep, MAX_JSON_DEPTH, MAX_LINK_DEPTH } from "../shared/json.ts";
import {
  INPUT_KINDS,
  MAX_RUNNER_HELLO_BYTES,
  MAX_VIEWER_AUTH_BYTES,
  MAX_VIEWER_MESSAGE_BYTES,
  MAX_WS_MESSAGE_BYTES,
  type SessionEvent,
} from "../shared/protocol.ts";
import { json, signUp, type User, Viewer } from "./harness/client.ts";
import {
  defaultAnswer,
  FakeRunner,
  runnerToken,
  spawnSession,
  textDelta,
} from "./harness/fake_runner.ts";
import { RelayProcess, tempDir } from "./harness/procs.ts";
import { rawRequest, type RawResponse } from "./harness/raw_http.ts";
import { eventually } from "./harness/wait.ts";
import { webClient } from "../web/mod.ts";

const SEED = Number(Deno.env.get("BATON_FUZZ_SEED") ?? 20_251_121);
const SHRINK = Deno.env.get("BATON_FUZZ_SHRINK") === "1";
const SCALE = Number(Deno.env.get("BATON_FUZZ_SCALE") ?? 1);
const COLLECT = Deno.env.get("BATON_FUZZ_COLLECT") === "1";
const REQUEST_TIMEOUT_MS = 10_000;
const ONE_MB = 1024 * 1024;

// ---------------------------------------------------------------------------
// Hostile values

/** Strings that have broken servers before. */
// deno-fmt-ignore
const NASTY_STRINGS = [
  "", " ", "\u0000", "a\u0000b", "\uD800", "\uDFFF", "x\uDBFFy", "\uDC00\uD800",
  "\u202Eevil\u202C", "\u200F\u200E\u061C", "مرحبا", "👩‍👩‍👧‍👦", "🦀".repeat(64), "\uFEFF",
  "\r\n\r\n", "\t", "\\", "%00", "%2e%2e%2f", "../../../../etc/passwd",
  "..\\..\\windows\\win.ini", "/etc/passwd", "/", "C:\\Windows", "//evil.example/x",
  "file:///etc/passwd", "__proto__", "constructor", "prototype", "toString", "hasOwnProperty",
  "' OR 1=1 --", '"; DROP TABLE sessions; --', "<script>alert(1)</script>", "${jndi:ldap://x}",
  "{{7*7}}", "NaN", "-1", "1e309", "0x10", "null", "undefined", "true", "[]", "{}", "runner",
  "runner:x", "brt_", "bk_", "bk_" + "A".repeat(43), "brt_" + "A".repeat(43), "mock/mock-1",
  "a".repeat(199), "a".repeat(4097),
];

const nastyString = fc.constantFrom(...NASTY_STRINGS);
const longString = fc.constantFrom(100_001, 200_000, 200_001, 300_000).chain((n) =>
  fc.constantFrom("é", "x", "\uD800", "🦀").map((c) => c.repeat(n))
);
const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: nastyString, weight: 6 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 30 }), weight: 2 },
  { arbitrary: fc.string({ unit: "grapheme", maxLength: 30 }), weight: 2 },
  { arbitrary: fc.string({ maxLength: 12 }), weight: 2 },
  {
    arbitrary: fc.string({
      unit: fc.constantFrom("\uD800", "\uDC00", "a", "\u0000", "/", "."),
      maxLength: 20,
    }),
    weight: 2,
  },
  { arbitrary: longString, weight: 1 },
);
const hostileNumber = fc.oneof(
  fc.constantFrom(
    0,
    -0,
    -1,
    1.5,
    0.1,
    2 ** 31,
    2 ** 32,
    2 ** 53,
    2 ** 53 + 2,
    Number.MAX_SAFE_INTEGER,
    -Number.MAX_SAFE_INTEGER,
    1e308,
    -1e308,
    5e-324,
  ),
  fc.integer(),
  fc.double({ noNaN: true }),
);
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: hostileString, weight: 5 },
  { arbitrary: hostileNumber, weight: 3 },
  { arbitrary: fc.boolean(), weight: 1 },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 2 },
  { arbitrary: fc.array(hostileString, { maxLength: 4 }), weight: 1 },
  { arbitrary: fc.dictionary(hostileString, hostileString, { maxKeys: 3 }), weight: 1 },
);

/** JSON texts no `JSON.stringify` of a plain value produces. */
// deno-fmt-ignore
const RAW_JSON = [
  '{"__proto__":{"isAdmin":true,"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}', '{"__proto__":null,"name":"x"}',
  '{"name":"a","name":{"__proto__":{"x":1}}}', '{"name":"\\ud800"}',
  '{"name":"\\udfff\\ud800"}', '{"name":"\\u0000"}', '{"kind":"prompt","text":"\\ud83d"}',
  '{"hiddenModels":["__proto__/x","constructor/prototype"]}', '{"expiresInDays":1e400}',
  '{"expiresInDays":-0}', '{"since":1e400}', "[".repeat(20_000) + "]".repeat(20_000),
  '{"a":'.repeat(5_000) + "1" + "}".repeat(5_000), "\uFEFF{}", "NaN", "Infinity", "-0",
  "1e99999", '"\\udfff"', "{} {}", '{"x":1,}', "{'a':1}", "\u0000", "null", "true", "[]", "{}",
  "", " ", '{"a":1', '{"a":"\\x41"}', '{"a":"\\u00"}',
];

/** Levels of nesting the fuzzer sends past the relay's cap of 64: just past it, and the finding's. */
const deepLevels = fc.constantFrom(MAX_JSON_DEPTH + 1, 1000, 200_000);
/** The same past the runner channel's cap, which carries a client's JSON inside its own. */
const linkDeepLevels = fc.constantFrom(MAX_LINK_DEPTH + 1, 1000, 200_000);
const DEEP_MARK = "__fuzz_deep__";

/** `value` as JSON with every DEEP_MARK string replaced by `levels` nested arrays. */
function withDeep(value: unknown, levels: number): string {
  return JSON.stringify(value).replaceAll(
    JSON.stringify(DEEP_MARK),
    "[".repeat(levels) + "]".repeat(levels),
  );
}

// ---------------------------------------------------------------------------
// What the relay must answer to one WebSocket frame

/** The limits each channel applies to a frame, in the order the relay applies them. */
const CHANNEL_LIMITS = {
  // ws refuses a message over `maxBytes` from its frame header; a socket that
  // has not authenticated may receive only `firstBytes` in all (ws_transport.ts).
  viewer: {
    firstBytes: MAX_VIEWER_AUTH_BYTES,
    maxBytes: MAX_VIEWER_MESSAGE_BYTES,
    depth: MAX_JSON_DEPTH,
    binary: 1009,
  },
  runner: {
    firstBytes: MAX_RUNNER_HELLO_BYTES,
    maxBytes: MAX_WS_MESSAGE_BYTES,
    depth: MAX_LINK_DEPTH,
    binary: 1003,
  },
} as const;

/**
 * What the relay must answer to a frame no matter its content: a close code
 * (without an error frame: the transport closes before the channel reads
 * the frame), an error frame, or both (a runner's hello nested too deep is
 * refused and closed with 4400). Null: any answer the channel's checks allow.
 */
type FrameAnswer = { close: number; error?: undefined } | { error: string; close?: number };

function expectedAnswer(
  channel: keyof typeof CHANNEL_LIMITS,
  authenticated: boolean,
  frame: string | Uint8Array,
): FrameAnswer | null {
  const limits = CHANNEL_LIMITS[channel];
  if (typeof frame !== "string") return { close: limits.binary };
  // Limits count the UTF-8 bytes on the wire (a lone surrogate is sent as U+FFFD).
  const bytes = new TextEncoder().encode(frame).byteLength;
  if (!authenticated && bytes > limits.firstBytes) return { close: 1009 };
  if (bytes > limits.maxBytes) return { close: 1009 };
  if (jsonTooDeep(frame, limits.depth)) {
    return channel === "runner" && !authenticated
      ? { error: "too_deep", close: 4400 }
      : { error: "too_deep" };
  }
  return null;
}

// ---------------------------------------------------------------------------
// Helpers

/** Every HTTP route of the relay, read from the app (middleware left out). */
async function relayRoutes(): Promise<{ method: string; path: string }[]> {
  const dataDir = await tempDir("baton-fuzz-routes-");
  const relay = await createRelay({
    web: await webClient(),
    dataDir,
    baseUrl: "http://127.0.0.1:1",
  });
  try {
    return await relay.routes();
  } finally {
    await relay.close();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}

/** better-auth's endpoints behind the relay's `/api/auth/*` route, and some that do not exist. */
// deno-fmt-ignore
const AUTH_ENDPOINTS = [
  "sign-in/email", "sign-up/email", "sign-out", "get-session", "list-sessions", "update-user",
  "change-password", "change-email", "revoke-session", "revoke-sessions",
  "revoke-other-sessions", "request-password-reset", "reset-password", "verify-email",
  "send-verification-email", "delete-user", "ok", "error", "no-such-endpoint",
  "sign-in/%2e%2e/sign-up/email",
];

/** Percent-encodes all but unreserved bytes of the UTF-8 form (a lone surrogate becomes U+FFFD). */
function pctEncode(s: string): string {
  let out = "";
  for (const b of new TextEncoder().encode(s)) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : "%" + b.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** Characters sent raw in a request target; everything else is percent-encoded. */
function targetSafe(s: string): string {
  return s.replace(/[^A-Za-z0-9\-._~!$&'()*+,;=:@/%?]/gu, (c) => pctEncode(c));
}

/** A path segment: encoded values, or tricks sent as they are. */
function segmentArb(real: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.constantFrom(...real), weight: 8 },
    { arbitrary: hostileString.map((s) => pctEncode(s.slice(0, 5000))), weight: 3 },
    // deno-fmt-ignore
    { arbitrary: fc.constantFrom(
      "..", ".", "%2e%2e", "%2E%2E%2Fkeys", "..%2f..%2fhealth", "..%5c..%5c", "%00", "a%00b",
      "%", "%zz", "%c0%ae%c0%ae", "%ed%a0%80", "%F0%9F%A6%80", "%u0000", "", "/etc/passwd",
      "~root", "*", "a;b=c", "%25", "%2525", "x".repeat(8000),
    ), weight: 3 },
  );
}

const QUERY_NAMES = ["since", "limit", "includePersisted", "runnerId", "__proto__", "x"];

const queryArb: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constant(""), weight: 3 },
  {
    arbitrary: fc.array(
      fc.tuple(
        fc.constantFrom(...QUERY_NAMES),
        fc.oneof(
          hostileNumber.map(String),
          hostileString.map((s) => pctEncode(s.slice(0, 2000))),
          fc.constantFrom("%", "%zz", "%00", "1&since=2", "0x10", "1e3", " 1", "+1"),
        ),
      ),
      { minLength: 1, maxLength: 3 },
    ).map((pairs) => "?" + pairs.map(([k, v]) => `${k}=${v}`).join("&")),
    weight: 2,
  },
);

/** A fetch-free answer check: a 4xx JSON error envelope. */
function assertErrorEnvelope(res: RawResponse, what: string): void {
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/, what);
  const body = JSON.parse(res.text);
  assert.deepEqual(Object.keys(body), ["error"], what);
  assert.equal(typeof body.error?.code, "string", what);
  assert.equal(typeof body.error?.message, "string", what);
  assert.ok(body.error.message.length > 0, what);
}

function describe(res: RawResponse): string {
  return `${res.status} ${res.text.slice(0, 300)}`;
}

/** Tallies of what the fuzzer did, printed at the end. */
class Tally {
  readonly counts = new Map<string, number>();
  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }
  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  line(prefix: string): string {
    return [...this.counts].filter(([k]) => k.startsWith(prefix)).sort()
      .map(([k, v]) => `${k.slice(prefix.length)}=${v}`).join(" ");
  }
}

async function check<T>(
  w: World,
  name: string,
  index: number,
  arb: fc.Arbitrary<T>,
  numRuns: number,
  fn: (value: T) => Promise<void>,
): Promise<void> {
  const seed = SEED + index;
  // In collect mode every case runs and distinct failures are listed at the
  // end, instead of stopping at the first one.
  const failures = new Map<string, { count: number; example: string }>();
  const run = COLLECT
    ? async (value: T) => {
      try {
        await fn(value);
      } catch (err) {
        const msg = String(err instanceof Error ? err.message : err);
        const key = msg.split("\n")[0]!.replace(/\d+/g, "N").slice(0, 160);
        const f = failures.get(key);
        if (f) f.count++;
        else failures.set(key, { count: 1, example: msg.slice(0, 1500) });
      }
    }
    : fn;
  try {
    await fc.assert(fc.asyncProperty(arb, run), {
      numRuns: Math.max(1, Math.round(numRuns * SCALE)),
      seed,
      endOnFailure: !SHRINK,
    });
  } catch (err) {
    console.error(
      `fuzz property '${name}' failed: seed ${seed} (BATON_FUZZ_SEED=${SEED}; set ` +
        `BATON_FUZZ_SHRINK=1 to shrink, BATON_FUZZ_COLLECT=1 to list every kind of failure)`,
    );
    throw err;
  } finally {
    console.log(`${name}: ${w.tally.get(name)} cases; ${w.tally.line(`${name}.`)}`);
  }
  if (failures.size > 0) {
    for (const [key, f] of failures) {
      console.error(`fuzz '${name}': ${f.count}× ${key}\n  e.g. ${f.example}`);
    }
    throw new Error(`fuzz property '${name}': ${failures.size} kinds of failure (seed ${seed})`);
  }
}

// ---------------------------------------------------------------------------
// The world the fuzzer attacks

interface Account {
  user: User;
  userId: string;
  token: string;
  fake: FakeRunner;
  /** A session on `fake` with a few events. */
  sessionId: string;
}

interface World {
  relay: RelayProcess;
  a: Account;
  b: Account;
  /** B's throwaway API key id (a DELETE may remove it). */
  spareKeyIdB: string;
  /** A's runner for control-channel fuzzing, and a session on it. */
  control: FakeRunner;
  controlToken: string;
  controlSession: string;
  /** A's runner that gives hostile answers, and a session on it. */
  hostile: FakeRunner;
  hostileSession: string;
  /**
   * Sessions of A that `DELETE /api/sessions/{id}` may delete: a delete of
   * one the other steps need goes to one of these instead.
   */
  spareSessions: string[];
  /** What accepted requests created, for the database check. */
  created: {
    keys: number;
    deletedKeys: number;
    sessions: number;
    deletedSessions: number;
    runners: Set<string>;
  };
  settingsWritten: Set<string>;
  hiddenModels: Map<string, unknown>;
  initial: { keys: number; sessions: number; runners: number };
  tally: Tally;
  /** `METHOD /path/{param}` of every route that reads a JSON body (from the OpenAPI document). */
  jsonRoutes: Set<string>;
}

async function account(relay: RelayProcess): Promise<Account> {
  const user = await signUp(relay.url);
  const me = await (await user.web("/api/auth/get-session")).json();
  const token = await runnerToken(user);
  const fake = await FakeRunner.connect(relay.url, { apiKey: token });
  const sessionId = await spawnSession(user, fake.runnerId);
  const events: SessionEvent[] = [
    { seq: 1, ts: Date.now(), e: { type: "session_start", cwd: "/fake", model: null } },
    ...[2, 3, 4].map((seq) => ({ seq, ts: Date.now(), e: textDelta(`d${seq}`) })),
  ];
  fake.sendEvents(sessionId, events);
  await fake.waitForAck(sessionId, 4);
  return { user, userId: me.user.id, token, fake, sessionId };
}

// ---------------------------------------------------------------------------

Deno.test("the relay survives hostile input on every route and channel with a consistent database", async (t) => {
  console.log(`fuzz seed ${SEED}${SCALE !== 1 ? ` scale ${SCALE}` : ""}`);
  const routes = await relayRoutes();
  const relay = await RelayProcess.start({ args: ["--allow-signup"] });
  const toClose: (() => Promise<unknown>)[] = [];
  let world: World | undefined;
  let stopped = false;
  try {
    const a = await account(relay);
    const b = await account(relay);
    toClose.push(() => a.fake.close(), () => b.fake.close());
    const spare = await (await b.user.api("/api/keys", json("POST", { name: "spare" }))).json();
    // A runner token reaches one runner: each runner has its own.
    const controlToken = await runnerToken(a.user);
    const control = await FakeRunner.connect(relay.url, { apiKey: controlToken });
    const controlSession = await spawnSession(a.user, control.runnerId);
    const hostile = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(a.user) });
    const hostileSession = await spawnSession(a.user, hostile.runnerId);
    const spareSessions: string[] = [];
    for (let i = 0; i < 3; i++) spareSessions.push(await spawnSession(a.user, a.fake.runnerId));
    const keysOf = async (u: User) => (await (await u.api("/api/keys")).json()).keys.length;
    const sessionsOf = async (u: User) => {
      const list = await (await u.api("/api/sessions")).json();
      return list.sessions.length + list.persistedSessions.length;
    };
    const runnersOf = async (u: User) => (await (await u.api("/api/runners")).json()).length;
    world = {
      relay,
      a,
      b,
      spareKeyIdB: spare.id,
      control,
      controlToken,
      controlSession,
      hostile,
      hostileSession,
      spareSessions,
      created: { keys: 0, deletedKeys: 0, sessions: 0, deletedSessions: 0, runners: new Set() },
      settingsWritten: new Set(),
      hiddenModels: new Map(),
      initial: {
        keys: await keysOf(a.user) + await keysOf(b.user),
        sessions: await sessionsOf(a.user) + await sessionsOf(b.user),
        runners: await runnersOf(a.user) + await runnersOf(b.user),
      },
      tally: new Tally(),
      jsonRoutes: await jsonRoutesOf(relay.url),
    };
    const w = world;
    // The control runner may be replaced by a reconnect: close whichever is current.
    toClose.push(() => w.control.close(), () => w.hostile.close());

    await t.step("every HTTP route answers 2xx or a 4xx JSON error, in time", async () => {
      await check(w, "http", 1, httpCase(w, routes), 1500, (c) => sendHttp(w, c));
    });

    await t.step("WebSocket routes answer bad upgrades with 4xx, never 5xx", async () => {
      await check(w, "upgrade", 2, upgradeCase(w), 200, (c) => sendHttp(w, c));
    });

    await t.step("runner hellos get a welcome or an error and a close", async () => {
      await check(w, "hello", 4, helloCase(w), 250, (c) => runHello(w, c));
    });

    await t.step("runner messages after the hello get acks, errors or a close", async () => {
      await check(w, "control", 5, controlCase(w), 600, (c) => runControl(w, c));
    });

    await t.step(
      "viewer messages of every type get answers, errors or a policy close",
      async () => {
        const viewers = new ViewerPool(w);
        try {
          await check(w, "viewer", 3, viewerCase(w), 700, (c) => viewers.run(c));
        } finally {
          await viewers.close();
        }
      },
    );

    await t.step(
      "every route and every message type refuses JSON nested too deep and bodies too big",
      async () => {
        await everyRouteAndMessage(w, routes);
      },
    );

    await t.step("hostile runner answers never become 500s", async () => {
      await check(w, "answers", 6, answerCase(w), 250, (c) => runAnswer(w, c));
    });

    await t.step("the relay is alive, healthy and logged no internal error", async () => {
      const status = await Promise.race([relay.proc.status, Promise.resolve("running")]);
      assert.equal(status, "running", "the relay process is still running");
      const health = await fetch(`${relay.url}/health`);
      assert.equal(health.status, 200);
      await health.body?.cancel();
      // A full round trip still works: events in, acked, out to a viewer.
      const v = await Viewer.connect(relay.url, { apiKey: a.user.apiKey });
      try {
        v.subscribe(a.sessionId, 4);
        await v.waitFor((m) => m.t === "caught_up" && m.sessionId === a.sessionId);
        const before = a.fake.acked(a.sessionId);
        a.fake.sendEvents(a.sessionId, [{ seq: before + 1, ts: Date.now(), e: textDelta("end") }]);
        await a.fake.waitForAck(a.sessionId, before + 1);
        await v.until(() => v.eventsOf(a.sessionId).some((e) => e.seq === before + 1), "live");
      } finally {
        await v.close();
      }
      const bad = relay.proc.lines.filter((l) =>
        /internal error|Uncaught|panicked|message failed|hello failed/i.test(l)
      );
      assert.deepEqual([...new Set(bad)], [], "the relay logged internal errors");
    });

    for (const close of toClose.splice(0)) await close().catch(() => {});
    const st = await relay.stop();
    stopped = true;
    assert.equal(st.code, 0, "the relay shut down cleanly");

    await t.step("the database is consistent and holds only what accepted requests made", () => {
      checkDatabase(w);
    });
  } finally {
    for (const close of toClose) await close().catch(() => {});
    if (!stopped) await relay.stop();
    await Deno.remove(relay.home, { recursive: true }).catch(() => {});
    if (world) {
      console.log(
        `fuzz totals: ${
          ["http", "upgrade", "viewer", "hello", "control", "answers"]
            .map((k) => `${k}=${world!.tally.get(k)}`).join(" ")
        }`,
      );
    }
  }
});

// ---------------------------------------------------------------------------
// HTTP

type AuthMode =
  | "none"
  | "keyA"
  | "bearerA"
  | "cookieA"
  | "keyB"
  | "cookieB"
  | "tokenA"
  | "badKey"
  | "badCookie";

interface HttpCase {
  kind: "http" | "upgrade";
  route: string;
  method: string;
  target: string;
  auth: AuthMode;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** The body nests past the relay's depth cap somewhere. */
  deep?: boolean;
}

function authHeaders(w: World, auth: AuthMode, origin: string | null): Record<string, string> {
  const h: Record<string, string> = {};
  switch (auth) {
    case "keyA":
      h["x-api-key"] = w.a.user.apiKey;
      break;
    case "bearerA":
      h.authorization = `Bearer ${w.a.user.apiKey}`;
      break;
    case "cookieA":
      h.cookie = w.a.user.cookie;
      break;
    case "keyB":
      h["x-api-key"] = w.b.user.apiKey;
      break;
    case "tokenA":
      h["x-api-key"] = w.a.token;
      break;
    case "cookieB":
      h.cookie = w.b.user.cookie;
      break;
    case "badKey":
      h["x-api-key"] = "bk_" + "A".repeat(43);
      break;
    case "badCookie":
      h.cookie = "baton.session_token=forged.signature; other=1";
      break;
  }
  if (origin !== null) h.origin = origin;
  return h;
}

function userOf(w: World, auth: AuthMode): string | null {
  return auth === "keyA" || auth === "bearerA" || auth === "cookieA" || auth === "tokenA"
    ? w.a.userId
    : auth === "keyB" || auth === "cookieB"
    ? w.b.userId
    : null;
}

/** A plausible body for each route, which the fuzzer then bends. */
function baseBody(w: World, route: string): Record<string, unknown> {
  switch (route) {
    case "POST /api/register":
      return { email: "new-user@example.com", password: "correct horse battery", name: "New" };
    case "POST /api/keys":
      return { name: "fuzz", expiresInDays: 30 };
    case "POST /api/runners/spawn":
      return { runnerId: w.a.fake.runnerId, prompt: "hi", cwd: "/fake", model: null };
    case "POST /api/runners/restart":
    case "POST /api/runners/stop":
      return { runnerId: w.a.fake.runnerId };
    case "DELETE /api/runners/:runnerId/recent-folders":
      return { path: "/fake" };
    case "PUT /api/settings/hidden-models":
      return { hiddenModels: ["mock/mock-1"] };
    case "POST /api/sessions/:id/input":
      return { kind: "prompt", text: "hello" };
    case "POST /api/runners/:runnerId/skills":
    case "POST /api/runners/:runnerId/agents":
      return { name: "fuzz", content: "---\ndescription: fuzz\n---\n" };
    case "PUT /api/runners/:runnerId/skills/:name":
    case "PUT /api/runners/:runnerId/agents/:name":
      return { content: "fuzz" };
    case "POST /api/auth/*":
      return { email: "fuzz@example.com", password: "correct horse battery", name: "Fuzz" };
  }
  return {};
}

function bodyArb(w: World, route: string): fc.Arbitrary<string | Uint8Array | undefined> {
  const base = baseBody(w, route);
  const keys = Object.keys(base);
  const mutated: fc.Arbitrary<unknown> = fc.oneof(
    fc.constant(base),
    keys.length
      ? fc.tuple(fc.constantFrom(...keys), hostileValue).map(([k, v]) => ({ ...base, [k]: v }))
      : fc.constant(base),
    keys.length
      ? fc.constantFrom(...keys).map((k) => {
        const copy: Record<string, unknown> = { ...base };
        delete copy[k];
        return copy;
      })
      : fc.constant(base),
    fc.tuple(hostileString, hostileValue).map(([k, v]) => ({ ...base, [k]: v })),
    fc.array(fc.constant(base), { maxLength: 2 }),
  );
  return fc.oneof(
    { arbitrary: mutated.map((v) => JSON.stringify(v)), weight: 10 },
    { arbitrary: fc.constantFrom(...RAW_JSON), weight: 3 },
    { arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)), weight: 2 },
    {
      arbitrary: mutated.map((v) => JSON.stringify(v)).chain((s) =>
        fc.nat({ max: Math.max(0, s.length - 1) }).map((n) => s.slice(0, n))
      ),
      weight: 2,
    },
    {
      arbitrary: fc.constantFrom(
        new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]),
        new Uint8Array([0x22, 0xc0, 0xaf, 0x22]),
        new Uint8Array([0x22, 0xed, 0xa0, 0x80, 0x22]),
        new Uint8Array([0]),
      ),
      weight: 1,
    },
    { arbitrary: fc.constantFrom(ONE_MB, ONE_MB + 1, 3 * ONE_MB).map(bigBody), weight: 1 },
    { arbitrary: fc.constant(undefined), weight: 2 },
    { arbitrary: deepBodyArb(base), weight: 2 },
  );
}

/** The route's plausible body with one field (or a new one, or the whole) nested too deep. */
function deepBodyArb(base: Record<string, unknown>): fc.Arbitrary<string> {
  const keys = Object.keys(base);
  return fc.tuple(
    fc.oneof(fc.constantFrom(...keys, "payload", "__proto__"), fc.constant(null)),
    deepLevels,
  ).map(([k, levels]) => withDeep(k === null ? DEEP_MARK : { ...base, [k]: DEEP_MARK }, levels));
}

/** Whether a body is one {@linkcode deepBodyArb} made (or any nesting past the cap). */
function isDeep(body: string | Uint8Array | undefined): boolean {
  if (typeof body !== "string") return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "[" || c === "{") {
      if (++depth > MAX_JSON_DEPTH) return true;
    } else if (c === "]" || c === "}") depth--;
  }
  return false;
}

const bigBodies = new Map<number, string>();
function bigBody(size: number): string {
  let b = bigBodies.get(size);
  if (!b) bigBodies.set(size, b = `{"pad":"${"x".repeat(size - 10)}"}`);
  return b;
}

// deno-fmt-ignore
const CONTENT_TYPES = [
  "application/json", "application/json; charset=utf-8", "APPLICATION/JSON",
  "application/json-patch+json", "text/plain", "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x", "",
];

function httpCase(w: World, routes: { method: string; path: string }[]): fc.Arbitrary<HttpCase> {
  const relayUrl = w.relay.url;
  const sessionIds = [w.a.sessionId, w.b.sessionId, w.controlSession];
  const runnerIds = [w.a.fake.runnerId, w.b.fake.runnerId];
  const keyIds = [w.spareKeyIdB];
  // API routes are where the logic is; the web client's assets get a share.
  const route = fc.oneof(
    { arbitrary: fc.constantFrom(...routes.filter((r) => /^\/(api|_)/.test(r.path))), weight: 6 },
    { arbitrary: fc.constantFrom(...routes), weight: 1 },
  );
  return fc.record({
    route,
    // Mostly the route's own method, sometimes another one.
    otherMethod: fc.oneof(
      { arbitrary: fc.constant(null), weight: 5 },
      {
        arbitrary: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"),
        weight: 1,
      },
    ),
    // Mostly signed in (where the logic is), with every other way of calling.
    // deno-fmt-ignore
    auth: fc.constantFrom<AuthMode>(
      "keyA", "keyA", "keyA", "cookieA", "cookieA", "cookieA", "bearerA", "keyB", "none",
      "badKey", "badCookie", "tokenA",
    ),
    authAuth: fc.constantFrom<AuthMode>("none", "keyA", "cookieB", "badCookie"),
    origin: fc.constantFrom<string | null>(null, null, relayUrl, "https://evil.example", "null"),
    seg: fc.record({
      id: segmentArb(sessionIds),
      runnerId: segmentArb(runnerIds),
      keyId: segmentArb(keyIds),
      auth: fc.constantFrom(...AUTH_ENDPOINTS),
    }),
    query: queryArb,
    contentType: fc.constantFrom(...CONTENT_TYPES),
    spare: fc.constantFrom(...w.spareSessions),
  }).chain((r) => {
    const routeKey = `${r.route.method} ${r.route.path}`;
    return bodyArb(w, routeKey).map((body): HttpCase => {
      const isAuth = r.route.path === "/api/auth/*";
      const path = r.route.path
        .replace("/api/auth/*", `/api/auth/${r.seg.auth}`)
        .replace("/api/keys/:id", `/api/keys/${r.seg.keyId}`)
        .replace(":runnerId", r.seg.runnerId)
        .replace(":id", r.seg.id);
      const auth = isAuth ? r.authAuth : r.auth;
      const headers = authHeaders(w, auth, r.origin);
      if (r.contentType) headers["content-type"] = r.contentType;
      const method = r.otherMethod ?? r.route.method;
      // The sessions the other steps need are never deleted: a spare one is.
      const kept = method === "DELETE" && path === `/api/sessions/${r.seg.id}` &&
        sessionIds.includes(r.seg.id);
      return {
        kind: "http",
        route: routeKey,
        method,
        target: targetSafe((kept ? `/api/sessions/${r.spare}` : path) + r.query),
        auth,
        headers,
        ...(body !== undefined && method !== "GET" && method !== "HEAD"
          ? { body, deep: isDeep(body) }
          : {}),
      };
    });
  });
}

function upgradeCase(w: World): fc.Arbitrary<HttpCase> {
  return fc.record({
    path: fc.constantFrom("/_runner", "/_viewer", "/_viewer?x=1", "/_runner/"),
    upgrade: fc.option(fc.constantFrom("websocket", "WebSocket", "h2c", "", "websocket, x")),
    connection: fc.option(fc.constantFrom("Upgrade", "upgrade", "keep-alive", "Upgrade, close")),
    key: fc.option(fc.constantFrom("dGhlIHNhbXBsZSBub25jZQ==", "short", "", "!!!!")),
    version: fc.option(fc.constantFrom("13", "8", "x", "")),
    auth: fc.constantFrom<AuthMode>("none", "keyA", "cookieA", "badKey", "badCookie"),
    origin: fc.constantFrom<string | null>(null, w.relay.url, "https://evil.example"),
  }).map((r): HttpCase => {
    const headers = authHeaders(w, r.auth, r.origin);
    if (r.upgrade !== null) headers.upgrade = r.upgrade;
    if (r.connection !== null) headers.connection = r.connection;
    if (r.key !== null) headers["sec-websocket-key"] = r.key;
    if (r.version !== null) headers["sec-websocket-version"] = r.version;
    return {
      kind: "upgrade",
      route: `GET ${r.path}`,
      method: "GET",
      target: r.path,
      auth: r.auth,
      headers,
    };
  });
}

async function sendHttp(w: World, c: HttpCase): Promise<void> {
  const res = await rawRequest(w.relay.port, {
    method: c.method,
    target: c.target,
    headers: c.headers,
    ...(c.body !== undefined ? { body: c.body } : {}),
    timeoutMs: REQUEST_TIMEOUT_MS,
  }).catch((err) => {
    const size = c.body === undefined ? 0 : c.body.length;
    throw new Error(`${err} (${c.method} ${c.target.slice(0, 200)}, body ${size})`);
  });
  const what = `${c.method} ${c.target.slice(0, 200)} [${c.auth}] → ${describe(res)}`;
  w.tally.add(c.kind);
  w.tally.add(`${c.kind}.status.${res.status}`);
  if (c.kind === "http") w.tally.add(`http.route.${c.route}`);
  assert.ok(res.status < 500, `5xx: ${what}`);
  if (c.deep) checkDeep(w, c, res, what);
  if (c.kind === "upgrade" && res.status === 101) return;
  assert.ok(res.status >= 200 && res.status !== 101, `unexpected status: ${what}`);
  const publicRoute =
    /^\w+ \/api\/(openapi\.json|register|setup-status|auth\/|webhooks\/:id\/fire|push\/vapid-public-key)/
      .test(c.route);
  if (
    c.auth === "tokenA" && c.route.startsWith(`${c.method} /api/`) && !publicRoute &&
    res.status < 400
  ) {
    // A runner token reaches only its runner's broadcasts and its sessions' triggers.
    assert.ok(
      c.route === "POST /api/runners/:runnerId/trigger-broadcast" ||
        c.route === "POST /api/sessions/:id/trigger",
      `a runner token was let through: ${what}`,
    );
  }
  if (c.method === "HEAD" || res.status === 204) return;
  const type = res.headers.get("content-type") ?? "";
  if (c.route.includes("/api/auth/*")) {
    // better-auth answers with its own shape: `{code?, message}` or an empty
    // 404, and has an HTML error page (GET /api/auth/error).
    if (res.status < 400) return;
    if (res.body.length > 0) {
      assert.match(type, /^application\/json/, what);
      const body = JSON.parse(res.text);
      // The relay's own envelope (a method the route lacks), or better-auth's.
      const message = body?.error ? body.error.message : body?.message;
      assert.equal(typeof message, "string", what);
    } else assert.equal(res.status, 404, what);
  } else if (res.status >= 400) {
    assertErrorEnvelope(res, what);
  } else if (!/^\w+ \/(api\/|health)/.test(c.route)) {
    // The web client's pages, assets and redirects.
    if (res.status >= 300) assert.ok(res.headers.get("location"), `no location: ${what}`);
    else assert.ok(type.length > 0, `no content-type: ${what}`);
  } else {
    assert.match(type, /^application\/json/, what);
    const body = JSON.parse(res.text);
    assert.ok(body !== null && typeof body === "object", what);
  }
  if (res.status < 300) recordAccepted(w, c, res);
}

const FIRE = "POST /api/webhooks/:id/fire";

/**
 * What a route that reads JSON may answer to a body nested past the cap:
 * `too_deep`, or a refusal checked before the body is read (credentials,
 * scope, Origin, the id, the media type, a rate limit, the request's size),
 * each only where the case gives it a reason. Every one is a 4xx JSON error
 * that changes nothing (the database check at the end holds it to that).
 */
const DEEP_BODY_ANSWERS: Record<string, (c: HttpCase, w: World) => boolean> = {
  "400 too_deep": () => true,
  // The fire route checks the media type (and the signature) before it reads anything.
  "400 bad_content_type": (c) => c.route === FIRE,
  "401 bad_signature": (c) => c.route === FIRE,
  "401 replay_protection_required": (c) => c.route === FIRE,
  "401 unauthorized": (c) => ["none", "badKey", "badCookie"].includes(c.auth),
  "403 bad_origin": (c, w) =>
    c.headers.cookie !== undefined && c.headers.origin !== undefined &&
    c.headers.origin !== w.relay.url,
  "403 forbidden_scope": (c) => c.auth === "tokenA",
  // A broadcast reaches other runners' listeners: it takes a key, never a browser's cookie.
  "403 key_required": (c) =>
    c.route === "POST /api/runners/:runnerId/trigger-broadcast" && c.headers.cookie !== undefined,
  // Push subscriptions take the browser's cookie only, checked before the body.
  "403 cookie_required": (c) => c.route.includes(" /api/push/") && c.headers.cookie === undefined,
  "403 signup_closed": (c) => c.route === "POST /api/register",
  // An id that is missing or another account's is looked up before the body is read.
  "404 not_found": (c) => /:\w/.test(c.route),
  "415 unsupported_media_type": (c) => !/^application\/json/i.test(c.headers["content-type"] ?? ""),
  "429 rate_limited": (c) => c.route === "POST /api/register" || c.route === FIRE,
  // node:http refuses a request target and headers over 16 KB before the app sees them.
  "431 headers_too_large": (c) => c.target.length > 16_000,
};

/**
 * A body nested past the cap, sent to a route that reads JSON (or to
 * better-auth's) with its own method: never accepted; answered as
 * {@linkcode DEEP_BODY_ANSWERS} allows.
 */
function checkDeep(w: World, c: HttpCase, res: RawResponse, what: string): void {
  const readsJson = c.route.startsWith(`${c.method} `) &&
    (w.jsonRoutes.has(routeKey(c.route)) || c.route === "POST /api/auth/*");
  const answer = `${res.status} ${
    res.status >= 400 ? JSON.parse(res.text || "{}").error?.code : ""
  }`;
  w.tally.add(`http.deep.${readsJson ? "json" : "other"}.${answer.replace(" ", ".")}`);
  if (!readsJson) return;
  assert.ok(res.status >= 400, `a body nested too deep was accepted: ${what}`);
  const allowed = DEEP_BODY_ANSWERS[answer];
  assert.ok(allowed?.(c, w), `a body nested too deep answered ${answer}: ${what}`);
}

/** `POST /api/x/:id/y/:t?` and `POST /api/x/{id}/y/{t}` alike. */
function routeKey(route: string): string {
  return route.replace(/\/:(\w+)\??/g, "/{$1}");
}

/** The routes whose OpenAPI operation has a JSON request body, as routeKey gives them. */
async function jsonRoutesOf(relayUrl: string): Promise<Set<string>> {
  const doc = await (await fetch(`${relayUrl}/api/openapi.json`)).json();
  const out = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
    for (const [method, op] of Object.entries(item)) {
      const body = (op as { requestBody?: { content?: Record<string, unknown> } }).requestBody;
      if (body?.content?.["application/json"]) out.add(`${method.toUpperCase()} ${path}`);
    }
  }
  return out;
}

/**
 * Not left to chance: each route with a body nested 200,000 levels and one
 * over 1 MiB, each viewer and control message type nested too deep and over
 * its channel's limit, and a hello nested too deep.
 */
async function everyRouteAndMessage(w: World, routes: { method: string; path: string }[]) {
  const deep = withDeep({ payload: DEEP_MARK }, 200_000);
  for (const r of routes) {
    if (r.method === "GET" || r.method === "HEAD" || !/^\/(api|_)/.test(r.path)) continue;
    const route = `${r.method} ${r.path}`;
    const target = r.path
      .replace("/api/auth/*", "/api/auth/sign-in/email")
      .replace("/api/keys/:id", `/api/keys/${w.spareKeyIdB}`)
      .replace(":runnerId", w.a.fake.runnerId)
      // A DELETE reads no body and deletes: a spare session, not one the next steps need.
      .replace(":id", route === "DELETE /api/sessions/:id" ? w.spareSessions[0]! : w.a.sessionId)
      .replace(/\/:target\??/, "/x");
    // Checked before the body: the webhook's existence and signature, the
    // registration rate limit (the fuzzing above may have used it up).
    const earlier = route === "POST /api/webhooks/:id/fire" || route === "POST /api/register";
    const readsJson = w.jsonRoutes.has(routeKey(route)) || route === "POST /api/auth/*";
    for (
      const [kind, body, status, code] of [
        ["deep", deep, 400, "too_deep"],
        ["big", bigBody(ONE_MB + 1), 413, "body_too_large"],
      ] as const
    ) {
      // Push subscriptions are a browser's own: they take the cookie, not a key.
      const cookieOnly = / \/api\/push\/(?!vapid-public-key)/.test(route);
      const headers: Record<string, string> = cookieOnly
        ? { cookie: w.a.user.cookie, origin: w.relay.url, "content-type": "application/json" }
        : { "x-api-key": w.a.user.apiKey, "content-type": "application/json" };
      const auth: AuthMode = cookieOnly ? "cookieA" : "keyA";
      const c: HttpCase = { kind: "http", route, method: r.method, target, auth, headers };
      const res = await rawRequest(w.relay.port, {
        method: r.method,
        target,
        headers,
        body,
        timeoutMs: REQUEST_TIMEOUT_MS,
      });
      const what = `${kind} body to ${route} → ${describe(res)}`;
      w.tally.add(`every.http.${kind}.${readsJson ? "json" : "other"}.${res.status}`);
      assert.ok(res.status < 500, what);
      if (res.status >= 400) assertErrorEnvelope(res, what);
      else recordAccepted(w, c, res);
      if (!readsJson) continue;
      if (earlier && res.status !== status) {
        if (kind === "deep") checkDeep(w, { ...c, body, deep: true }, res, what);
        else assert.ok(res.status >= 400, what);
      } else {
        assert.equal(res.status, status, what);
        assert.equal(JSON.parse(res.text).error.code, code, what);
      }
    }
  }

  const viewers = new ViewerPool(w);
  try {
    for (const t of [...VIEWER_TYPES, "no_such_type"]) {
      const m = { t, sessionId: w.a.sessionId, kind: "prompt", apiKey: w.a.user.apiKey };
      for (const conn of ["key", "cookie", "unauth"] as const) {
        await viewers.run({
          conn,
          type: `${t}.deep`,
          frame: withDeep({ ...m, text: DEEP_MARK }, 200_000),
          // 400 KB is past what a socket may send before it authenticates.
          meant: conn === "unauth" ? { close: 1009 } : { error: "too_deep" },
        });
      }
      await viewers.run({
        conn: "unauth",
        type: `${t}.deep`,
        frame: withDeep({ ...m, text: DEEP_MARK }, MAX_JSON_DEPTH + 1),
        meant: { error: "too_deep" },
      });
      await viewers.run({
        conn: "key",
        type: `${t}.oversized`,
        frame: JSON.stringify({ ...m, text: "x".repeat(ONE_MB) }),
        meant: { close: 1009 },
      });
    }
  } finally {
    await viewers.close();
  }

  for (const t of CONTROL_TYPES) {
    await runControl(w, {
      type: `${t}.deep`,
      build: (next) =>
        withDeep({
          t,
          id: 1,
          sessionId: w.controlSession,
          events: [{ seq: next, ts: 1, e: { type: "message_update", deep: DEEP_MARK } }],
        }, 200_000),
      meant: { error: "too_deep" },
    });
    await runControl(w, {
      type: `${t}.oversized`,
      build: () => JSON.stringify({ t, pad: "x".repeat(8 * ONE_MB + 1) }),
      meant: { close: 1009 },
    });
  }
  const hello = { t: "hello", v: 1, apiKey: w.a.token, runnerId: "deep", roots: DEEP_MARK };
  await runHello(w, {
    type: "hello-deep",
    frame: withDeep(hello, MAX_LINK_DEPTH + 1),
    runnerId: null,
    meant: { error: "too_deep", close: 4400 },
  });
  await runHello(w, {
    type: "hello-deep",
    // 400 KB is past what a runner may send before its hello is accepted.
    frame: withDeep(hello, 200_000),
    runnerId: null,
    meant: { close: 1009 },
  });
  console.log(`every route and message: ${w.tally.line("every.")}`);
}

/** Remembers what an accepted request changed, for the database check. */
function recordAccepted(w: World, c: HttpCase, res: RawResponse): void {
  // A case may send a route's path with another method; what changed the
  // database is the route of the method sent (a POST to GET /api/keys's path
  // creates a key).
  const path = c.route.split(" ")[1] ?? "";
  if (!path.startsWith("/api/")) return;
  const body = JSON.parse(res.text || "null");
  const who = userOf(w, c.auth);
  switch (`${c.method} ${path}`) {
    case "POST /api/keys":
    case "POST /api/register":
      w.created.keys++;
      break;
    case "DELETE /api/keys/:id":
      w.created.deletedKeys++;
      break;
    case "POST /api/runners/spawn":
      w.created.sessions++;
      break;
    case "DELETE /api/sessions/:id":
      w.created.deletedSessions++;
      break;
    case "PUT /api/settings/hidden-models":
      w.settingsWritten.add(`${who} hiddenModels`);
      w.hiddenModels.set(who!, body.hiddenModels);
      break;
    case "DELETE /api/runners/:runnerId/recent-folders":
      if (body.deleted) {
        const runnerId = decodeURIComponent(c.target.split("/")[3]!);
        w.settingsWritten.add(`${who} recentFolders.dismissed.${runnerId}`);
      }
      break;
  }
}

// ---------------------------------------------------------------------------
// Viewer channel

type ViewerConn = "key" | "cookie" | "unauth";

interface ViewerCase {
  conn: ViewerConn;
  type: string;
  /** A text frame, or bytes for a binary frame. */
  frame: string | Uint8Array<ArrayBuffer>;
  /** What the case is built to get; it must be what {@linkcode expectedAnswer} says. */
  meant?: FrameAnswer;
}

const VIEWER_TYPES = ["subscribe", "unsubscribe", "input", "watch", "ping", "auth", "visibility"];

function viewerCase(w: World): fc.Arbitrary<ViewerCase> {
  const sessionId = fc.oneof(
    { arbitrary: fc.constantFrom(w.a.sessionId, w.b.sessionId, w.controlSession), weight: 3 },
    { arbitrary: hostileValue, weight: 2 },
  );
  const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
  const extra = fc.dictionary(
    fc.constantFrom("__proto__", "constructor", "x", "t2"),
    hostileValue,
    {
      maxKeys: 2,
    },
  );
  type Tagged = [string, Record<string, unknown>];
  const as = (t: string) => (m: Record<string, unknown>): Tagged => [t, { t, ...m }];
  const message: fc.Arbitrary<Tagged> = fc.oneof(
    fc.record({
      sessionId,
      since: maybe(fc.oneof(fc.nat({ max: 10 }), hostileNumber, hostileValue)),
    }).map(as("subscribe")),
    fc.record({ sessionId }).map(as("unsubscribe")),
    fc.record({ sessionId, visible: fc.oneof(fc.boolean(), hostileValue) }).map(as("visibility")),
    fc.record({
      id: maybe(hostileValue),
      sessionId,
      kind: fc.oneof(fc.constantFrom(...INPUT_KINDS), hostileValue),
      text: maybe(hostileValue),
    }).map(as("input")),
    extra.map(as("watch")),
    extra.map(as("ping")),
    fc.record({
      apiKey: fc.oneof(fc.constantFrom(w.a.user.apiKey, w.b.token), hostileValue),
    }).map(as("auth")),
    fc.record({
      t: hostileValue.filter((v) => !VIEWER_TYPES.includes(v as string)),
      sessionId: maybe(sessionId),
    }).map((m): Tagged => ["unknown", m]),
  );
  return fc.record({
    conn: fc.constantFrom<ViewerConn>("key", "key", "cookie", "unauth"),
    shape: fc.oneof(
      { arbitrary: message.map(([type, m]) => ({ type, frame: JSON.stringify(m) })), weight: 20 },
      {
        arbitrary: fc.constantFrom(...RAW_JSON).map((frame) => ({ type: "raw", frame })),
        weight: 3,
      },
      {
        arbitrary: fc.constant({
          type: "oversized",
          frame: JSON.stringify({ t: "ping", pad: "x".repeat(ONE_MB) }),
        }),
        weight: 1,
      },
      {
        arbitrary: fc.constant({ type: "binary", frame: new Uint8Array([0x7b, 0x7d]) }),
        weight: 1,
      },
      {
        // Every message type with a field nested past the cap.
        arbitrary: fc.tuple(message, deepLevels).map(([[type, m], levels]) => ({
          type: `${type}.deep`,
          frame: withDeep({ ...m, [type === "input" ? "text" : "deep"]: DEEP_MARK }, levels),
        })),
        weight: 3,
      },
      {
        // Every message type over the channel's size limit.
        arbitrary: message.map(([type, m]) => ({
          type: `${type}.oversized`,
          frame: JSON.stringify({ ...m, pad: "x".repeat(ONE_MB) }),
        })),
        weight: 1,
      },
    ),
  }).map(({ conn, shape }): ViewerCase => ({ conn, ...shape }));
}

const RELAY_TO_VIEWER = new Set([
  "hello",
  "subscribed",
  "events",
  "caught_up",
  "reset",
  "input_ok",
  "runners",
  "sessions",
  "runner",
  "session",
  "pong",
  "error",
]);

/** Checks every frame a viewer got is a known message; errors are well formed and not internal. */
function assertViewerFrames(frames: Record<string, unknown>[], what: string): void {
  for (const f of frames) {
    assert.ok(RELAY_TO_VIEWER.has(f.t as string), `unknown frame ${JSON.stringify(f)}: ${what}`);
    if (f.t === "error") {
      assert.equal(typeof f.code, "string", what);
      assert.equal(typeof f.message, "string", what);
      assert.notEqual(f.code, "internal", `internal error frame ${JSON.stringify(f)}: ${what}`);
    }
  }
}

/** Viewer sockets reused across cases (reopened after a close). */
class ViewerPool {
  #byKey: Viewer | null = null;
  #byCookie: Viewer | null = null;
  constructor(readonly w: World) {}

  async #get(conn: "key" | "cookie"): Promise<Viewer> {
    const cur = conn === "key" ? this.#byKey : this.#byCookie;
    if (cur && !cur.closeEvent) return cur;
    const v = await Viewer.connect(
      this.w.relay.url,
      conn === "key" ? { apiKey: this.w.a.user.apiKey } : { cookie: this.w.a.user.cookie },
    );
    if (conn === "key") this.#byKey = v;
    else this.#byCookie = v;
    return v;
  }

  async run(c: ViewerCase): Promise<void> {
    const w = this.w;
    w.tally.add("viewer");
    w.tally.add(`viewer.t.${c.type}`);
    const what = `${c.conn} ${c.type} ${
      typeof c.frame === "string" ? c.frame.slice(0, 300) : "<binary>"
    }`;
    const expected = expectedAnswer("viewer", c.conn !== "unauth", c.frame);
    if (c.meant) assert.deepEqual(expected, c.meant, `the case gets what it is meant to: ${what}`);
    if (c.conn === "unauth") return await this.#runUnauth(c, expected, what);
    const expectClose = expected?.close;
    const v = await this.#get(c.conn);
    const from = v.messages.length;
    const pongs = v.messages.filter((m) => m.t === "pong").length;
    v.ws.send(c.frame);
    // After a frame the relay must refuse, send nothing more: a client that
    // writes after the server's close sees an abnormal closure instead of the code.
    if (!v.closeEvent && !expectClose) v.send({ t: "ping" });
    // A fuzzed ping earns its own pong before the barrier's.
    const wanted = expectClose ? Infinity : pongs + (c.type === "ping" ? 2 : 1);
    await v.until(
      () => v.messages.filter((m) => m.t === "pong").length >= wanted || v.closeEvent !== null,
      expectClose ? `close after ${what}` : `pong after ${what}`,
      REQUEST_TIMEOUT_MS,
    );
    assertViewerFrames(v.messages.slice(from) as unknown as Record<string, unknown>[], what);
    if (v.closeEvent) {
      w.tally.add(`viewer.out.close${v.closeEvent.code}`);
      assert.equal(v.closeEvent.code, expectClose, `closed ${v.closeEvent.code}: ${what}`);
    } else {
      assert.equal(expectClose, undefined, `not closed: ${what}`);
      if (expected?.error) {
        const got = v.messages.slice(from).filter((m) => m.t === "error")
          .map((m) => (m as { code?: string }).code);
        assert.deepEqual(got, [expected.error], `error frames after ${what}`);
      }
      const errors = v.messages.slice(from).filter((m) => m.t === "error").length;
      w.tally.add(errors ? "viewer.out.error" : "viewer.out.answered");
    }
  }

  /** A socket without credentials: the fuzzed frame first, then a good auth. */
  async #runUnauth(c: ViewerCase, expected: FrameAnswer | null, what: string): Promise<void> {
    const w = this.w;
    const v = new Viewer(new WebSocket(w.relay.url.replace(/^http/, "ws") + "/_viewer"));
    try {
      await v.opened;
      v.ws.send(c.frame);
      // Every first frame gets an answer: a hello, an error, a close. Only
      // after a bad_json or too_deep error (which keep the socket) is a good auth sent,
      // so nothing is written to a socket the relay is closing.
      await v.until(
        () => v.messages.length > 0 || v.closeEvent !== null,
        `an answer to ${what}`,
        REQUEST_TIMEOUT_MS,
      );
      const first = v.messages[0];
      if (expected?.error) {
        assert.equal(first?.t === "error" && first.code, expected.error, `first answer: ${what}`);
      }
      if (first?.t === "error" && (first.code === "bad_json" || first.code === "too_deep")) {
        v.send({ t: "auth", apiKey: w.a.user.apiKey });
      }
      await v.until(
        () => v.messages.some((m) => m.t === "hello") || v.closeEvent !== null,
        `hello or close after ${what}`,
        REQUEST_TIMEOUT_MS,
      );
      if (!v.closeEvent) {
        v.send({ t: "ping" });
        await v.until(
          () => v.messages.some((m) => m.t === "pong") || v.closeEvent !== null,
          `pong after ${what}`,
          REQUEST_TIMEOUT_MS,
        );
      }
      assertViewerFrames(v.messages as unknown as Record<string, unknown>[], what);
      if (v.closeEvent) {
        w.tally.add(`viewer.out.unauth.close${v.closeEvent.code}`);
        // 4003: authenticated with a runner token, whose scope stops short of the viewer channel.
        assert.ok(
          [4001, 1009].includes(v.closeEvent.code) ||
            (v.closeEvent.code === 4003 && typeof c.frame === "string" &&
              c.frame.includes(w.b.token)),
          `unauthenticated socket closed with ${v.closeEvent.code}: ${what}`,
        );
        if (expected?.close) {
          assert.equal(v.closeEvent.code, expected.close, what);
          assert.deepEqual(v.messages, [], `frames before the close: ${what}`);
        }
      } else {
        w.tally.add("viewer.out.unauth.hello");
        assert.equal(expected?.close, undefined, `not closed: ${what}`);
      }
    } finally {
      await v.close();
    }
  }

  async close(): Promise<void> {
    await this.#byKey?.close();
    await this.#byCookie?.close();
  }
}

// ---------------------------------------------------------------------------
// Runner control channel: hellos

interface HelloCase {
  type: string;
  frame: string;
  /** Sent with A's runner token (bound to A's first runner). */
  byRunnerToken?: boolean;
  runnerId: string | null;
  /** What the case is built to get; it must be what {@linkcode expectedAnswer} says. */
  meant?: FrameAnswer;
}

function helloCase(w: World): fc.Arbitrary<HelloCase> {
  const runnerId = fc.oneof(
    { arbitrary: fc.uuid(), weight: 4 },
    { arbitrary: fc.constant(w.b.fake.runnerId), weight: 1 },
    { arbitrary: hostileValue, weight: 3 },
  );
  const apiKey = fc.oneof(
    { arbitrary: fc.constantFrom(w.a.token, w.a.user.apiKey), weight: 4 },
    { arbitrary: hostileValue, weight: 2 },
  );
  const field = <T>(good: fc.Arbitrary<T>) =>
    fc.oneof({ arbitrary: good, weight: 3 }, { arbitrary: hostileValue, weight: 1 });
  const hello = fc.record({
    t: fc.oneof({ arbitrary: fc.constant("hello"), weight: 8 }, {
      arbitrary: hostileValue,
      weight: 1,
    }),
    v: fc.oneof({ arbitrary: fc.constant(1), weight: 6 }, {
      arbitrary: fc.oneof(hostileNumber, hostileValue),
      weight: 1,
    }),
    apiKey,
    runnerId,
    name: field(fc.constant("fuzz")),
    roots: field(fc.array(fc.oneof(hostileString, hostileValue), { maxLength: 4 })),
    version: field(fc.constant("0.0.0")),
    platform: field(fc.constant("linux")),
    sessions: field(
      fc.array(
        fc.oneof(
          fc.record({
            sessionId: fc.oneof(
              fc.constantFrom(w.a.sessionId, w.b.sessionId, w.controlSession),
              hostileValue,
            ),
            cwd: hostileValue,
          }),
          hostileValue,
        ),
        { maxLength: 4 },
      ),
    ),
  }, { requiredKeys: ["t", "v", "apiKey", "runnerId"] });
  return fc.oneof(
    {
      arbitrary: hello.map((h) => ({
        type: "hello",
        frame: JSON.stringify(h),
        runnerId: typeof h.runnerId === "string" ? h.runnerId : null,
        byRunnerToken: h.apiKey === w.a.token,
      })),
      weight: 12,
    },
    {
      arbitrary: fc.tuple(hello, fc.constantFrom("__proto__", "constructor")).map(([h, k]) => ({
        type: "hello-pollution",
        frame: JSON.stringify(h).replace(/^\{/, `{"${k}":{"polluted":1,"v":2},`),
        runnerId: typeof h.runnerId === "string" ? h.runnerId : null,
      })),
      weight: 2,
    },
    {
      arbitrary: fc.constantFrom(...RAW_JSON).map((frame) => ({
        type: "raw",
        frame,
        runnerId: null,
      })),
      weight: 2,
    },
    {
      arbitrary: fc.constant({
        type: "oversized",
        frame: JSON.stringify({ t: "hello", pad: "x".repeat(8 * ONE_MB + 1) }),
        runnerId: null,
      }),
      weight: 1,
    },
    {
      arbitrary: fc.tuple(
        hello,
        fc.constantFrom("roots", "sessions", "apiKey", "x"),
        linkDeepLevels,
      )
        .map(([h, k, levels]): HelloCase => ({
          type: "hello-deep",
          frame: withDeep({ ...h, [k]: DEEP_MARK }, levels),
          runnerId: null,
        })),
      weight: 2,
    },
  );
}

async function runHello(w: World, c: HelloCase): Promise<void> {
  w.tally.add("hello");
  const what = `${c.type} ${c.frame.slice(0, 300)}`;
  const ws = new WebSocket(w.relay.url.replace(/^http/, "ws") + "/_runner");
  const frames: Record<string, unknown>[] = [];
  let closed: CloseEvent | null = null;
  const done = new Promise<void>((resolve) => {
    ws.onmessage = (ev) => {
      frames.push(JSON.parse(ev.data));
      if (frames.some((f) => f.t === "welcome")) resolve();
    };
    ws.onclose = (ev) => {
      closed = ev;
      resolve();
    };
  });
  await new Promise<void>((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => reject(new Error(`runner socket failed: ${what}`));
  });
  ws.send(c.frame);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer to ${what}`)), REQUEST_TIMEOUT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
  const expected = expectedAnswer("runner", false, c.frame);
  if (c.meant) assert.deepEqual(expected, c.meant, `the case gets what it is meant to: ${what}`);
  const welcome = frames.find((f) => f.t === "welcome");
  if (welcome) {
    w.tally.add("hello.out.welcome");
    assert.equal(expected, null, `welcomed: ${what}`);
    assert.equal(welcome.runnerId, c.runnerId, what);
    if (c.byRunnerToken) {
      assert.equal(c.runnerId, w.a.fake.runnerId, `a runner token said hello as another runner`);
    }
    w.created.runners.add(c.runnerId!);
    assert.ok(Array.isArray(welcome.ended) && typeof welcome.acked === "object", what);
    ws.close();
    await new Promise<void>((resolve) => {
      if (closed) resolve();
      else ws.onclose = () => resolve();
    });
    return;
  }
  const code = (closed as CloseEvent | null)?.code;
  w.tally.add(`hello.out.close${code}`);
  if (expected?.close === 1009) {
    // Cut off by the first-message limit before the hello was read: nothing but the close.
    assert.equal(code, 1009, what);
    assert.deepEqual(frames, [], `frames before the close: ${what}`);
    return;
  }
  assert.ok(code === 4400 || code === 4001 || code === 4003, `${code}: ${what}`);
  if (expected?.close) assert.equal(code, expected.close, what);
  const err = frames.find((f) => f.t === "error");
  assert.ok(err, `an error frame before the close: ${what}`);
  if (expected?.error) assert.equal(err.code, expected.error, what);
  assert.equal(typeof err.code, "string", what);
  assert.equal(typeof err.message, "string", what);
  assert.notEqual(err.code, "internal", what);
  if (c.runnerId === w.b.fake.runnerId && code !== 4400 && code !== 4001) {
    assert.equal(code, 4003, `another account's runner id: ${what}`);
  }
}

// ---------------------------------------------------------------------------
// Runner control channel: after the hello

type SeqHint = "next" | "skip" | "same" | "old" | "zero";

interface ControlCase {
  type: string;
  /** Built at send time (seqs depend on what the relay holds). */
  build: (next: number) => string | Uint8Array<ArrayBuffer>;
  /** What the case is built to get; it must be what {@linkcode expectedAnswer} says. */
  meant?: FrameAnswer;
  /** Whether the frame carries events the relay should store for the control session. */
  storable?: boolean;
}

/** Every message type a runner sends after its hello, and one the relay does not know. */
const CONTROL_TYPES = ["events", "res", "ping", "call", "service_announce", "no_such_type"];

function controlCase(w: World): fc.Arbitrary<ControlCase> {
  const seqHint = fc.constantFrom<SeqHint>("next", "next", "skip", "same", "old", "zero");
  const seq = fc.oneof(
    { arbitrary: seqHint, weight: 6 },
    { arbitrary: fc.oneof(hostileNumber, hostileValue), weight: 2 },
  );
  const body = fc.oneof(
    {
      arbitrary: fc.record({
        type: fc.oneof(
          fc.constantFrom(
            "message_update",
            "session_start",
            "agent_start",
            "agent_end",
            "message_start",
            "tool_execution_update",
            "session_end",
          ),
          hostileString,
        ),
        cwd: hostileValue,
        model: hostileValue,
        message: hostileValue,
        reason: hostileValue,
        assistantMessageEvent: hostileValue,
      }, { requiredKeys: ["type"] }),
      weight: 6,
    },
    { arbitrary: hostileValue, weight: 1 },
    {
      arbitrary: fc.constant({ type: "tool_execution_update", big: "x".repeat(2 * ONE_MB + 10) }),
      weight: 1,
    },
  );
  // Well-formed envelopes (whose hostile bodies get stored) and broken ones.
  const event = fc.oneof(
    {
      arbitrary: fc.record({
        seq: fc.constantFrom<SeqHint>("next", "next", "skip", "same", "old"),
        ts: fc.integer(),
        e: body.filter((e) => typeof (e as { type?: unknown })?.type === "string"),
      }),
      weight: 3,
    },
    {
      arbitrary: fc.record({ seq, ts: fc.oneof(fc.integer(), hostileValue), e: body }, {
        requiredKeys: ["seq", "e"],
      }),
      weight: 1,
    },
  );
  const sessionId = fc.oneof(
    { arbitrary: fc.constant(w.controlSession), weight: 6 },
    { arbitrary: fc.constantFrom(w.a.sessionId, w.b.sessionId), weight: 1 },
    { arbitrary: hostileValue, weight: 1 },
  );
  const resolveSeq = (s: unknown, next: number, i: number) =>
    s === "next"
      ? next + i
      : s === "skip"
      ? next + i + 3
      : s === "same"
      ? Math.max(1, next - 1)
      : s === "old"
      ? 1
      : s === "zero"
      ? 0
      : s;
  return fc.oneof(
    {
      arbitrary: fc.record({
        sessionId,
        events: fc.oneof({ arbitrary: fc.array(event, { maxLength: 5 }), weight: 6 }, {
          arbitrary: hostileValue,
          weight: 1,
        }),
      }).map((m): ControlCase => ({
        type: "events",
        storable: m.sessionId === w.controlSession,
        build: (next) =>
          JSON.stringify({
            t: "events",
            sessionId: m.sessionId,
            events: Array.isArray(m.events)
              ? m.events.map((ev, i) =>
                ev && typeof ev === "object" && !Array.isArray(ev)
                  ? { ...ev, seq: resolveSeq(ev.seq, next, i) }
                  : ev
              )
              : m.events,
          }),
      })),
      weight: 10,
    },
    {
      arbitrary: fc.record({
        id: hostileValue,
        ok: hostileValue,
        data: hostileValue,
        error: hostileValue,
      })
        .map((m): ControlCase => ({
          type: "res",
          build: () => JSON.stringify({ t: "res", ...m }),
        })),
      weight: 3,
    },
    {
      arbitrary: hostileValue.map((extra): ControlCase => ({
        type: "ping",
        build: () => JSON.stringify({ t: "ping", extra }),
      })),
      weight: 1,
    },
    {
      arbitrary: fc.record({ t: hostileValue, sessionId: hostileValue }).filter((m) =>
        !["events", "res", "ping"].includes(m.t as string)
      ).map((m): ControlCase => ({ type: "unknown", build: () => JSON.stringify(m) })),
      weight: 2,
    },
    {
      arbitrary: fc.constantFrom(...RAW_JSON).map((raw): ControlCase => ({
        type: "raw",
        build: () => raw,
      })),
      weight: 2,
    },
    {
      arbitrary: fc.constant<ControlCase>({
        type: "oversized",
        build: () => JSON.stringify({ t: "ping", pad: "x".repeat(8 * ONE_MB + 1) }),
        meant: { close: 1009 },
      }),
      weight: 1,
    },
    {
      arbitrary: fc.constant<ControlCase>({
        type: "binary",
        build: () => new Uint8Array([0x7b, 0x7d]),
        // 1003 (unsupported data) is the standard code for a binary frame.
        meant: { close: 1003 },
      }),
      weight: 1,
    },
    {
      // Every message type with a field nested past the cap.
      arbitrary: fc.tuple(fc.constantFrom(...CONTROL_TYPES), linkDeepLevels).map((
        [t, levels],
      ): ControlCase => ({
        type: `${t}.deep`,
        build: (next) =>
          withDeep({
            t,
            id: 1,
            op: "triggers.list",
            sessionId: w.controlSession,
            events: [{ seq: next, ts: 1, e: { type: "message_update", deep: DEEP_MARK } }],
            data: { payload: DEEP_MARK },
            triggerDefs: [{ type: "x:y", schema: DEEP_MARK }],
          }, levels),
        meant: { error: "too_deep" },
      })),
      weight: 2,
    },
    {
      // Every message type over the channel's size limit.
      arbitrary: fc.constantFrom(...CONTROL_TYPES).map((t): ControlCase => ({
        type: `${t}.oversized`,
        build: () =>
          JSON.stringify({ t, sessionId: w.controlSession, pad: "x".repeat(8 * ONE_MB + 1) }),
        meant: { close: 1009 },
      })),
      weight: 1,
    },
  );
}

const RELAY_TO_RUNNER_ERRORS = new Set([
  "too_deep",
  "bad_events",
  "unknown_session",
  "bad_json",
  "unknown_type",
]);

async function runControl(w: World, c: ControlCase): Promise<void> {
  w.tally.add("control");
  w.tally.add(`control.t.${c.type}`);
  if (!w.control.open) {
    w.control = await FakeRunner.connect(w.relay.url, {
      apiKey: w.controlToken,
      runnerId: w.control.runnerId,
      sessions: [w.controlSession],
    });
  }
  const r = w.control;
  const id = w.controlSession;
  const before = r.acked(id);
  const from = r.received.length;
  const pongs = () => r.received.filter((m) => m.t === "pong").length;
  // A fuzzed ping earns its own pong before the barrier's: wait for both, or
  // the barrier's would arrive during the next case and end its wait early.
  const wanted = pongs() + (c.type === "ping" ? 2 : 1);
  const frame = c.build(before + 1);
  const what = `${c.type} ${typeof frame === "string" ? frame.slice(0, 300) : "<binary>"}`;
  const expected = expectedAnswer("runner", true, frame);
  if (c.meant) assert.deepEqual(expected, c.meant, `the case gets what it is meant to: ${what}`);
  r.sendRaw(frame);
  if (expected?.close) {
    const ev = await Promise.race([
      r.closed,
      new Promise<null>((resolve) => setTimeout(() => resolve(null), REQUEST_TIMEOUT_MS)),
    ]);
    w.tally.add(`control.out.close${ev?.code}`);
    assert.equal(ev?.code, expected.close, `close after ${what}`);
    return;
  }
  try {
    r.send({ t: "ping" });
    await r.until(() => pongs() >= wanted || r.closeEvent !== null, "pong", REQUEST_TIMEOUT_MS);
    if (r.closeEvent) throw new Error("closed");
  } catch (err) {
    throw new Error(`no pong after ${what}: ${err} (close ${r.closeEvent?.code})`);
  }
  const got = r.received.slice(from);
  if (expected?.error) {
    const errors = got.filter((f) => f.t === "error");
    assert.deepEqual(
      errors.map((f) => f.code),
      [expected.error],
      `error frames ${JSON.stringify(errors).slice(0, 500)} after ${what}`,
    );
  }
  for (const f of got) {
    assert.ok(["ack", "error", "pong"].includes(f.t as string), `frame ${JSON.stringify(f)}`);
    if (f.t === "error") {
      assert.ok(
        RELAY_TO_RUNNER_ERRORS.has(f.code as string),
        `error ${JSON.stringify(f)}: ${what}`,
      );
      assert.equal(typeof f.message, "string", what);
      w.tally.add(`control.out.${f.code}`);
    }
    if (f.t === "ack") w.tally.add("control.out.ack");
  }
  if (c.storable && got.some((f) => f.t === "ack")) {
    // The ack names the session's last stored seq, which never goes back.
    assert.ok(r.acked(id) >= before, what);
    // The pong does not wait for commits in flight (they end in the writer
    // thread), so acks may still arrive: the listed lastSeq is never behind an
    // ack already received, and it matches the acks once they stop.
    await eventually(`lastSeq to match the acks after ${what}`, async () => {
      const acked = r.acked(id);
      const res = await w.a.user.api(`/api/sessions/${id}`);
      const lastSeq = (await res.json()).session.lastSeq;
      assert.ok(lastSeq >= acked, `lastSeq ${lastSeq} is behind ack ${acked} after ${what}`);
      return lastSeq === r.acked(id) ? true : undefined;
    }, 5_000);
  }
}

// ---------------------------------------------------------------------------
// Answers from a hostile runner

interface AnswerCase {
  op: "spawn" | "models" | "input" | "restart" | "stop";
  answer: Record<string, unknown>;
  /** A stray `res` for an id nobody asked about, sent first. */
  stray: Record<string, unknown> | null;
}

function answerCase(_w: World): fc.Arbitrary<AnswerCase> {
  const goodCode = fc.constantFrom(
    "cwd_outside_roots",
    "bad_request",
    "not_found",
    "busy",
    "unknown_model",
    "runner_error",
    "internal",
    "session_ended",
  );
  const answer = fc.oneof(
    fc.record({ ok: fc.constant(true), data: hostileValue }),
    fc.record({ ok: fc.constant(true), data: fc.record({ cwd: hostileValue }) }),
    fc.record({
      ok: fc.constant(true),
      data: fc.record({
        models: fc.oneof(
          hostileValue,
          fc.array(
            fc.record({ provider: hostileValue, id: hostileValue, name: hostileValue }),
            { maxLength: 3 },
          ),
        ),
      }),
    }),
    fc.record({ ok: fc.constant(false), error: hostileValue }),
    fc.record({
      ok: fc.constant(false),
      error: fc.record({ code: fc.oneof(goodCode, hostileValue), message: hostileValue }),
    }),
    fc.record({ ok: hostileValue, data: hostileValue, error: hostileValue }),
  );
  return fc.record({
    op: fc.constantFrom<AnswerCase["op"]>(
      "spawn",
      "spawn",
      "models",
      "models",
      "input",
      "restart",
      "stop",
    ),
    answer,
    stray: fc.option(
      fc.record({ id: hostileValue, ok: hostileValue, data: hostileValue, error: hostileValue }),
      { freq: 3 },
    ),
  });
}

async function runAnswer(w: World, c: AnswerCase): Promise<void> {
  w.tally.add("answers");
  const h = w.hostile;
  assert.ok(h.open, "the hostile runner is connected");
  h.answer = (req) => {
    if (c.stray) h.send({ ...c.stray, t: "res" });
    h.send({ ...c.answer, t: "res", id: req.id });
    return null;
  };
  const runnerId = h.runnerId;
  const req = c.op === "spawn"
    ? { method: "POST", target: "/api/runners/spawn", body: { runnerId, prompt: "x", cwd: null } }
    : c.op === "models"
    ? { method: "GET", target: `/api/runners/${runnerId}/models` }
    : c.op === "input"
    ? {
      method: "POST",
      target: `/api/sessions/${w.hostileSession}/input`,
      body: { kind: "prompt", text: "x" },
    }
    : { method: "POST", target: `/api/runners/${c.op}`, body: { runnerId } };
  const res = await rawRequest(w.relay.port, {
    method: req.method,
    target: req.target,
    headers: { "x-api-key": w.a.user.apiKey, "content-type": "application/json" },
    ...(req.body ? { body: JSON.stringify(req.body) } : {}),
    timeoutMs: REQUEST_TIMEOUT_MS,
  });
  h.answer = defaultAnswer;
  const what = `${c.op} answered ${JSON.stringify(c.answer).slice(0, 300)} → ${describe(res)}`;
  w.tally.add(`answers.status.${res.status}`);
  // A runner that answers nonsense is a bad gateway (502), never an internal error (500).
  assert.ok(res.status < 500 || res.status === 502, what);
  if (res.status >= 400) assertErrorEnvelope(res, what);
  else {
    assert.equal(res.status, 200, what);
    const body = JSON.parse(res.text);
    if (c.op === "spawn") {
      w.created.sessions++;
      assert.equal(typeof body.sessionId, "string", what);
    }
    if (c.op === "models") assert.ok(Array.isArray(body.models), what);
  }
}

// ---------------------------------------------------------------------------
// The database after the run

function checkDatabase(w: World): void {
  const db = new DatabaseSync(join(w.relay.dataDir, "relay.db"), { readOnly: true });
  try {
    const one = <T>(sql: string) => db.prepare(sql).get() as T;
    const all = <T>(sql: string) => db.prepare(sql).all() as T[];
    const integrity = all<{ integrity_check: string }>("PRAGMA integrity_check");
    assert.deepEqual(integrity.map((r) => r.integrity_check), ["ok"]);
    const orphans = one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM session_event_chunks
       WHERE session_id NOT IN (SELECT id FROM sessions)`,
    );
    assert.equal(orphans.n, 0, "every stored event belongs to a session");
    const overlaps = one<{ n: number }>(
      `SELECT COUNT(*) AS n FROM (
         SELECT first_seq, last_seq,
           LAG(last_seq) OVER (PARTITION BY session_id ORDER BY first_seq) AS prev
         FROM session_event_chunks)
       WHERE last_seq < first_seq OR first_seq <= prev`,
    );
    assert.equal(overlaps.n, 0, "a session's chunks of events ascend and never overlap");
    const badSeq = all<{ id: string; last_seq: number; max_seq: number }>(
      `SELECT s.id, s.last_seq, COALESCE(MAX(e.last_seq), 0) AS max_seq
       FROM sessions s LEFT JOIN session_event_chunks e ON e.session_id = s.id
       GROUP BY s.id HAVING s.last_seq != COALESCE(MAX(e.last_seq), 0)`,
    );
    assert.deepEqual(badSeq, [], "every session's last_seq is its highest stored seq");

    const keys = one<{ n: number }>("SELECT COUNT(*) AS n FROM api_keys").n;
    assert.equal(
      keys,
      w.initial.keys + w.created.keys - w.created.deletedKeys,
      "keys: only accepted requests created or deleted any",
    );
    const sessions = one<{ n: number }>("SELECT COUNT(*) AS n FROM sessions").n;
    assert.equal(
      sessions,
      w.initial.sessions + w.created.sessions - w.created.deletedSessions,
      "sessions: only accepted spawns and deletes",
    );
    const runners = one<{ n: number }>("SELECT COUNT(*) AS n FROM runners").n;
    assert.equal(
      runners,
      w.initial.runners + w.created.runners.size,
      "runners: only welcomed ones",
    );
    const settings = all<{ user_id: string; key: string; value: string }>(
      "SELECT user_id, key, value FROM user_settings",
    );
    for (const s of settings) {
      assert.ok(
        w.settingsWritten.has(`${s.user_id} ${s.key}`),
        `setting ${s.key} of ${s.user_id} was written by an accepted request`,
      );
      if (s.key === "hiddenModels") {
        assert.deepEqual(JSON.parse(s.value), w.hiddenModels.get(s.user_id), "last accepted value");
      }
    }
    console.log(
      `database: ${keys} keys, ${sessions} sessions, ${runners} runners, ${settings.length} ` +
        `settings, ${
          one<{ n: number }>(
            `SELECT COALESCE(SUM(CASE WHEN seqs IS NULL THEN last_seq - first_seq + 1
               ELSE length(seqs) - length(replace(seqs, ',', '')) + 1 END), 0) AS n
             FROM session_event_chunks`,
          ).n
        } events`,
    );
  } finally {
    db.close();
  }
}
