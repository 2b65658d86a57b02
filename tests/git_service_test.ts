/**
 * The git service end to end: a viewer's `service_message` goes through the
 * real relay to a real runner, which runs the real `git` in a repository
 * made here; and review comments reach the model as one message.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { formatReview, type GitStatus, type ReviewComment } from "../shared/git_api.ts";
import type { RelayToViewer } from "../shared/protocol.ts";
import { json, signUp, type User, Viewer } from "./harness/client.ts";
import { git, makeRepo } from "./harness/git_repo.ts";
import { type Stack, withStack } from "./harness/in_process.ts";

type Reply = Extract<RelayToViewer, { t: "service_message" }> & {
  op?: string;
  ok?: boolean;
  data?: unknown;
  code?: string;
  message?: string;
};

const sh = git;

async function spawnIn(s: Stack, cwd: string, user: User = s.user): Promise<string> {
  s.llm.enqueue({ text: "Ready." });
  const res = await user.api(
    "/api/runners/spawn",
    json("POST", { runnerId: s.runnerId, prompt: "Wait for review", cwd }),
  );
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  return body.sessionId;
}

/** A viewer with a helper that sends a git request and waits for its final reply. */
class GitClient {
  #n = 0;
  readonly #prefix = crypto.randomUUID().slice(0, 8);
  constructor(readonly v: Viewer, readonly sessionId: string) {}

  async ask(op: string, data: Record<string, unknown> = {}, serviceId = "git"): Promise<Reply> {
    const requestId = `${this.#prefix}${++this.#n}`;
    this.v.send({
      t: "service_message",
      serviceId,
      requestId,
      sessionId: this.sessionId,
      op,
      data,
    });
    return await this.v.waitFor<Reply>(
      (m) => m.t === "service_message" && m.requestId === requestId && "ok" in m,
      60_000,
    );
  }

  async ok<T>(op: string, data: Record<string, unknown> = {}): Promise<T> {
    const r = await this.ask(op, data);
    assert.equal(r.ok, true, `${op} failed: ${r.code}: ${r.message}`);
    return r.data as T;
  }

  async fails(op: string, data: Record<string, unknown>, code: string): Promise<Reply> {
    const r = await this.ask(op, data);
    assert.equal(r.ok, false, `${op} should have failed with ${code}`);
    assert.equal(r.code, code, r.message ?? "");
    return r;
  }
}

