import assert from "node:assert/strict";
import { httpErrorOf, RelayError } from "./errors.ts";
import { RunnerLink } from "./runner_link.ts";
import type { ChannelSocket } from "./ws_transport.ts";

/** A link over a socket that takes frames and never answers by itself. */
function link() {
  const sent: { id: number }[] = [];
  const socket = {
    readyState: WebSocket.OPEN,
    send: (f: string) => sent.push(JSON.parse(f)),
    close: () => {},
  };
  return { link: new RunnerLink(socket as unknown as ChannelSocket, "r1", "u1", null), sent };
}

/** The status and code a request fails with, given the runner's answer. */
async function failure(answer: (l: RunnerLink, id: number) => void, timeoutMs = 10_000) {
  const { link: l, sent } = link();
  const req = l.request("spawn", {}, timeoutMs);
  answer(l, sent[0]?.id ?? 0);
  const err = await req.then(() => null, (e) => e);
  assert.ok(err instanceof RelayError, String(err));
  const { status, body } = httpErrorOf(err);
  return `${status} ${body.error.code}: ${body.error.message}`;
}

Deno.test("a runner's error codes keep the statuses callers always got", async () => {
  const cases: [string | undefined, string][] = [
    ["cwd_outside_roots", "400 cwd_outside_roots: m"],
    ["bad_request", "400 bad_request: m"],
    ["cwd_not_found", "400 cwd_not_found: m"],
    ["unknown_model", "400 unknown_model: m"],
    ["not_found", "404 not_found: m"],
    ["busy", "409 busy: m"],
    ["session_ended", "409 session_ended: m"],
    ["not_ready", "409 not_ready: m"],
    ["not_queued", "409 not_queued: m"],
    ["runner_timeout", "504 runner_timeout: m"],
    ["start_timeout", "504 start_timeout: m"],
    ["something_else", "502 something_else: m"],
    ["constructor", "502 constructor: m"],
  ];
  for (const [code, want] of cases) {
    const got = await failure((l, id) =>
      l.resolve({ t: "res", id, ok: false, error: { code: code!, message: "m" } })
    );
    assert.equal(got, want);
  }
  assert.equal(
    await failure((l, id) => l.resolve({ t: "res", id, ok: false } as never)),
    "502 runner_error: Runner failed the request",
  );
});

Deno.test("a request to a closed, vanished or silent runner fails as it always did", async () => {
  assert.equal(
    await failure((l) => l.failPending()),
    "502 runner_unreachable: Runner disconnected",
  );
  const { link: closed } = link();
  closed.failPending();
  const err = await closed.request("input", {}, 10).then(() => null, (e) => e);
  assert.equal(
    `${httpErrorOf(err).status} ${err.code}: ${err.message}`,
    "503 runner_offline: Runner is not connected",
  );
  assert.equal(
    await failure(() => {}, 1),
    "504 runner_timeout: Runner did not answer 'spawn' in time",
  );
});

Deno.test("a runner's empty error message reaches the client as the relay's own", async () => {
  assert.equal(
    await failure((l, id) =>
      l.resolve({ t: "res", id, ok: false, error: { code: "busy", message: "" } })
    ),
    "409 busy: Runner failed the request",
  );
});
