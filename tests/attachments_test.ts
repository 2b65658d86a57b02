/**
 * Attachments over HTTP: upload into a session, download with its headers,
 * the caps (nothing stored past them), expiry and the sweep, who may read
 * what, and a relay whose memory stays flat while a huge upload streams in.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import type { UploadAttachmentsResponse } from "../shared/attachments_api.ts";
import { errorCode, signUp, type User } from "./harness/client.ts";
import { FakeRunner, runnerToken, spawnSession } from "./harness/fake_runner.ts";
import { startTestRelay, type TestRelay } from "./harness/in_process.ts";
import { baseEnv, baton, RelayProcess, tempDir } from "./harness/procs.ts";
import { rawRequest } from "./harness/raw_http.ts";
import { eventually } from "./harness/wait.ts";

const KiB = 1024;
const MiB = 1024 * KiB;

/** A small policy so the caps are cheap to reach. */
const POLICY = { maxFileBytes: 256 * KiB, maxFiles: 3, ttlMs: 86_400_000, userMaxBytes: 2 * MiB };

interface World {
  relay: TestRelay;
  alice: User;
  bob: User;
  fake: FakeRunner;
  /** Alice's runner token, bound to `fake` by its hello. */
  token: string;
  sessionId: string;
}

async function withWorld(fn: (w: World) => Promise<void>) {
  const relay = await startTestRelay({ allowSignup: true, attachments: POLICY });
  let fake: FakeRunner | undefined;
  try {
    const alice = await signUp(relay.url);
    const bob = await signUp(relay.url);
    const token = await runnerToken(alice);
    fake = await FakeRunner.connect(relay.url, { apiKey: token });
    const sessionId = await spawnSession(alice, fake.runnerId);
    await fn({ relay, alice, bob, fake, token, sessionId });
  } finally {
    await fake?.close();
    await relay[Symbol.asyncDispose]();
  }
}

type FileSpec = { name: string; type?: string; bytes: Uint8Array | string; field?: string };

function form(files: FileSpec[]): FormData {
  const fd = new FormData();
  for (const f of files) {
    const bytes = typeof f.bytes === "string" ? new TextEncoder().encode(f.bytes) : f.bytes;
    fd.append(
      f.field ?? "file",
      new File([bytes as Uint8Array<ArrayBuffer>], f.name, { type: f.type ?? "" }),
    );
  }
  return fd;
}

function upload(user: User, sessionId: string, files: FileSpec[], via: "api" | "web" = "api") {
  return user[via](`/api/sessions/${sessionId}/attachments`, {
    method: "POST",
    body: form(files),
  });
}

async function uploadOk(user: User, sessionId: string, files: FileSpec[]) {
  const res = await upload(user, sessionId, files);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json() as UploadAttachmentsResponse).attachments;
}

/** The files under the relay's attachment folder (blobs and temporary files). */
async function storedFiles(dataDir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string, prefix: string) => {
    for await (const e of Deno.readDir(dir)) {
      if (e.isDirectory) await walk(join(dir, e.name), `${prefix}${e.name}/`);
      else out.push(`${prefix}${e.name}`);
    }
  };
  await walk(join(dataDir, "attachments"), "");
  return out.sort();
}

const sha256 = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