Deno.test("git over service_message: status with a rename, diff, stage, commit, push, checkout, discard", async () => {
  await withStack({}, async (s) => {
    const { repo, remote } = await makeRepo(s.home);
    const sessionId = await spawnIn(s, repo);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    const g = new GitClient(v, sessionId);
    try {
      // A change, a rename and a new file.
      await Deno.writeTextFile(join(repo, "a.txt"), "one\ntwo changed\nthree\nfour\n");
      await sh(repo, "mv", "b.txt", "c.txt");
      await Deno.writeTextFile(join(repo, "new.ts"), "export const x = 1;\n");
      const st = await g.ok<GitStatus>("status");
      assert.equal(st.branch, "main");
      assert.equal(st.root, repo);
      assert.deepEqual(st.staged.map((f) => [f.status, f.path, f.origPath]), [
        ["R", "c.txt", "b.txt"],
      ]);
      const a = st.unstaged.find((f) => f.path === "a.txt");
      assert.deepEqual([a?.status, a?.additions, a?.deletions], ["M", 2, 1]);
      assert.deepEqual(st.untracked.map((f) => [f.path, f.additions]), [["new.ts", 1]]);

      const d = await g.ok<{ diff: string; truncated: boolean }>("diff", { path: "a.txt" });
      assert.match(d.diff, /^-two$/m);
      assert.match(d.diff, /^\+two changed$/m);
      assert.equal(d.truncated, false);
      const small = await g.ok<{ diff: string; truncated: boolean }>("diff", {
        path: "a.txt",
        maxBytes: 40,
      });
      assert.equal(small.truncated, true);
      assert.ok(small.diff.length <= 40);
      const renamed = await g.ok<{ diff: string }>("diff", {
        path: "c.txt",
        origPath: "b.txt",
        staged: true,
      });
      assert.match(renamed.diff, /rename from b\.txt/);
      const added = await g.ok<{ diff: string }>("diff", { path: "new.ts" });
      assert.match(added.diff, /^\+export const x = 1;$/m);

      // Stage and unstage one file.
      let after = await g.ok<GitStatus>("stage", { paths: ["a.txt", "new.ts"] });
      assert.deepEqual(after.staged.map((f) => f.path).sort(), ["a.txt", "c.txt", "new.ts"]);
      after = await g.ok<GitStatus>("unstage", { paths: ["new.ts"] });
      assert.deepEqual(after.untracked.map((f) => f.path), ["new.ts"]);

      // Commit what is staged.
      const c = await g.ok<{ commit: { subject: string; oid: string } }>("commit", {
        message: "Rename b to c\n\nAnd change a.",
      });
      assert.equal(c.commit.subject, "Rename b to c");
      assert.equal((await sh(repo, "log", "-1", "--format=%s")).trim(), "Rename b to c");
      const log = await g.ok<{ commits: { subject: string }[] }>("log", { limit: 5 });
      assert.deepEqual(log.commits.map((x) => x.subject), ["Rename b to c", "First"]);
      await g.fails("commit", { message: "  " }, "bad_request");

      // Push to the bare repository on disk (no upstream yet: origin, set upstream).
      const pushed = await g.ok<{ status: GitStatus; output: string }>("push");
      assert.equal(pushed.status.upstream, "origin/main");
      assert.match(pushed.output, /-> main/);
      // git's output streamed back before the answer, to this request.
      const reply = v.messages.findIndex((m) =>
        m.t === "service_message" && "ok" in m &&
        ((m as Reply).data as { output?: string } | undefined)?.output !== undefined
      );
      const pushId = (v.messages[reply] as Reply).requestId;
      const streamed = v.messages.filter((m, i) =>
        i < reply && m.t === "service_message" && m.requestId === pushId &&
        (m as Reply).op === "progress"
      );
      assert.ok(streamed.length > 0, "no progress came before the push's answer");
      assert.match(JSON.stringify(streamed), /objects/);
      assert.equal(pushed.status.ahead, 0);
      assert.equal(
        (await sh(remote, "log", "-1", "--format=%H", "main")).trim(),
        c.commit.oid,
      );

      // A conflict-free checkout keeps the untracked file; back again.
      const co = await g.ok<GitStatus>("checkout", { branch: "feature", create: true });
      assert.equal(co.branch, "feature");
      const br = await g.ok<{ current: string; branches: { name: string; remote: boolean }[] }>(
        "branches",
      );
      assert.equal(br.current, "feature");
      assert.deepEqual(
        br.branches.map((b) => `${b.remote ? "r:" : ""}${b.name}`).sort(),
        ["feature", "main", "r:origin/main"],
      );
      assert.equal((await g.ok<GitStatus>("checkout", { branch: "main" })).branch, "main");
      assert.equal(await Deno.readTextFile(join(repo, "new.ts")), "export const x = 1;\n");

      // Discard is refused without confirm, and changes nothing.
      await Deno.writeTextFile(join(repo, "a.txt"), "scratch\n");
      await g.fails("discard", { paths: ["a.txt", "new.ts"] }, "confirm_required");
      assert.equal(await Deno.readTextFile(join(repo, "a.txt")), "scratch\n");
      const clean = await g.ok<GitStatus>("discard", { paths: ["a.txt", "new.ts"], confirm: true });
      assert.deepEqual([clean.unstaged, clean.untracked], [[], []]);
      assert.equal(await Deno.readTextFile(join(repo, "a.txt")), "one\ntwo changed\nthree\nfour\n");
      await assert.rejects(Deno.stat(join(repo, "new.ts")), Deno.errors.NotFound);
    } finally {
      await v.close();
    }
  });
});

