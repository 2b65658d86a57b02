/**
 * A relay process and a runner process of one user, with the runner's
 * tunnel up: what every end-to-end tunnel test starts from. The service the
 * tunnel reaches is each test's own.
 *
 * @module
 */
import { signUp, type User } from "./client.ts";
import { RelayProcess, type RunnerProcess, startRunner } from "./procs.ts";

/** The relay, the runner's owner, the runner and its id. */
export interface TunnelRig {
  relay: RelayProcess;
  owner: User;
  runner: RunnerProcess;
  runnerId: string;
}

/** The id of `user`'s first runner. */
export async function runnerIdOf(user: User): Promise<string> {
  const runners = await (await user.api("/api/runners")).json();
  return (runners.runners ?? runners)[0].id;
}

/**
 * Opens `path` of port `port` on the runner as a browser's navigation does,
 * the redirect to the preview address not followed.
 */
export function navigateTunnel(
  user: User,
  runnerId: string,
  port: number,
  path = "/",
): Promise<Response> {
  return user.web(`/api/tunnel/runner/${runnerId}/${port}${path}`, {
    headers: { "sec-fetch-mode": "navigate" },
    redirect: "manual",
  });
}

/** Where a navigation to port `port` is sent: its preview address (or the tunnel origin's handoff). */
export async function previewAddress(user: User, runnerId: string, port: number): Promise<string> {
  const res = await navigateTunnel(user, runnerId, port);
  await res.body?.cancel();
  const at = res.headers.get("location");
  if (!at) throw new Error(`No preview address for port ${port}: ${res.status}`);
  return at;
}

/**
 * Starts a relay that lets people sign up and a runner of a new user, waits
 * for the runner's tunnel, runs `fn`, and stops both; their output is
 * printed when `fn` fails.
 */
export async function withTunnelRunner(
  fn: (rig: TunnelRig) => Promise<void>,
  options: { env?: Record<string, string>; port?: number } = {},
): Promise<void> {
  const relay = await RelayProcess.start({
    args: ["--allow-signup"],
    ...(options.env ? { env: options.env } : {}),
    ...(options.port ? { port: options.port } : {}),
  });
  let runner: RunnerProcess | null = null as RunnerProcess | null;
  try {
    const owner = await signUp(relay.url);
    runner = await startRunner({ relayUrl: relay.url, apiKey: owner.apiKey });
    await runner.proc.waitFor(/tunnel connected/, 20_000);
    await fn({ relay, owner, runner, runnerId: await runnerIdOf(owner) });
  } catch (err) {
    console.error(relay.proc.output());
    if (runner) console.error(runner.proc.output());
    throw err;
  } finally {
    await runner?.stop();
    await relay.stop();
  }
}

/**
 * Starts `owner`'s runner on `relayUrl` with `root` as its only workspace
 * root and bash as its shell (what the terminal tests open), and waits for
 * its tunnel; on failure its output is printed and it is stopped.
 */
export async function startTerminalRunner(
  relayUrl: string,
  owner: User,
  root: string,
): Promise<RunnerProcess> {
  const runner = await startRunner({
    relayUrl,
    apiKey: owner.apiKey,
    env: { BATON_WORKSPACE_ROOTS: root, SHELL: "/bin/bash" },
  });
  try {
    await runner.proc.waitFor(/tunnel connected/, 20_000);
  } catch (err) {
    console.error(runner.proc.output());
    await runner.stop();
    throw err;
  }
  return runner;
}

const MB = 1024 * 1024;
const CHUNK = 64 * 1024;

/**
 * A download of `?mb=` MiB that the service makes only as it is read, 64 KiB
 * a pull, counting what it made in `made` under `?id=`: a reader that stalls
 * holds the maker back, which is what the tunnel's credit must show.
 */
export function madeAsRead(url: URL, made: Map<string, number>): Response {
  const chunk = new Uint8Array(CHUNK).fill(120);
  const id = url.searchParams.get("id") ?? "";
  let left = Number(url.searchParams.get("mb")) * (MB / CHUNK);
  made.set(id, 0);
  return new Response(
    new ReadableStream({
      pull(c) {
        if (left-- <= 0) return c.close();
        made.set(id, made.get(id)! + CHUNK);
        c.enqueue(chunk);
      },
    }, { highWaterMark: 0 }),
    { headers: { "content-type": "application/octet-stream" } },
  );
}
