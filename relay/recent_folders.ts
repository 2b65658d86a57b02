/**
 * The folders of a user's recent sessions on a runner, for the new-session
 * form: newest first, and a folder the user removed stays removed until a
 * newer session uses it again. Kept in the user's settings, per runner.
 *
 * @module
 */
import type { RunnerRegistry } from "./runner_registry.ts";
import type { AsyncStore } from "./store/mod.ts";

/** How many folders the list holds at most. */
const MAX_RECENT_FOLDERS = 20;

/** Recent folders per user and runner. */
export class RecentFolders {
  readonly #store: Pick<AsyncStore, "sessions" | "settings">;
  readonly #runners: Pick<RunnerRegistry, "assertOwned">;

  constructor(
    store: Pick<AsyncStore, "sessions" | "settings">,
    runners: Pick<RunnerRegistry, "assertOwned">,
  ) {
    this.#store = store;
    this.#runners = runners;
  }

  /**
   * Folders of the caller's recent sessions on a runner of theirs, newest
   * first, minus the ones dismissed (until a newer session uses them again).
   */
  async list(userId: string, runnerId: string): Promise<string[]> {
    await this.#runners.assertOwned(userId, runnerId);
    const dismissed = await this.#store.settings.get<Record<string, string>>(
      userId,
      dismissedKey(runnerId),
      {},
    );
    const seen = new Set<string>();
    const out: string[] = [];
    for (const s of await this.#store.sessions.listForUser(userId)) {
      if (s.runnerId !== runnerId || !s.cwd || seen.has(s.cwd)) continue;
      seen.add(s.cwd);
      if (hiddenBy(dismissed[s.cwd], s)) continue;
      out.push(s.cwd);
      if (out.length === MAX_RECENT_FOLDERS) break;
    }
    return out;
  }

  /** Hides a folder from the recent ones; false when it was not among them. */
  async dismiss(userId: string, runnerId: string, path: string): Promise<boolean> {
    if (!(await this.list(userId, runnerId)).includes(path)) return false;
    const key = dismissedKey(runnerId);
    const dismissed = await this.#store.settings.get<Record<string, string>>(userId, key, {});
    // The newest session of the folder marks what is hidden: a session that
    // starts after it shows the folder again, even within the same
    // millisecond as this removal (a time would hide it).
    const newest = (await this.#store.sessions.listForUser(userId))
      .find((s) => s.runnerId === runnerId && s.cwd === path);
    if (!newest) return false;
    dismissed[path] = `${newest.createdAt}|${newest.sessionId}`;
    await this.#store.settings.set(userId, key, dismissed);
    return true;
  }
}

/**
 * Whether a removal hides session `s`: a removal names the newest session it
 * hid (`createdAt|sessionId`, in the order sessions are listed) or, as older
 * relays stored it, the time it was made.
 */
function hiddenBy(
  mark: string | undefined,
  s: { createdAt: string; sessionId: string },
): boolean {
  if (!mark) return false;
  const bar = mark.indexOf("|");
  if (bar === -1) return mark >= s.createdAt;
  const at = mark.slice(0, bar);
  return s.createdAt < at || (s.createdAt === at && s.sessionId <= mark.slice(bar + 1));
}

function dismissedKey(runnerId: string): string {
  return `recentFolders.dismissed.${runnerId}`;
}