Deno.test("an uploaded file comes back with its bytes and headers, stored once by its sha-256", async () => {
  await withWorld(async ({ relay, alice, sessionId }) => {
    const bytes = new Uint8Array(100 * KiB);
    for (let i = 0; i < bytes.length; i += 64 * KiB) {
      crypto.getRandomValues(bytes.subarray(i, i + 64 * KiB));
    }
    const name = "résumé «final» 2.png";
    const [a, ...rest] = await uploadOk(alice, sessionId, [{ name, type: "image/png", bytes }]);
    assert.equal(rest.length, 0);
    assert.ok(a);
    assert.equal(a.filename, name);
    assert.equal(a.mimeType, "image/png");
    assert.equal(a.size, bytes.length);
    const ttl = Date.parse(a.expiresAt) - Date.now();
    assert.ok(ttl > 86_000_000 && ttl <= 86_400_000, `expires in ${ttl} ms`);

    for (
      const [via, get] of [
        ["cookie", () => alice.web(`/api/attachments/${a.attachmentId}`)],
        ["x-api-key", () => alice.api(`/api/attachments/${a.attachmentId}`)],
        [
          "?apiKey=",
          () => fetch(`${relay.url}/api/attachments/${a.attachmentId}?apiKey=${alice.apiKey}`),
        ],
      ] as const
    ) {
      const res = await get();
      assert.equal(res.status, 200, via);
      assert.deepEqual(new Uint8Array(await res.arrayBuffer()), bytes, via);
      assert.equal(res.headers.get("content-type"), "image/png");
      assert.equal(res.headers.get("content-length"), String(bytes.length));
      assert.equal(
        res.headers.get("content-disposition"),
        `inline; filename="r_sum_ _final_ 2.png"; ` +
          `filename*=UTF-8''r%C3%A9sum%C3%A9%20%C2%ABfinal%C2%BB%202.png`,
      );
      assert.equal(res.headers.get("x-attachment-id"), a.attachmentId);
      assert.equal(res.headers.get("x-attachment-filename"), encodeURIComponent(name));
      assert.equal(res.headers.get("x-content-type-options"), "nosniff");
      assert.match(res.headers.get("content-security-policy") ?? "", /^sandbox;/);
    }

    // HEAD: the headers alone.
    const head = await alice.api(`/api/attachments/${a.attachmentId}`, { method: "HEAD" });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get("content-length"), String(bytes.length));
    assert.equal(head.headers.get("x-attachment-id"), a.attachmentId);
    // ... and leaves no file open (the relay runs in this process).
    const fds = async () => (await Array.fromAsync(Deno.readDir("/proc/self/fd"))).length;
    const open = await fds();
    for (let i = 0; i < 50; i++) {
      await (await alice.api(`/api/attachments/${a.attachmentId}`, { method: "HEAD" })).body
        ?.cancel();
    }
    assert.ok(await fds() < open + 10, `${(await fds()) - open} more files open after 50 HEADs`);

    // The bytes are a file named by their hash, readable by the relay's user only.
    const files = await storedFiles(relay.dataDir);
    assert.deepEqual(files, [sha256(bytes)]);
    const mode = (await Deno.stat(join(relay.dataDir, "attachments", sha256(bytes)))).mode!;
    assert.equal(mode & 0o777, 0o600);

    // The same bytes again (under another name): a second attachment, one file.
    const [b] = await uploadOk(alice, sessionId, [{ name: "copy.png", bytes }]);
    assert.notEqual(b!.attachmentId, a.attachmentId);
    assert.equal(b!.mimeType, "image/png", "the type is guessed from the name when not sent");
    assert.deepEqual(await storedFiles(relay.dataDir), [sha256(bytes)]);

    // Several files at once, in `files`; a path in a name keeps only its last segment.
    const many = await uploadOk(alice, sessionId, [
      { name: "../../etc/passwd", type: "text/plain", bytes: "one", field: "files" },
      { name: "two.bin", type: "application/x-thing; charset=x", bytes: "two", field: "files" },
    ]);
    assert.deepEqual(many.map((m) => [m.filename, m.mimeType, m.size]), [
      ["passwd", "text/plain", 3],
      ["two.bin", "application/x-thing", 3],
    ]);
  });
});