Deno.test("git refuses paths out of the repository, option-like names, unknown services and other users' sessions", async () => {
  await withStack({ relay: { allowSignup: true } }, async (s) => {
    const { repo } = await makeRepo(s.home);
    const outside = join(s.home, "outside");
    await Deno.mkdir(outside);
    await Deno.writeTextFile(join(outside, "secret.txt"), "secret\n");
    await Deno.symlink(outside, join(repo, "link"));
    const sessionId = await spawnIn(s, repo);
    const plain = join(s.home, "plain");
    await Deno.mkdir(plain);
    const plainSession = await spawnIn(s, plain);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    const g = new GitClient(v, sessionId);
    try {
      for (
        const path of ["../outside/secret.txt", "a/../../outside/secret.txt", "link/secret.txt"]
      ) {
        const r = await g.fails("diff", { path }, "path_outside_repo");
        assert.doesNotMatch(JSON.stringify(r), /secret\\n/);
      }
      await g.fails("diff", { path: join(outside, "secret.txt") }, "bad_request");
      await g.fails("diff", { path: ".git/config" }, "path_outside_repo");
      await g.fails("stage", { paths: ["a.txt", "../outside/secret.txt"] }, "path_outside_repo");
      await g.fails("diff", { path: "a\u0000b" }, "bad_request");
      // An option as a path is only a (missing) file name: nothing is staged.
      await g.fails("stage", { paths: ["--all"] }, "git_failed");
      await Deno.writeTextFile(join(repo, "a.txt"), "changed\n");
      assert.deepEqual((await g.ok<GitStatus>("status")).staged, []);
      for (const branch of ["-b", "--orphan=x", "--detach", "a..b", ""]) {
        const r = await g.ask("checkout", { branch });
        assert.equal(r.ok, false, `checkout ${branch} was accepted`);
      }
      assert.equal((await g.ok<GitStatus>("status")).branch, "main");
      await g.fails("push", { remote: "--receive-pack=touch /tmp/pwned" }, "bad_ref");

      await g.fails("nope", {}, "unknown_op");
      const svc = await g.ask("status", {}, "files");
      assert.deepEqual([svc.ok, svc.code], [false, "unknown_service"]);
      // A folder that is not a repository.
      const np = await new GitClient(v, plainSession).fails("status", {}, "not_a_repository");
      assert.match(np.message ?? "", /Not a git repository/);

      // Another user's session answers as a missing one.
      const other = await signUp(s.relay.url);
      const ov = await Viewer.connect(s.relay.url, { apiKey: other.apiKey });
      try {
        const foreign = await new GitClient(ov, sessionId).ask("status");
        const missing = await new GitClient(ov, "no-such-session").ask("status");
        assert.deepEqual([foreign.ok, foreign.code, foreign.message], [
          false,
          missing.code,
          missing.message,
        ]);
        assert.equal(foreign.code, "not_found");
        // Nothing of the reply reached the owner's viewer either.
        assert.ok(
          !v.messages.some((m) =>
            m.t === "service_message" && m.requestId === "q1" &&
            m.sessionId === "no-such-session"
          ),
        );
      } finally {
        await ov.close();
      }

      // Too many requests in flight from one viewer.
      for (let i = 0; i < 30; i++) {
        v.send({
          t: "service_message",
          serviceId: "git",
          requestId: `burst${i}`,
          sessionId,
          op: "status",
        });
      }
      await v.until(
        () =>
          v.messages.filter((m) =>
            m.t === "service_message" && m.requestId?.startsWith("burst") && "ok" in m
          ).length === 30,
        "30 answers",
      );
      const refused = v.messages.filter((m) =>
        m.t === "service_message" && m.requestId?.startsWith("burst") &&
        (m as Reply).code === "too_many_requests"
      );
      assert.ok(refused.length > 0, "no request was refused");
    } finally {
      await v.close();
    }
  });
});

Deno.test("the runner pushes a fresh git status to the session's viewers when a file changes", async () => {
  await withStack({}, async (s) => {
    const { repo } = await makeRepo(s.home);
    const sessionId = await spawnIn(s, repo);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    const bystander = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      v.subscribe(sessionId);
      await v.waitFor((m) => m.t === "caught_up");
      await new GitClient(v, sessionId).ok("status");
      await Deno.writeTextFile(join(repo, "live.txt"), "hello\n");
      const pushed = await v.waitFor<Reply>(
        (m) =>
          m.t === "service_message" && (m as Reply).op === "status_changed" &&
          ((m as Reply).data as GitStatus).untracked.some((f) => f.path === "live.txt"),
        15_000,
      );
      assert.equal(pushed.sessionId, sessionId);
      assert.equal(pushed.requestId, undefined);
      // A viewer not subscribed to the session hears nothing of it.
      assert.ok(!bystander.messages.some((m) => m.t === "service_message"));
    } finally {
      await v.close();
      await bystander.close();
    }
  });
});

