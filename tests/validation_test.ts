import assert from "node:assert/strict";
import { errorCode, json, signUp, Viewer } from "./harness/client.ts";
import { type Stack, startTestRelay, type TestRelay, withStack } from "./harness/in_process.ts";
import { MODEL } from "./harness/mock_llm.ts";

const FOREIGN_ORIGIN = "https://evil.example";

interface World extends Stack {
  /** A session that ran one turn and is idle. */
  sessionId: string;
}

/** One relay, one runner (models mock-1 and mock-2) and one session that ran a turn. */
function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  return withStack({ models: ["mock-1", "mock-2"] }, async (s) => {
    const viewer = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    let sessionId: string;
    try {
      const res = await s.user.api(
        "/api/runners/spawn",
        json("POST", { runnerId: s.runnerId, cwd: s.home, model: MODEL, prompt: "hello" }),
      );
      const body = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      sessionId = body.sessionId;
      viewer.subscribe(sessionId);
      await viewer.waitForEvent(sessionId, "agent_end");
    } finally {
      await viewer.close();
    }
    await fn({ ...s, sessionId });
  });
}

/** Everything a bad request could have changed, minus clocks that tick on their own. */
async function snapshot(w: World) {
  const get = async (path: string) => {
    const res = await w.user.api(path);
    assert.equal(res.status, 200, path);
    return await res.json();
  };
  const { keys } = await get("/api/keys");
  const runners = await get("/api/runners");
  return {
    keys: keys.map(({ lastUsedAt: _, ...k }: Record<string, unknown>) => k),
    runners: runners.map(({ lastSeenAt: _, ...r }: Record<string, unknown>) => r),
    sessions: await get("/api/sessions"),
    pinned: await get("/api/sessions/pinned"),
    hiddenModels: await get("/api/settings/hidden-models"),
    modelRequests: w.llm.requests.length,
    runnerConnects: w.runner.proc.count(/connected to relay as runner/),
  };
}

const ONE_MB = 1024 * 1024;
const OVER_1_MB = ONE_MB + 1;

/** A JSON array of exactly `bytes` bytes (valid JSON that no route accepts). */
function jsonArrayOf(bytes: number): string {
  return `["${"a".repeat(bytes - 4)}"]`;
}

/** Bad bodies every JSON route must refuse the same way. */
function commonBadBodies(valid: unknown): [string, RequestInit, number, string][] {
  const headers = { "content-type": "application/json" };
  const big = JSON.stringify({ ...(valid as object), pad: "x".repeat(OVER_1_MB) });
  return [
    ["malformed JSON", { headers, body: '{"a": ' }, 400, "bad_json"],
    ["an empty body", { headers, body: "" }, 400, "bad_json"],
    ["invalid UTF-8", { headers, body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]) }, 400, "bad_json"],
    ["a JSON array", { headers, body: JSON.stringify([valid]) }, 400, "invalid_body"],
    [
      "the valid body nested 65 levels deep",
      { headers, body: "[".repeat(64) + JSON.stringify(valid) + "]".repeat(64) },
      400,
      "too_deep",
    ],
    [
      "the valid body with a field nested 200,000 levels deep",
      {
        headers,
        body: JSON.stringify({ ...(valid as object), x: 0 })
          .replace('"x":0', `"x":${"[".repeat(200_000)}${"]".repeat(200_000)}`),
      },
      400,
      "too_deep",
    ],
    ["a JSON string", { headers, body: '"hello"' }, 400, "invalid_body"],
    ["JSON null", { headers, body: "null" }, 400, "invalid_body"],
    ["a body of exactly 1 MB", { headers, body: jsonArrayOf(ONE_MB) }, 400, "invalid_body"],
    ["a body one byte over 1 MB", { headers, body: jsonArrayOf(OVER_1_MB) }, 413, "body_too_large"],
    ["a body over 1 MB", { headers, body: big }, 413, "body_too_large"],
    [
      "a streamed body over 1 MB without a length",
      {
        headers,
        body: new Blob([big]).stream(),
        duplex: "half",
      } as RequestInit,
      413,
      "body_too_large",
    ],
    [
      "a text/plain content-type",
      { headers: { "content-type": "text/plain" }, body: JSON.stringify(valid) },
      415,
      "unsupported_media_type",
    ],
    [
      "a form content-type",
      {
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "runnerId=x",
      },
      415,
      "unsupported_media_type",
    ],
    [
      "no content-type",
      { body: new TextEncoder().encode(JSON.stringify(valid)) },
      415,
      "unsupported_media_type",
    ],
  ];
}

