import assert from "node:assert/strict";
import { join } from "node:path";
import { RequestError } from "../control_link.ts";
import { WorkspaceServices } from "./services.ts";

async function git(cwd: string, ...args: string[]): Promise<void> {
  const r = await new Deno.Command("git", { args, cwd, stdout: "null", stderr: "null" }).output();
  assert.ok(r.success, `git ${args.join(" ")}`);
}

/** A repository at `top` holding `sub/` and a file beside it, outside `sub`. */
async function repoAbove(): Promise<{ top: string; sub: string }> {
  const top = await Deno.realPath(await Deno.makeTempDir());
  const sub = join(top, "sub");
  await Deno.mkdir(sub);
  await git(top, "init", "-q");
  await Deno.writeTextFile(join(top, "secret-outside-root.txt"), "x");
  await Deno.writeTextFile(join(sub, "inside.txt"), "y");
  return { top, sub };
}

function services(roots: string[] | null, cwd: string): WorkspaceServices {
  return new WorkspaceServices({
    cwdOf: () => cwd,
    awake: () => false,
    roots,
    send: () => true,
    log: () => {},
  });
}

const status = { sessionId: "s1", serviceId: "git", op: "status", requestId: "r1" };

Deno.test("git refuses a repository whose top folder lies above every workspace root", async () => {
  const { top, sub } = await repoAbove();
  const svc = services([sub], sub);
  try {
    await assert.rejects(
      () => svc.handle(status),
      (err) => err instanceof RequestError && err.code === "repo_outside_roots",
    );
  } finally {
    svc.close();
    await Deno.remove(top, { recursive: true });
  }
});

Deno.test("git serves a repository inside a root, and any repository when roots are open", async () => {
  const { top, sub } = await repoAbove();
  try {
    for (const roots of [[top], null]) {
      const svc = services(roots, sub);
      try {
        const answer = JSON.stringify(await svc.handle(status));
        assert.match(answer, /secret-outside-root\.txt/);
      } finally {
        svc.close();
      }
    }
  } finally {
    await Deno.remove(top, { recursive: true });
  }
});