Deno.test("uploads past a cap answer 413 and store nothing", async (t) => {
  await withWorld(async ({ relay, alice, sessionId }) => {
    const before = await storedFiles(relay.dataDir);

    await t.step("a file of exactly the cap is taken", async () => {
      const [a] = await uploadOk(alice, sessionId, [{
        name: "at.bin",
        bytes: new Uint8Array(POLICY.maxFileBytes).fill(7),
      }]);
      assert.equal(a!.size, POLICY.maxFileBytes);
    });
    const kept = await storedFiles(relay.dataDir);
    assert.equal(kept.length, before.length + 1);

    await t.step("one byte over: 413 file_too_large, nothing of the upload kept", async () => {
      const res = await upload(alice, sessionId, [
        { name: "small.txt", bytes: "fine" },
        { name: "over.bin", bytes: new Uint8Array(POLICY.maxFileBytes + 1).fill(8) },
      ]);
      assert.equal(await errorCode(res, 413), "file_too_large");
      assert.deepEqual(await storedFiles(relay.dataDir), kept);
    });

    await t.step("more files than allowed: 413", async () => {
      const res = await upload(
        alice,
        sessionId,
        Array.from({ length: POLICY.maxFiles + 1 }, (_, i) => ({ name: `${i}.txt`, bytes: "x" })),
      );
      assert.equal(await errorCode(res, 413), "file_too_large");
      assert.deepEqual(await storedFiles(relay.dataDir), kept);
    });

    await t.step(
      "a declared length over the request cap: 413 before anything is read",
      async () => {
        // fetch sends the length of the body it has: a raw request declares one it never sends.
        const res = await rawRequest(relay.port, {
          method: "POST",
          target: `/api/sessions/${sessionId}/attachments`,
          headers: {
            "x-api-key": alice.apiKey,
            "content-type": "multipart/form-data; boundary=x",
            "content-length": String(POLICY.maxFiles * POLICY.maxFileBytes + 2 * MiB),
          },
        });
        assert.equal(res.status, 413, res.text);
        assert.equal(JSON.parse(res.text).error.code, "body_too_large");
        assert.deepEqual(await storedFiles(relay.dataDir), kept);
      },
    );

    await t.step("the user's quota: 413 quota_exceeded", async () => {
      // 2 MiB quota, 256 KiB held: seven more files of 256 KiB fit, the eighth does not,
      // even when all eight are sent side by side (each began with the same room).
      const results = await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          const res = await upload(alice, sessionId, [{
            name: `${i}.bin`,
            bytes: new Uint8Array(POLICY.maxFileBytes).fill(i + 10),
          }]);
          if (res.status === 413) return await errorCode(res, 413);
          await res.body?.cancel();
          return res.status;
        }),
      );
      assert.deepEqual(results.filter((r) => r === 200).length, 7, JSON.stringify(results));
      assert.deepEqual(results.filter((r) => r === "quota_exceeded").length, 1);
      const full = await storedFiles(relay.dataDir);
      assert.equal(full.length, kept.length + 7);
      const res = await upload(alice, sessionId, [{ name: "more.bin", bytes: "x".repeat(10) }]);
      assert.equal(await errorCode(res, 413), "quota_exceeded");
      assert.deepEqual(await storedFiles(relay.dataDir), full);
    });

    await t.step("bad requests: 415, 400, and nothing stored", async () => {
      const full = await storedFiles(relay.dataDir);
      const url = `/api/sessions/${sessionId}/attachments`;
      let res = await alice.api(url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(await errorCode(res, 415), "unsupported_media_type");
      const fields = new FormData();
      fields.append("note", "no file here");
      res = await alice.api(url, { method: "POST", body: fields });
      assert.equal(await errorCode(res, 400), "no_files");
      res = await alice.api(url, {
        method: "POST",
        headers: { "content-type": "multipart/form-data; boundary=abc" },
        body: '--abc\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\ncut',
      });
      assert.equal(await errorCode(res, 400), "bad_multipart");
      assert.deepEqual(await storedFiles(relay.dataDir), full);
    });
  });
});