Deno.test("a relay with a runner keeps pins and hidden models and refuses bad JSON bodies", async (t) => {
  await withWorld(async (w) => {
    await t.step("a pinned session is listed as pinned until it is unpinned", async () => {
      const pinnedIds = async () => {
        const { pinnedSessions } = await (await w.user.api("/api/sessions/pinned")).json();
        return pinnedSessions as { sessionId: string; isPinned: boolean }[];
      };
      const isPinned = async () =>
        (await (await w.user.api(`/api/sessions/${w.sessionId}`)).json()).session.isPinned;
      assert.deepEqual(await pinnedIds(), []);
      assert.equal(await isPinned(), false);

      for (let i = 0; i < 2; i++) {
        const put = await w.user.api(`/api/sessions/${w.sessionId}/pin`, { method: "PUT" });
        assert.equal(put.status, 200);
        assert.deepEqual(await put.json(), { ok: true, isPinned: true });
      }
      const pinned = await pinnedIds();
      assert.equal(pinned.length, 1);
      assert.equal(pinned[0]!.sessionId, w.sessionId);
      assert.equal(pinned[0]!.isPinned, true);
      assert.equal(await isPinned(), true);

      for (let i = 0; i < 2; i++) {
        const del = await w.user.api(`/api/sessions/${w.sessionId}/pin`, { method: "DELETE" });
        assert.equal(del.status, 200);
        assert.deepEqual(await del.json(), { ok: true, isPinned: false });
      }
      assert.deepEqual(await pinnedIds(), []);
      assert.equal(await isPinned(), false);
    });

    await t.step("the event log refuses a bad since or limit with 400", async () => {
      const path = `/api/sessions/${w.sessionId}/events`;
      for (
        const query of ["since=-1", "since=abc", "since=1.5", "limit=0", "limit=5001", "limit=x"]
      ) {
        assert.equal(
          await errorCode(await w.user.api(`${path}?${query}`), 400, query),
          "bad_request",
        );
      }
      const res = await w.user.api(`${path}?since=1&limit=2`);
      const body = await res.json();
      assert.equal(res.status, 200);
      assert.deepEqual(body.events.map((e: { seq: number }) => e.seq), [2, 3]);
    });

    await t.step(
      "hidden models are stored deduplicated and left out of the runner's model list",
      async () => {
        const mockModels = async () => {
          const res = await w.user.api(`/api/runners/${w.runnerId}/models`);
          const body = await res.json();
          assert.equal(res.status, 200, JSON.stringify(body));
          return body.models.filter((m: { provider: string }) => m.provider === "mock")
            .map((m: { id: string }) => m.id).sort();
        };
        assert.deepEqual(await (await w.user.api("/api/settings/hidden-models")).json(), {
          hiddenModels: [],
        });
        assert.deepEqual(await mockModels(), ["mock-1", "mock-2"]);

        const put = await w.user.api(
          "/api/settings/hidden-models",
          json("PUT", { hiddenModels: ["mock/mock-2", "other/x", "mock/mock-2"] }),
        );
        assert.equal(put.status, 200);
        assert.deepEqual(await put.json(), { ok: true, hiddenModels: ["mock/mock-2", "other/x"] });
        assert.deepEqual(await (await w.user.api("/api/settings/hidden-models")).json(), {
          hiddenModels: ["mock/mock-2", "other/x"],
        });
        assert.deepEqual(await mockModels(), ["mock-1"]);

        const clear = await w.user.api(
          "/api/settings/hidden-models",
          json("PUT", { hiddenModels: [] }),
        );
        assert.deepEqual(await clear.json(), { ok: true, hiddenModels: [] });
        assert.deepEqual(await mockModels(), ["mock-1", "mock-2"]);
      },
    );

    await t.step(
      "every JSON route answers bad bodies with a 4xx JSON error and changes nothing",
      async (t) => {
        // A non-empty setting, so that a request wiping it would show.
        const set = await w.user.api(
          "/api/settings/hidden-models",
          json("PUT", { hiddenModels: ["other/model"] }),
        );
        assert.equal(set.status, 200);
        await set.body?.cancel();

        const { runnerId, sessionId } = w;
        const routes: {
          method: string;
          path: string;
          valid: unknown;
          bad: [string, unknown, number, string][];
        }[] = [
          {
            method: "POST",
            path: "/api/keys",
            valid: { name: "ok" },
            bad: [
              ["a numeric name", { name: 5 }, 400, "invalid_body"],
              ["an empty name", { name: "  " }, 400, "invalid_body"],
              ["a name over 100 characters", { name: "k".repeat(101) }, 400, "invalid_body"],
              ["a string expiresInDays", { name: "k", expiresInDays: "30" }, 400, "invalid_body"],
              ["an unknown field", { name: "k", kind: "admin" }, 400, "invalid_body"],
            ],
          },
          {
            method: "POST",
            path: "/api/runners/spawn",
            valid: { runnerId, cwd: w.home, model: MODEL },
            bad: [
              ["no runnerId", { cwd: w.home, model: MODEL }, 400, "invalid_body"],
              ["an empty runnerId", { runnerId: "" }, 400, "invalid_body"],
              ["a numeric runnerId", { runnerId: 5 }, 400, "invalid_body"],
              ["a numeric prompt", { runnerId, prompt: 5 }, 400, "invalid_body"],
              ["a numeric cwd", { runnerId, cwd: 5 }, 400, "invalid_body"],
              ["a string model", { runnerId, model: "mock/mock-1" }, 400, "invalid_body"],
              [
                "a model without id",
                { runnerId, model: { provider: "mock" } },
                400,
                "invalid_body",
              ],
              [
                "an unknown model",
                { runnerId, cwd: w.home, model: { provider: "mock", id: "nope" } },
                400,
                "unknown_model",
              ],
              [
                "a cwd that does not exist",
                { runnerId, cwd: `${w.home}/does-not-exist`, model: MODEL },
                400,
                "cwd_not_found",
              ],
            ],
          },
          ...["restart", "stop"].map((op) => ({
            method: "POST",
            path: `/api/runners/${op}`,
            valid: { runnerId },
            bad: [
              ["no runnerId", {}, 400, "invalid_body"],
              ["a null runnerId", { runnerId: null }, 400, "invalid_body"],
              ["a numeric runnerId", { runnerId: 1 }, 400, "invalid_body"],
              ["an empty runnerId", { runnerId: "" }, 400, "invalid_body"],
            ] as [string, unknown, number, string][],
          })),
          {
            method: "PUT",
            path: "/api/settings/hidden-models",
            valid: { hiddenModels: [] },
            bad: [
              ["no hiddenModels", {}, 400, "invalid_body"],
              ["a null list", { hiddenModels: null }, 400, "invalid_body"],
              ["a string instead of a list", { hiddenModels: "mock/mock-2" }, 400, "invalid_body"],
              ["a numeric entry", { hiddenModels: [5] }, 400, "invalid_body"],
              ["an entry without provider", { hiddenModels: ["mock-2"] }, 400, "invalid_body"],
              ["an entry with a space", { hiddenModels: ["mock/mock 2"] }, 400, "invalid_body"],
            ],
          },
          {
            method: "POST",
            path: `/api/sessions/${sessionId}/input`,
            valid: { kind: "end" },
            bad: [
              ["no kind", { text: "hi" }, 400, "invalid_body"],
              ["a numeric kind", { kind: 1, text: "hi" }, 400, "invalid_body"],
              ["an unknown kind", { kind: "shout", text: "hi" }, 400, "invalid_body"],
              ["a kind in other case", { kind: "PROMPT", text: "hi" }, 400, "invalid_body"],
              ["a numeric text", { kind: "prompt", text: 42 }, 400, "invalid_body"],
            ],
          },
        ];

        for (const route of routes) {
          await t.step(`${route.method} ${route.path.replace(sessionId, "{id}")}`, async () => {
            const before = await snapshot(w);
            const cases: [string, RequestInit, number, string][] = [
              ...commonBadBodies(route.valid),
              ...route.bad.map(([what, body, status, code]) =>
                [what, json(route.method, body), status, code] as [
                  string,
                  RequestInit,
                  number,
                  string,
                ]
              ),
            ];
            for (const [what, init, status, code] of cases) {
              const res = await w.user.api(route.path, { method: route.method, ...init });
              assert.equal(await errorCode(res, status, what), code, what);
            }
            assert.deepEqual(await snapshot(w), before);
          });
        }
      },
    );
  });
});

