/**
 * Attachments reaching the agent: an image goes to the model as an image,
 * any other file is written into the session's folder and named by its
 * path in the message; what is not the session's is refused before the
 * runner hears of it.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { UploadAttachmentsResponse } from "../shared/attachments_api.ts";
import type { RunnerListResponse } from "../shared/api.ts";
import { errorCode, json, signUp, type User } from "./harness/client.ts";
import { runnerToken } from "./harness/fake_runner.ts";
import { startTestRelay, withStack } from "./harness/in_process.ts";
import { MockLlm, MODEL } from "./harness/mock_llm.ts";
import { type RunnerProcess, startRunner, tempDir } from "./harness/procs.ts";

async function upload(user: User, sessionId: string, files: File[]) {
  const fd = new FormData();
  for (const f of files) fd.append("files", f);
  const res = await user.api(`/api/sessions/${sessionId}/attachments`, {
    method: "POST",
    body: fd,
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json() as UploadAttachmentsResponse).attachments;
}

/** The text and image parts of the last user message the model was sent. */
function lastUserMessage(content: unknown): { text: string; images: string[] } {
  if (typeof content === "string") return { text: content, images: [] };
  const parts = content as { type: string; text?: string; image_url?: { url: string } }[];
  return {
    text: parts.filter((p) => p.type === "text").map((p) => p.text).join("\n"),
    images: parts.filter((p) => p.type === "image_url").map((p) => p.image_url!.url),
  };
}

Deno.test("an attached image reaches the model as an image and a text file lands in the session's folder", async () => {
  await withStack({}, async ({ user, runnerId, home, llm }) => {
    const project = join(home, "project");
    await Deno.mkdir(project);
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: project, model: MODEL, prompt: "" }),
    );
    assert.equal(res.status, 200);
    const { sessionId } = await res.json();

    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3, 4]);
    const [image, notes] = await upload(user, sessionId, [
      new File([png], "screen shot.png", { type: "image/png" }),
      new File(["line 1\nline 2\n"], "notes.txt", { type: "text/plain" }),
    ]);

    llm.enqueue({ text: "I see them" });
    const before = llm.requests.length;
    const sent = await user.api(
      `/api/sessions/${sessionId}/input`,
      json("POST", {
        kind: "prompt",
        text: "Look at these",
        attachments: [image!.attachmentId, notes!.attachmentId],
      }),
    );
    assert.equal(sent.status, 200, await sent.clone().text());
    await llm.waitForRequests(before + 1);
    const messages = llm.requests.at(-1)!.messages.filter((m) => m.role === "user");
    const { text, images } = lastUserMessage(messages.at(-1)!.content);

    assert.deepEqual(images, [`data:image/png;base64,${btoa(String.fromCharCode(...png))}`]);
    const path = join(".baton", "attachments", notes!.attachmentId, "notes.txt");
    assert.match(text, /^Look at these/);
    assert.ok(text.includes(path), text);
    assert.ok(text.includes("screen shot.png"), text);
    assert.equal(await Deno.readTextFile(join(project, path)), "line 1\nline 2\n");
    assert.equal(
      await Deno.readTextFile(join(project, ".baton", "attachments", ".gitignore")),
      "*\n",
      "git ignores the uploaded files",
    );

    // Only this session's attachments, only with a message, and unknown ids alike.
    for (
      const [body, status, code] of [
        [{ kind: "prompt", text: "x", attachments: [crypto.randomUUID()] }, 404, "not_found"],
        [{ kind: "abort", attachments: [image!.attachmentId] }, 400, "bad_request"],
        [{ kind: "prompt", attachments: Array(11).fill(image!.attachmentId) }, 400, "invalid_body"],
      ] as const
    ) {
      const r = await user.api(`/api/sessions/${sessionId}/input`, json("POST", body));
      assert.equal(await errorCode(r, status), code);
    }
    const other = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: project, model: MODEL, prompt: "" }),
    );
    const { sessionId: otherId } = await other.json();
    const cross = await user.api(
      `/api/sessions/${otherId}/input`,
      json("POST", { kind: "prompt", text: "x", attachments: [image!.attachmentId] }),
    );
    assert.equal(await errorCode(cross, 404), "not_found", "another session's attachment");

    // A new session on the same runner may start with them: its first prompt carries them.
    const second = join(home, "second");
    await Deno.mkdir(second);
    llm.enqueue({ text: "Starting with the files" });
    const count = llm.requests.length;
    const spawned = await user.api(
      "/api/runners/spawn",
      json("POST", {
        runnerId,
        cwd: second,
        model: MODEL,
        prompt: "Carry on from here",
        attachments: [image!.attachmentId, notes!.attachmentId],
      }),
    );
    assert.equal(spawned.status, 200, await spawned.clone().text());
    await llm.waitForRequests(count + 1);
    const first = lastUserMessage(
      llm.requests.at(-1)!.messages.filter((m) => m.role === "user").at(-1)!.content,
    );
    assert.match(first.text, /^Carry on from here/);
    assert.equal(first.images.length, 1);
    assert.equal(await Deno.readTextFile(join(second, path)), "line 1\nline 2\n");
    const unknown = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: second, prompt: "x", attachments: [crypto.randomUUID()] }),
    );
    assert.equal(await errorCode(unknown, 404), "not_found", "an unknown attachment");
  });
});