Deno.test("another user's attachment is a 404 like an unknown one, and ?apiKey= works on this route only", async () => {
  await withWorld(async ({ relay, alice, bob, token, sessionId }) => {
    const [a] = await uploadOk(alice, sessionId, [{ name: "secret.txt", bytes: "alice only" }]);
    // The runner of the session reads it with its token (that is how it fetches it);
    // another runner of alice's, bound to itself, does not.
    const byRunner = await fetch(`${relay.url}/api/attachments/${a!.attachmentId}`, {
      headers: { "x-api-key": token },
    });
    assert.equal(await byRunner.text(), "alice only");
    const otherToken = await runnerToken(alice);
    const other = await FakeRunner.connect(relay.url, { apiKey: otherToken });
    try {
      const byOther = await fetch(`${relay.url}/api/attachments/${a!.attachmentId}`, {
        headers: { "x-api-key": otherToken },
      });
      assert.equal(await errorCode(byOther, 404), "not_found");
    } finally {
      await other.close();
    }

    const id = a!.attachmentId;
    const unknown = crypto.randomUUID();
    for (const path of [`/api/attachments/${id}`, `/api/attachments/${unknown}`]) {
      assert.equal(await errorCode(await bob.api(path), 404), "not_found");
      assert.equal(await errorCode(await bob.web(path), 404), "not_found");
      const q = await fetch(`${relay.url}${path}?apiKey=${bob.apiKey}`);
      assert.equal(await errorCode(q, 404), "not_found");
    }
    // Nor can bob upload into alice's session.
    const res = await upload(bob, sessionId, [{ name: "x.txt", bytes: "x" }]);
    assert.equal(await errorCode(res, 404), "not_found");

    // Without credentials, or with a wrong key: 401.
    assert.equal(
      await errorCode(await fetch(`${relay.url}/api/attachments/${id}`), 401),
      "unauthorized",
    );
    const wrong = await fetch(`${relay.url}/api/attachments/${id}?apiKey=bk_nope`);
    assert.equal(await errorCode(wrong, 401), "unauthorized");

    // The key in the address is read by no other route.
    for (const path of ["/api/sessions", `/api/sessions/${sessionId}`, "/api/runners"]) {
      const other = await fetch(`${relay.url}${path}?apiKey=${alice.apiKey}`);
      assert.equal(await errorCode(other, 401), "unauthorized", path);
    }
  });
});

Deno.test("a deleted session's attachments answer 404 at once and their files go at the next sweep", async () => {
  await withWorld(async ({ relay, alice, sessionId }) => {
    const [a] = await uploadOk(alice, sessionId, [{ name: "gone.txt", bytes: "soon gone" }]);
    assert.equal((await storedFiles(relay.dataDir)).length, 1);
    const del = await alice.api(`/api/sessions/${sessionId}`, { method: "DELETE" });
    assert.equal(del.status, 200);
    await del.body?.cancel();
    const res = await alice.api(`/api/attachments/${a!.attachmentId}`);
    assert.equal(await errorCode(res, 404), "not_found");
    const swept = await relay.relay.attachments.sweep();
    assert.deepEqual(swept, { rows: 0, blobs: 1 });
    assert.deepEqual(await storedFiles(relay.dataDir), []);
  });
});

/** A relay subprocess (its RSS can be watched), its user, a fake runner and a session. */
async function withRelayProcess(
  env: Record<string, string>,
  fn: (r: RelayProcess, user: User, sessionId: string) => Promise<void>,
) {
  const relay = await RelayProcess.start({ env });
  let fake: FakeRunner | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    fake = await FakeRunner.connect(relay.url, { apiKey: await runnerToken(user) });
    const sessionId = await spawnSession(user, fake.runnerId);
    await fn(relay, user, sessionId);
    ok = true;
  } finally {
    await fake?.close();
    if (!ok) console.error(relay.proc.output());
    await relay.stop();
    await Deno.remove(relay.home, { recursive: true }).catch(() => {});
  }
}

Deno.test("an attachment expires after BATON_ATTACHMENT_TTL: 404, and its file is swept", async () => {
  await withRelayProcess({ BATON_ATTACHMENT_TTL: "2s" }, async (relay, user, sessionId) => {
    const [a] = await uploadOk(user, sessionId, [{ name: "brief.txt", bytes: "short-lived" }]);
    const ttl = Date.parse(a!.expiresAt) - Date.now();
    assert.ok(ttl > 0 && ttl <= 2000, `expires in ${ttl} ms`);
    const first = await user.api(`/api/attachments/${a!.attachmentId}`);
    assert.equal(await first.text(), "short-lived");
    await eventually("the attachment to expire", async () => {
      const res = await user.api(`/api/attachments/${a!.attachmentId}`);
      await res.body?.cancel();
      return res.status === 404 ? true : undefined;
    }, 10_000);
    await eventually(
      "the sweep to delete the file",
      async () => (await storedFiles(relay.dataDir)).length === 0 ? true : undefined,
      10_000,
    );
  });
});

