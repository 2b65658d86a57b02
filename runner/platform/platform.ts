/**
 * The machine as the platform modules see it: its OS, its environment and
 * which files exist. Each module beside this one takes a {@linkcode Platform}
 * so that every OS branch is tested on Linux by injecting another one.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { posix, win32 } from "node:path";

/** What the platform modules ask of the machine. */
export interface Platform {
  os: typeof Deno.build.os;
  env: (name: string) => string | undefined;
  /** Whether a file exists at this absolute path. */
  exists: (path: string) => boolean;
}

/** This machine. */
export function hostPlatform(): Platform {
  return { os: Deno.build.os, env: (k) => Deno.env.get(k), exists: (p) => existsSync(p) };
}

/** node:path for the platform's paths (win32 on Windows, else posix). */
export function pathsOf(p: Pick<Platform, "os">): typeof posix {
  return p.os === "windows" ? win32 : posix;
}

/** The first `name` found in the platform's PATH (with PATHEXT on Windows), or null. */
export function which(p: Platform, name: string): string | null {
  const path = pathsOf(p);
  const dirs = (p.env("PATH") ?? p.env("Path") ?? "").split(p.os === "windows" ? ";" : ":");
  const exts = p.os === "windows"
    ? ["", ...(p.env("PATHEXT") ?? ".COM;.EXE;.BAT;.CMD").split(";").map((e) => e.toLowerCase())]
    : [""];
  for (const dir of dirs) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (p.exists(candidate)) return candidate;
    }
  }
  return null;
}
