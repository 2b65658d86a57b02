/**
 * `deno task compile`: one self-contained executable per role and target
 * into dist/, with SHA-256 sums (dist/SHA256SUMS, `sha256sum -c` format).
 *
 *   deno task compile                      every role, every target
 *   deno task compile --target <t> --role <r>   (both repeatable)
 *
 * `deno compile` downloads Deno's runtime (denort) for each target. Offline,
 * set DENORT_BIN to a denort for this machine's target: then only that target
 * is built. When the runtime cannot be had, the task says so in one line and
 * exits 2. The binaries carry the narrowest permissions each role needs
 * (docs/install.md, "Permissions").
 *
 * @module
 */
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";
import { basename, join, resolve } from "node:path";
import { ROOT } from "./bundle.ts";

/** The targets a release carries. */
export const TARGETS = [
  "x86_64-unknown-linux-gnu",
  "aarch64-unknown-linux-gnu",
  "x86_64-apple-darwin",
  "aarch64-apple-darwin",
  "x86_64-pc-windows-msvc",
] as const;

/**
 * The relay: it listens and calls out (webhook connects, push services),
 * keeps its data folder, reads its settings from the environment. It starts
 * no process, loads no native library and asks nothing of the OS (`sys`):
 * tests/compile_test.ts runs it with exactly these.
 */
export const RELAY_PERMISSIONS = [
  "--allow-net",
  "--allow-read",
  "--allow-write",
  "--allow-env",
];

/**
 * The runner: the relay's, plus `run` (the agent's bash tool, git, rg, the
 * sandbox's bwrap/socat, and itself for its daemon and workers), `ffi`
 * (node-pty's native addon behind the web terminal) and `sys` (pi and the
 * sandbox ask for the OS, home folder and CPU count). Reads and writes are
 * not narrowed: the workspace roots are the user's to choose.
 */
export const RUNNER_PERMISSIONS = [
  ...RELAY_PERMISSIONS,
  "--allow-run",
  "--allow-ffi",
  "--allow-sys",
];

/** Each executable: its name, the command it runs, its permissions. */
export const ROLES: Record<string, { permissions: string[]; summary: string }> = {
  "baton-relay": { permissions: RELAY_PERMISSIONS, summary: "the relay server" },
  "baton-runner": { permissions: RUNNER_PERMISSIONS, summary: "a runner" },
  // `baton up` runs both in one process tree.
  "baton": { permissions: RUNNER_PERMISSIONS, summary: "every command (up, relay, runner, ...)" },
};

/** This machine's target (what a DENORT_BIN can build). */
export function hostTarget(): string {
  return Deno.build.target;
}

/** The file name of a role's executable for a target, as released. */
export function binaryName(role: string, target: string): string {
  return `${role}-${target}${target.includes("windows") ? ".exe" : ""}`;
}

/** The `deno compile` arguments for one executable. */
export function compileArgs(role: string, target: string, outDir: string): string[] {
  const r = ROLES[role];
  if (!r) {
    throw new CompileError(`Unknown role: '${role}' (one of ${Object.keys(ROLES).join(", ")})`);
  }
  return [
    "compile",
    "--quiet",
    // `deno task check` (and the release workflow) type-check once; not again per binary.
    "--no-check",
    ...r.permissions,
    "--target",
    target,
    "--config",
    join(ROOT, "deno.json"),
    "--output",
    join(outDir, binaryName(role, target)),
    join(ROOT, "main.ts"),
  ];
}

/** A failure told in one line (exit 2). */
export class CompileError extends Error {}

/** Options of {@linkcode compile}. */
export interface CompileOptions {
  targets?: string[];
  roles?: string[];
  /** Default dist/ in the repository. */
  outDir?: string;
  /** The environment (DENORT_BIN is read from it). */
  env?: Record<string, string | undefined>;
  log?: (line: string) => void;
  signal?: AbortSignal;
}