function rssOf(pid: number): number {
  const m = Deno.readTextFileSync(`/proc/${pid}/status`).match(/^VmRSS:\s+(\d+)\s+kB/m);
  if (!m) throw new Error(`No VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** A multipart body of one file of `size` bytes, produced as it is read. */
function streamedUpload(size: number, boundary: string): ReadableStream<Uint8Array> {
  const head = new TextEncoder().encode(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n` +
      "Content-Type: application/octet-stream\r\n\r\n",
  );
  const tail = new TextEncoder().encode(`\r\n--${boundary}--\r\n`);
  const chunk = new Uint8Array(256 * KiB).fill(120);
  let sent = 0;
  let stage = 0;
  return new ReadableStream({
    pull(controller) {
      if (stage === 0) {
        controller.enqueue(head);
        stage = 1;
      } else if (sent < size) {
        const n = Math.min(chunk.length, size - sent);
        controller.enqueue(chunk.slice(0, n));
        sent += n;
      } else {
        controller.enqueue(tail);
        controller.close();
      }
    },
  });
}

Deno.test("the relay's memory stays flat while a huge upload streams in, taken or refused", async () => {
  await withRelayProcess({
    BATON_ATTACHMENT_MAX_BYTES: String(400 * MiB),
    BATON_ATTACHMENT_MAX_FILES: "1",
  }, async (relay, user, sessionId) => {
    const pid = relay.proc.pid;
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => peak = Math.max(peak, rssOf(pid)), 20);
    const boundary = "bound" + crypto.randomUUID();
    const send = (size: number) =>
      user.api(`/api/sessions/${sessionId}/attachments`, {
        method: "POST",
        headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
        body: streamedUpload(size, boundary),
      });
    try {
      // 400 MB taken, streamed to disk as it arrives.
      const taken = await send(400 * MiB);
      assert.equal(taken.status, 200, await taken.clone().text());
      const [a] = (await taken.json() as UploadAttachmentsResponse).attachments;
      assert.equal(a!.size, 400 * MiB);
      // 1 GB sent without a length: refused once it passes the cap, without holding it.
      const refused = await send(1024 * MiB).catch((err) => err as Error);
      if (refused instanceof Response) {
        assert.equal(await errorCode(refused, 413), "file_too_large");
      }
    } finally {
      clearInterval(sampler);
    }
    console.log(
      `relay RSS idle ${(idle / MiB).toFixed(0)} MB, peak ${(peak / MiB).toFixed(0)} MB`,
    );
    // What grows is garbage the collector has not taken yet (81 MB here after 400 MB taken
    // and 400 MB refused; 75 MB after 150 MB alone): a body held whole would add its 400 MB.
    assert.ok(peak - idle < 150 * MiB, `relay RSS grew by ${((peak - idle) / MiB).toFixed(0)} MB`);
    assert.equal((await storedFiles(relay.dataDir)).filter((f) => !f.startsWith("tmp")).length, 1);
  });
});

Deno.test("baton relay refuses a bad BATON_ATTACHMENT_* value with exit code 2 and one line", async () => {
  const home = await tempDir();
  try {
    const relay = ["relay", "--port", "0", "--data-dir", join(home, "data")];
    for (
      const [env, re] of [
        [{ BATON_ATTACHMENT_TTL: "7" }, /Invalid BATON_ATTACHMENT_TTL: '7'/],
        [{ BATON_ATTACHMENT_TTL: "0s" }, /Invalid BATON_ATTACHMENT_TTL: '0s'/],
        [{ BATON_ATTACHMENT_MAX_BYTES: "10MB" }, /Invalid BATON_ATTACHMENT_MAX_BYTES: '10MB'/],
        [{ BATON_ATTACHMENT_MAX_FILES: "0" }, /Invalid BATON_ATTACHMENT_MAX_FILES: '0'/],
        [{ BATON_ATTACHMENT_USER_MAX_MB: "-1" }, /Invalid BATON_ATTACHMENT_USER_MAX_MB: '-1'/],
      ] as const
    ) {
      const out = await baton(relay, baseEnv(home, env));
      assert.equal(out.code, 2, out.stderr);
      assert.match(out.stderr, re);
      assert.equal(out.stderr.trim().split("\n").length, 1, out.stderr);
    }
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});
