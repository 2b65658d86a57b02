import assert from "node:assert/strict";
import {
  conflict,
  httpErrorOf,
  invalid,
  notFound,
  offline,
  rejected,
  RelayError,
  sessionEnded,
  timeout,
} from "./errors.ts";

Deno.test("each domain error answers the status, code and message clients always got", () => {
  const cases: [RelayError, number, string, string][] = [
    [invalid("sessionId is required"), 400, "bad_request", "sessionId is required"],
    [invalid("x", "invalid_params"), 400, "invalid_params", "x"],
    [new RelayError("unauthorized", "bad_signature", "Bad"), 401, "bad_signature", "Bad"],
    [notFound("Session"), 404, "not_found", "Session not found"],
    [sessionEnded(), 409, "session_ended", "Session has ended"],
    [conflict("nonce_reused", "Used"), 409, "nonce_reused", "Used"],
    [new RelayError("misconfigured", "no_runner", "None"), 500, "no_runner", "None"],
    [rejected("bad_runner_answer", "Bad"), 502, "bad_runner_answer", "Bad"],
    [
      new RelayError("unreachable", "runner_unreachable", "Gone"),
      502,
      "runner_unreachable",
      "Gone",
    ],
    [offline(), 503, "runner_offline", "Runner is not connected"],
    [
      offline("The webhook's runner"),
      503,
      "runner_offline",
      "The webhook's runner is not connected",
    ],
    [timeout("session_timeout", "Late"), 504, "session_timeout", "Late"],
  ];
  for (const [err, status, code, message] of cases) {
    assert.deepEqual(httpErrorOf(err), { status, body: { error: { code, message } } });
  }
});