Deno.test("review comments reach the model as one structured message", async () => {
  await withStack({}, async (s) => {
    const { repo } = await makeRepo(s.home);
    const sessionId = await spawnIn(s, repo);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      v.subscribe(sessionId);
      await v.waitForEvent(sessionId, "agent_end");
      const comments: ReviewComment[] = [
        {
          path: "a.txt",
          side: "new",
          startLine: 2,
          endLine: 3,
          excerpt: "two\nthree",
          body: "Explain this",
        },
        { path: "src/b.ts", side: "old", startLine: 7, endLine: 7, body: "Why remove it?" },
      ];
      const text = formatReview(comments);
      const before = s.llm.requests.length;
      s.llm.enqueue({ text: "Addressed." });
      v.send({ t: "input", id: "r1", sessionId, kind: "followUp", text });
      await v.waitFor((m) => m.t === "input_ok" && m.id === "r1");
      await s.llm.waitForRequests(before + 1);
      const msgs = s.llm.requests[before]!.messages.filter((m) => m.role === "user");
      const last = msgs[msgs.length - 1]!;
      const content = typeof last.content === "string"
        ? last.content
        : (last.content as { text?: string }[]).map((p) => p.text ?? "").join("");
      assert.equal(content, text);
      assert.match(content, /## 1\. a\.txt:lines 2-3\n\n```\ntwo\nthree\n```\n\nExplain this/);
      assert.match(content, /## 2\. src\/b\.ts:line 7 \(removed\)\n\nWhy remove it\?/);
    } finally {
      await v.close();
    }
  });
});

Deno.test("a review sent while the agent works reaches its next model call as one steer message", async () => {
  await withStack({}, async (s) => {
    const { repo } = await makeRepo(s.home);
    const sessionId = await spawnIn(s, repo);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      v.subscribe(sessionId);
      await v.waitForEvent(sessionId, "agent_end");
      s.llm.enqueue(
        {
          text: "Working.",
          toolCalls: [{ name: "bash", args: { command: "sleep 2; echo done" } }],
        },
        { text: "Read the review." },
      );
      const before = s.llm.requests.length;
      v.send({ t: "input", id: "go", sessionId, kind: "followUp", text: "Do the work" });
      await v.waitForEvent(sessionId, "tool_execution_start");
      const text = formatReview([
        { path: "a.txt", side: "new", startLine: 1, endLine: 1, body: "Rename this" },
      ]);
      v.send({ t: "input", id: "steer", sessionId, kind: "steer", text });
      await v.waitFor((m) => m.t === "input_ok" && m.id === "steer");
      await s.llm.waitForRequests(before + 2);
      const users = s.llm.requests[before + 1]!.messages.filter((m) => m.role === "user");
      const texts = users.map((m) =>
        typeof m.content === "string"
          ? m.content
          : (m.content as { text?: string }[]).map((p) => p.text ?? "").join("")
      );
      assert.equal(texts.filter((t) => t.includes("# Code review")).length, 1);
      assert.equal(texts[texts.length - 1], text);
    } finally {
      await v.close();
    }
  });
});

Deno.test("a sleeping session's repository is no longer watched, git still answers for it without waking it, and waking watches it again", async () => {
  await withStack({ runnerEnv: { BATON_SLEEP_AFTER: "4s" } }, async (s) => {
    const { repo } = await makeRepo(s.home);
    const sessionId = await spawnIn(s, repo);
    const v = await Viewer.connect(s.relay.url, { apiKey: s.user.apiKey });
    try {
      v.subscribe(sessionId);
      await v.waitForEvent(sessionId, "agent_end");
      const g = new GitClient(v, sessionId);
      await g.ok("status");
      const pushedFor = (name: string) =>
        v.messages.some((m) =>
          m.t === "service_message" && (m as Reply).op === "status_changed" &&
          ((m as Reply).data as GitStatus).untracked.some((f) => f.path === name)
        );
      await Deno.writeTextFile(join(repo, "awake.txt"), "x\n");
      await v.until(() => pushedFor("awake.txt"), "status_changed while awake", 10_000);
      await v.waitForEvent(sessionId, "session_sleep", 20_000);
      await Deno.writeTextFile(join(repo, "asleep.txt"), "x\n");
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(pushedFor("asleep.txt"), false, "a sleeping session's repository was watched");
      const st = await g.ok<GitStatus>("status");
      assert.ok(st.untracked.some((f) => f.path === "asleep.txt"));
      assert.equal(
        v.eventsOf(sessionId).some((e) => e.e.type === "session_waking"),
        false,
        "a git request woke the session",
      );
      // Woken by a message, it is watched again with no request needed.
      s.llm.enqueue({ text: "Awake." });
      v.send({ t: "input", id: "wake", sessionId, kind: "followUp", text: "Wake up" });
      await v.waitForEvent(sessionId, "session_waking", 20_000);
      await v.until(
        () => v.eventsOf(sessionId).filter((e) => e.e.type === "agent_end").length >= 2,
        "the woken turn",
        20_000,
      );
      await Deno.writeTextFile(join(repo, "woken.txt"), "x\n");
      await v.until(() => pushedFor("woken.txt"), "status_changed after waking", 10_000);
    } finally {
      await v.close();
    }
  });
});