Deno.test("a .baton folder the agent made a symlink to elsewhere gets no attachment", async () => {
  await withStack({}, async ({ user, runnerId, home }) => {
    const project = join(home, "trap");
    const outside = join(home, "outside");
    await Deno.mkdir(project);
    await Deno.mkdir(outside);
    await Deno.symlink(outside, join(project, ".baton"));
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId, cwd: project, model: MODEL, prompt: "" }),
    );
    const { sessionId } = await res.json();
    const [notes] = await upload(user, sessionId, [new File(["x"], "notes.txt")]);
    const sent = await user.api(
      `/api/sessions/${sessionId}/input`,
      json("POST", { kind: "prompt", text: "Read it", attachments: [notes!.attachmentId] }),
    );
    assert.equal(await errorCode(sent, 502), "attachment_failed");
    assert.deepEqual(await Array.fromAsync(Deno.readDir(outside)), [], "nothing written outside");
  });
});

Deno.test("a runner on a runner token (as baton setup and baton up make) fetches its session's attachments", async () => {
  const llm = MockLlm.start();
  const relay = await startTestRelay();
  const home = await tempDir("baton-home-");
  let runner: RunnerProcess | undefined;
  let ok = false;
  try {
    const user = await signUp(relay.url);
    await llm.writeModelsJson(home);
    runner = await startRunner({ relayUrl: relay.url, apiKey: await runnerToken(user), home });
    const [r]: RunnerListResponse = await (await user.api("/api/runners")).json();
    const res = await user.api(
      "/api/runners/spawn",
      json("POST", { runnerId: r!.id, cwd: home, model: MODEL, prompt: "" }),
    );
    const { sessionId } = await res.json();
    const [notes] = await upload(user, sessionId, [new File(["from a token"], "t.txt")]);
    llm.enqueue({ text: "ok" });
    const sent = await user.api(
      `/api/sessions/${sessionId}/input`,
      json("POST", { kind: "prompt", text: "Read it", attachments: [notes!.attachmentId] }),
    );
    assert.equal(sent.status, 200, await sent.clone().text());
    const path = join(home, ".baton", "attachments", notes!.attachmentId, "t.txt");
    assert.equal(await Deno.readTextFile(path), "from a token");
    ok = true;
  } finally {
    if (runner && !ok) console.error(runner.proc.output());
    await runner?.stop();
    await relay[Symbol.asyncDispose]();
    await llm.close();
    await Deno.remove(home, { recursive: true }).catch(() => {});
  }
});
