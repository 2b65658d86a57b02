/**
 * The worker's entry to hooks: reads `hooks` from the global and the
 * project's config files (both apply, global first; the project's only
 * under an enforcing sandbox or when the global file trusts projects).
 *
 * @module
 */
import { join } from "node:path";
import type { ChildReaper } from "../child_reaper.ts";
import type { SandboxState } from "../sandbox/session.ts";
import { projectTrusted, readConfigOrNotice, untrustedNotice } from "../mcp/session.ts";
import { toolEnvironment } from "../sandbox/tool_env.ts";
import { parseHooks } from "./config.ts";
import { type HookNotice, SessionHooks } from "./session_hooks.ts";

/** Options of {@linkcode loadSessionHooks}. */
export interface LoadHooksOptions {
  batonDir: string;
  cwd: string;
  sessionId: string;
  sandbox: SandboxState;
  /** Variables kept from the hooks while the sandbox is active (the providers' keys). */
  hidden: ReadonlySet<string>;
  reaper: ChildReaper;
  notify: (n: HookNotice) => void;
}

/** The hooks of a session in `cwd` (problems in the files become notices). */
export async function loadSessionHooks(o: LoadHooksOptions): Promise<SessionHooks> {
  const global = await readConfigOrNotice(o.batonDir, o.notify);
  const project = await readConfigOrNotice(join(o.cwd, ".baton"), o.notify);
  const problems: string[] = [];
  const hooks = parseHooks(global.hooks, "global", problems);
  const own = parseHooks(project.hooks, "project", problems);
  // Without an enforcing sandbox, a repository's hooks run only when the person trusts projects.
  if (projectTrusted(global, o.sandbox)) hooks.push(...own);
  else if (own.length > 0) {
    o.notify({ level: "error", text: untrustedNotice("hook(s)", own.length) });
  }
  for (const p of problems) o.notify({ level: "error", text: p });
  return new SessionHooks(hooks, {
    sessionId: o.sessionId,
    cwd: o.cwd,
    sandbox: o.sandbox,
    reaper: o.reaper,
    env: toolEnvironment(o.sandbox, o.hidden),
    notify: o.notify,
  });
}
