/**
 * Real git repositories made by tests: a work tree with two commits' worth
 * of files and a bare remote beside it.
 *
 * @module
 */
import { join } from "node:path";

/** Runs git in `cwd` (no system config); throws with its stderr when it fails. */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command("git", {
    args,
    cwd,
    env: { GIT_CONFIG_NOSYSTEM: "1" },
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`git ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  }
  return text;
}

/** `<home>/repo` with `a.txt` and `b.txt` committed on `main`, and `<home>/remote.git` as origin. */
export async function makeRepo(home: string): Promise<{ repo: string; remote: string }> {
  const repo = join(home, "repo");
  const remote = join(home, "remote.git");
  await Deno.mkdir(repo, { recursive: true });
  await git(home, "init", "-q", "--bare", "-b", "main", remote);
  await git(repo, "init", "-q", "-b", "main");
  await git(repo, "config", "user.name", "Test Person");
  await git(repo, "config", "user.email", "test@example.com");
  await Deno.writeTextFile(join(repo, "a.txt"), "one\ntwo\nthree\n");
  await Deno.writeTextFile(join(repo, "b.txt"), "bee\n".repeat(20));
  await git(repo, "add", ".");
  await git(repo, "commit", "-q", "-m", "First");
  await git(repo, "remote", "add", "origin", remote);
  return { repo: await Deno.realPath(repo), remote };
}
