/**
 * Where baton keeps its files: `~/.baton` on Linux and macOS,
 * `%USERPROFILE%\.baton` on Windows (HOME first where a user set it, as Git
 * Bash and MSYS do, so that both shells see one folder).
 *
 * @module
 */
import { pathsOf, type Platform } from "./platform.ts";

/** The user's home folder, or null when the environment names none. */
export function homeDir(p: Platform): string | null {
  const home = p.env("HOME");
  if (home) return home;
  if (p.os !== "windows") return null;
  const profile = p.env("USERPROFILE");
  if (profile) return profile;
  const drive = p.env("HOMEDRIVE");
  const path = p.env("HOMEPATH");
  return drive && path ? drive + path : null;
}

/** `<home>/.baton`. */
export function batonDir(p: Platform): string | null {
  const home = homeDir(p);
  return home === null ? null : pathsOf(p).join(home, ".baton");
}