Deno.test("health needs no sign-in and unknown routes answer a 404 JSON error", async () => {
  await using relay = await startTestRelay();
  const health = await fetch(`${relay.url}/health`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: "ok" });

  const user = await signUp(relay.url);
  assert.equal(await errorCode(await fetch(`${relay.url}/no-such-page`), 404), "not_found");
  assert.equal(await errorCode(await user.api("/api/no-such-route"), 404), "not_found");
  assert.equal(
    await errorCode(await user.api("/api/runners", json("POST", {})), 404),
    "not_found",
  );
  // Without credentials, /api answers 401 before revealing which routes exist.
  assert.equal(await errorCode(await fetch(`${relay.url}/api/no-such-route`), 401), "unauthorized");
});

Deno.test("a browser opening an address the relay does not know gets the app; API clients keep the JSON 404", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  // What Chromium and Firefox send when they navigate.
  const NAVIGATE = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
  const get = (path: string, init: RequestInit = {}, accept: string | null = NAVIGATE) =>
    fetch(`${relay.url}${path}`, {
      redirect: "manual",
      ...init,
      headers: { ...(accept === null ? {} : { accept }), ...init.headers },
    });
  const headersOf = (res: Response) => {
    const h = Object.fromEntries(res.headers);
    delete h.date;
    return h;
  };
  const root = await get("/");
  const index = await root.text();
  assert.match(index, /<div id="app"><\/div>/);
  const rootHeaders = headersOf(root);
  assert.match(rootHeaders["content-security-policy"] ?? "", /script-src 'self'/);

  await t.step("unknown paths get index.html with the very headers of /", async () => {
    const paths = ["/sessions", "/login", "/settings/keys", "/no/such/page?q=1", "/session/a/b"];
    for (const path of paths) {
      const signedOutAndIn: Record<string, string>[] = [{}, { cookie: user.cookie }];
      for (const headers of signedOutAndIn) {
        const res = await get(path, { headers });
        assert.equal(res.status, 200, path);
        assert.deepEqual(headersOf(res), rootHeaders, path);
        assert.equal(await res.text(), index, path);
      }
    }
    const head = await get("/login", { method: "HEAD" });
    const rootHead = await get("/", { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.deepEqual(headersOf(head), headersOf(rootHead));
    assert.equal(await head.text(), "");
    await rootHead.body?.cancel();
  });

  await t.step("a page asked for with a trailing slash is redirected to the page", async () => {
    const cases: [string, string][] = [
      ["/settings/", "/settings"],
      ["/automations//?tab=listeners", "/automations?tab=listeners"],
      ["/new/", "/new"],
      ["/session/3f2a/", "/session/3f2a"],
    ];
    for (const [from, to] of cases) {
      const res = await get(from);
      assert.equal(res.status, 301, from);
      assert.equal(res.headers.get("location"), to, from);
      await res.body?.cancel();
    }
  });

  await t.step("API clients, other methods and the channels keep the JSON 404", async () => {
    const notFound = async (res: Response, what: string) => {
      assert.equal(res.headers.get("content-type"), "application/json", what);
      assert.equal(await errorCode(res, 404, what), "not_found", what);
    };
    for (const accept of [null, "*/*", "application/json", "application/json, text/html"]) {
      await notFound(await get("/login", {}, accept), `Accept: ${accept}`);
    }
    await notFound(
      await get("/api/no-such-route", { headers: { "x-api-key": user.apiKey } }),
      "api",
    );
    await notFound(await get("/api", { headers: { "x-api-key": user.apiKey } }), "/api itself");
    await notFound(await get("/login", { method: "POST" }), "POST");
    await notFound(await get("/_viewer/x"), "under the viewer channel");
    await notFound(await get("/_runner/x"), "under the runner channel");
    await notFound(await get("/login", { headers: { upgrade: "websocket" } }), "an upgrade");
  });
});

/** Sends a WebSocket upgrade to the viewer path over a raw socket; returns the status line's code. */
async function viewerUpgradeStatus(
  relay: TestRelay,
  headers: Record<string, string>,
): Promise<number> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: relay.port });
  try {
    const request = [
      "GET /_viewer HTTP/1.1",
      `Host: 127.0.0.1:${relay.port}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${btoa("baton-test-key!!")}`,
      "Sec-WebSocket-Version: 13",
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
      "",
      "",
    ].join("\r\n");
    await conn.write(new TextEncoder().encode(request));
    let head = "";
    const buf = new Uint8Array(4096);
    while (!head.includes("\r\n")) {
      const n = await conn.read(buf);
      if (n === null) break;
      head += new TextDecoder().decode(buf.subarray(0, n));
    }
    const m = head.match(/^HTTP\/1\.1 (\d{3})/);
    assert.ok(m, `no status line in ${JSON.stringify(head)}`);
    return Number(m[1]);
  } finally {
    conn.close();
  }
}