/** Builds the executables and writes their sums; returns the files made. */
export async function compile(options: CompileOptions = {}): Promise<string[]> {
  const env = options.env ?? Deno.env.toObject();
  const log = options.log ?? (() => {});
  const outDir = resolve(options.outDir ?? join(ROOT, "dist"));
  const denort = env.DENORT_BIN;
  const host = hostTarget();
  for (const t of options.targets ?? []) {
    if (!(TARGETS as readonly string[]).includes(t)) {
      throw new CompileError(`Unknown target: '${t}' (one of ${TARGETS.join(", ")})`);
    }
  }
  const targets = options.targets?.length ? options.targets : denort ? [host] : [...TARGETS];
  if (denort) {
    const other = targets.find((t) => t !== host);
    if (other) {
      throw new CompileError(
        `DENORT_BIN is a runtime for this machine's target (${host}) only, not ${other}: ` +
          `build --target ${host}, or unset DENORT_BIN to download the others`,
      );
    }
    try {
      if (!Deno.statSync(denort).isFile) throw new Deno.errors.NotFound();
    } catch {
      throw new CompileError(`DENORT_BIN is not a file: '${denort}' (see docs/install.md)`);
    }
  }
  const roles = options.roles?.length ? options.roles : Object.keys(ROLES);
  await Deno.mkdir(outDir, { recursive: true });
  const made: string[] = [];
  for (const target of targets) {
    for (const role of roles) {
      const args = compileArgs(role, target, outDir);
      log(`compiling ${binaryName(role, target)}`);
      const res = await new Deno.Command(Deno.execPath(), {
        args,
        cwd: ROOT,
        env: { ...(denort ? { DENORT_BIN: denort } : {}), NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
        ...(options.signal ? { signal: options.signal } : {}),
      }).output();
      if (!res.success) throw failure(new TextDecoder().decode(res.stderr), target);
      made.push(join(outDir, binaryName(role, target)));
    }
  }
  await writeSums(outDir);
  return made;
}

/** `deno compile`'s error output as one line that says what to do. */
export function failure(stderr: string, target: string): CompileError {
  // deno compile's error is a chain ("error: ...", "Caused by:", "0: ...").
  // Colours off (NO_COLOR is set for it), stack trace dropped.
  const text = stderr.split("Stack backtrace:")[0]!;
  const download = text.match(/https:\/\/\S*denort\S*\.zip/);
  if (download || /Setting up base binary/.test(text)) {
    // The last link of the chain is the root cause ("4: failed to lookup address ...").
    const cause = [...text.matchAll(/^\s*\d+: (.+)$/gm)].at(-1)?.[1];
    return new CompileError(
      `Cannot download Deno's runtime (denort) for ${target}` +
        (download ? ` from ${download[0]}` : "") + (cause ? ` (${cause.trim()})` : "") +
        `: build offline with DENORT_BIN=/path/to/denort for this machine (docs/install.md)`,
    );
  }
  const first = text.split("\n").map((l) => l.trim()).find((l) => l.startsWith("error:")) ??
    text.split("\n").find((l) => l.trim() !== "")?.trim() ?? "unknown error";
  return new CompileError(`deno compile failed for ${target}: ${first.replace(/^error:\s*/, "")}`);
}

/** Writes SHA256SUMS for the executables in `dir` (`<hex>  <name>` lines). */
export async function writeSums(dir: string): Promise<string> {
  const lines: string[] = [];
  const names = [...Deno.readDirSync(dir)]
    .filter((e) => e.isFile && /^baton(-relay|-runner)?-/.test(e.name))
    .map((e) => e.name)
    .sort();
  for (const name of names) {
    const hash = createHash("sha256");
    const file = await Deno.open(join(dir, name));
    for await (const chunk of file.readable) hash.update(chunk);
    lines.push(`${hash.digest("hex")}  ${name}`);
  }
  const path = join(dir, "SHA256SUMS");
  await Deno.writeTextFile(path, lines.map((l) => l + "\n").join(""));
  return path;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      target: { type: "string", multiple: true },
      role: { type: "string", multiple: true },
      out: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: false,
  });
  if (values.help) {
    console.log(
      `Usage: deno task compile [--target <target>]... [--role <role>]... [--out <dir>]\n\n` +
        `Targets: ${TARGETS.join(", ")}\nRoles: ${Object.keys(ROLES).join(", ")}\n` +
        `Offline: DENORT_BIN=/path/to/denort builds this machine's target (${hostTarget()}).`,
    );
    Deno.exit(0);
  }
  try {
    const made = await compile({
      targets: values.target as string[] | undefined,
      roles: values.role as string[] | undefined,
      outDir: values.out as string | undefined,
      log: (l) => console.log(l),
    });
    for (const f of made) {
      console.log(`${basename(f)}  ${(Deno.statSync(f).size / 1e6).toFixed(1)} MB`);
    }
    console.log(`sums: ${join(values.out as string ?? "dist", "SHA256SUMS")}`);
  } catch (err) {
    if (!(err instanceof CompileError)) throw err;
    console.error(`compile: ${err.message}`);
    Deno.exit(2);
  }
}