Deno.test("cookie requests from a foreign Origin are refused", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const origin = new URL(relay.url).origin;
  const keyIds = async () =>
    (await (await user.api("/api/keys")).json()).keys.map((k: { id: string }) => k.id).sort();

  const foreignOrigins: [string, string][] = [
    ["another site", FOREIGN_ORIGIN],
    ["another port of the same host", `http://127.0.0.1:${relay.port === 1 ? 2 : relay.port - 1}`],
    ["an opaque (null) origin", "null"],
  ];
  for (const [label, foreign] of foreignOrigins) {
    await t.step(
      `state-changing cookie requests from ${label} answer 403 bad_origin`,
      async () => {
        const before = await keyIds();
        const created = await user.web(
          "/api/keys",
          json("POST", { name: "x" }, { origin: foreign }),
        );
        assert.equal(await errorCode(created, 403), "bad_origin");
        const hidden = await user.web(
          "/api/settings/hidden-models",
          json("PUT", { hiddenModels: ["mock/mock-1"] }, { origin: foreign }),
        );
        assert.equal(await errorCode(hidden, 403), "bad_origin");
        const deleted = await user.web(`/api/keys/${before[0]}`, {
          method: "DELETE",
          headers: { origin: foreign },
        });
        assert.equal(await errorCode(deleted, 403), "bad_origin");
        assert.deepEqual(await keyIds(), before);
        assert.deepEqual(await (await user.api("/api/settings/hidden-models")).json(), {
          hiddenModels: [],
        });
      },
    );
  }

  await t.step("the same requests from the relay's own origin succeed", async () => {
    const created = await user.web("/api/keys", json("POST", { name: "x" }, { origin }));
    const body = await created.json();
    assert.equal(created.status, 201, JSON.stringify(body));
    const hidden = await user.web(
      "/api/settings/hidden-models",
      json("PUT", { hiddenModels: ["mock/mock-1"] }, { origin }),
    );
    assert.deepEqual(await hidden.json(), { ok: true, hiddenModels: ["mock/mock-1"] });
    const deleted = await user.web(`/api/keys/${body.id}`, {
      method: "DELETE",
      headers: { origin },
    });
    assert.deepEqual(await deleted.json(), { ok: true });
  });

  await t.step("a viewer socket upgrade from a foreign Origin answers 403", async () => {
    assert.equal(
      await viewerUpgradeStatus(relay, { cookie: user.cookie, origin: FOREIGN_ORIGIN }),
      403,
    );
    assert.equal(await viewerUpgradeStatus(relay, { origin: FOREIGN_ORIGIN }), 403);
    assert.equal(await viewerUpgradeStatus(relay, { cookie: user.cookie, origin }), 101);
    await assert.rejects(
      Viewer.connect(relay.url, { cookie: user.cookie, origin: FOREIGN_ORIGIN }),
    );
    const viewer = await Viewer.connect(relay.url, { cookie: user.cookie, origin });
    await viewer.close();
  });
});

Deno.test("a huge streamed body is refused after about 1 MB, not read whole", async (t) => {
  await using relay = await startTestRelay();
  const user = await signUp(relay.url);
  const TOTAL = 64 * ONE_MB;
  const CHUNK = 64 * 1024;

  /** POSTs a 64 MB body without a length, made as the relay pulls it; counts what it pulled. */
  const post = async (path: string, headers: Record<string, string>) => {
    let pulled = 0;
    const chunk = new Uint8Array(CHUNK).fill(0x20);
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= TOTAL) return controller.close();
        pulled += CHUNK;
        controller.enqueue(chunk);
      },
    }, { highWaterMark: 0 });
    const res = await fetch(`${relay.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body,
      duplex: "half",
    } as RequestInit);
    return { res, pulled: () => pulled };
  };

  const cases: [string, string, Record<string, string>][] = [
    [
      "a missing webhook's fire URL (no credentials)",
      `/api/webhooks/${crypto.randomUUID()}/fire`,
      {},
    ],
    ["registration", "/api/register", {}],
    ["better-auth's sign-in", "/api/auth/sign-in/email", { origin: relay.baseUrl }],
    ["an authenticated JSON route", "/api/keys", { "x-api-key": user.apiKey }],
  ];
  for (const [what, path, headers] of cases) {
    await t.step(what, async () => {
      const { res, pulled } = await post(path, headers);
      assert.equal(await errorCode(res, 413, what), "body_too_large");
      // 1 MB, plus what the sockets' buffers took before the relay stopped reading.
      assert.ok(pulled() < 24 * ONE_MB, `${what}: ${pulled() / ONE_MB} MB of 64 pulled`);
    });
  }
  assert.equal((await fetch(`${relay.url}/health`)).status, 200);
  const keys = await (await user.api("/api/keys")).json();
  assert.equal(keys.keys.length, 1, "no key was created");
});
