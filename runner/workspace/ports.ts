/**
 * Which TCP ports a set of process trees listens on, per platform, behind
 * one small interface ({@linkcode PortPlatform}) so the watcher
 * (previews.ts) is the same everywhere and tests inject the platform's data:
 *
 * - Linux: `/proc/<pid>/stat` gives each process's parent; `/proc/net/tcp`
 *   and `tcp6` list listening sockets by inode; `/proc/<pid>/fd/*` links to
 *   `socket:[inode]`. A process whose environment carries the session's
 *   marker (`BATON_SESSION_ID`, set by the worker and inherited by its
 *   tools) counts too: a server started with `nohup … &` is reparented to
 *   init as soon as its shell exits, and would leave the tree.
 * - macOS: `ps -Ao pid=,ppid=` and `lsof -nP -iTCP -sTCP:LISTEN -Fpcn`.
 * - Windows: `netstat -ano -p TCP` and a CIM query for parents.
 *
 * The worker's own sockets do not count (its sandbox's network proxy is no
 * preview). Only ports reachable on 127.0.0.1 count (the tunnel dials there): an
 * address of 127.x, 0.0.0.0, `::` or `::ffff:127.x`.
 *
 * @module
 */
import { join } from "node:path";

/** A listening socket of one process. */
export interface Listener {
  pid: number;
  port: number;
  /** The process's short name, when known. */
  process?: string;
}

/** What the watcher needs of the operating system. */
export interface PortPlatform {
  /** Listening sockets of the processes in the trees under `roots`, and those marked with `marker`. */
  listeners(roots: ReadonlyMap<string, number>): Promise<Map<string, Listener[]>>;
}

/** Runs a command and returns its stdout (the default runs it for real). */
export type RunCommand = (cmd: string, args: string[]) => Promise<string>;

/** The environment variable that marks a session's processes. */
export const SESSION_MARKER_ENV = "BATON_SESSION_ID";

// ---------------------------------------------------------------------------
// Parsers (pure; each platform's text in, facts out)

/** A listening TCP socket from `/proc/net/tcp{,6}`. */
export interface ProcSocket {
  inode: number;
  port: number;
}

/** Listening sockets reachable on loopback, from the text of `/proc/net/tcp` or `tcp6`. */
export function parseProcNetTcp(text: string): ProcSocket[] {
  const out: ProcSocket[] = [];
  for (const line of text.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== "0A") continue; // 0A = TCP_LISTEN
    const [hexAddr, hexPort] = f[1]!.split(":");
    if (!hexAddr || !hexPort || !loopbackReachableHex(hexAddr)) continue;
    const inode = Number(f[9]);
    const port = parseInt(hexPort, 16);
    if (inode > 0 && port > 0) out.push({ inode, port });
  }
  return out;
}

/** Whether a `/proc/net/tcp*` address (host byte order per 32-bit word) is reached through 127.0.0.1. */
function loopbackReachableHex(hex: string): boolean {
  if (hex.length === 8) {
    // Little-endian on the machines baton runs on: 0100007F is 127.0.0.1.
    return /^0+$/.test(hex) || hex.slice(6, 8).toUpperCase() === "7F";
  }
  if (hex.length === 32) {
    if (/^0+$/.test(hex)) return true; // ::
    // ::ffff:127.x.y.z: words 0–1 zero, word 2 = 0000FFFF (as FFFF0000), word 3 = 127.x.
    return /^0{16}FFFF0000/i.test(hex) && hex.slice(30, 32).toUpperCase() === "7F";
  }
  return false;
}

/** `pid ppid` per line (`ps -Ao pid=,ppid=`, or the Windows CIM query) into a map. */
export function parsePidPairs(text: string): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of text.split(/\r?\n/)) {
    const m = line.trim().match(/^(\d+)\s+(\d+)$/);
    if (m) out.set(Number(m[1]), Number(m[2]));
  }
  return out;
}

/** `lsof -nP -iTCP -sTCP:LISTEN -Fpcn` (macOS) into listeners reachable on loopback. */
export function parseLsof(text: string): Listener[] {
  const out: Listener[] = [];
  let pid = 0;
  let command: string | undefined;
  for (const line of text.split("\n")) {
    const tag = line[0], value = line.slice(1);
    if (tag === "p") {
      pid = Number(value);
      command = undefined;
    } else if (tag === "c") command = value;
    else if (tag === "n" && pid > 0) {
      const m = value.match(/^(.*):(\d+)$/);
      if (!m || !loopbackReachableText(m[1]!)) continue;
      out.push({ pid, port: Number(m[2]), ...(command ? { process: command } : {}) });
    }
  }
  return out;
}

/** `netstat -ano -p TCP` (Windows) into listeners reachable on loopback. */
export function parseNetstat(text: string): Listener[] {
  const out: Listener[] = [];
  for (const line of text.split(/\r?\n/)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 5 || f[0] !== "TCP" || f[3] !== "LISTENING") continue;
    const m = f[1]!.match(/^(.*):(\d+)$/);
    if (!m || !loopbackReachableText(m[1]!)) continue;
    out.push({ pid: Number(f[4]), port: Number(m[2]) });
  }
  return out;
}

function loopbackReachableText(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "*" || h === "0.0.0.0" || h === "::" || h.startsWith("127.") ||
    h.startsWith("::ffff:127.");
}

/** Every process under each root (the root included), from a pid → parent map. */
export function treesOf(
  roots: ReadonlyMap<string, number>,
  parents: ReadonlyMap<number, number>,
): Map<number, string> {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parents) {
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const owner = new Map<number, string>();
  for (const [key, root] of roots) {
    const stack = [root];
    while (stack.length > 0) {
      const pid = stack.pop()!;
      if (owner.has(pid)) continue;
      owner.set(pid, key);
      for (const c of children.get(pid) ?? []) stack.push(c);
    }
  }
  return owner;
}

// ---------------------------------------------------------------------------
// Platforms

/** Linux: everything from `/proc` (`procRoot` lets a test lay out its own). */
export class LinuxPorts implements PortPlatform {
  constructor(readonly procRoot = "/proc") {}

  async listeners(roots: ReadonlyMap<string, number>): Promise<Map<string, Listener[]>> {
    const out = new Map<string, Listener[]>();
    if (roots.size === 0) return out;
    const parents = new Map<number, number>();
    const names = new Map<number, string>();
    const marked = new Map<number, string>();
    const keys = new Set(roots.keys());
    const markerRe = new RegExp(`(?:^|\\0)${SESSION_MARKER_ENV}=([^\\0]*)`);
    for await (const entry of Deno.readDir(this.procRoot)) {
      if (!/^\d+$/.test(entry.name)) continue;
      const pid = Number(entry.name);
      const stat = await this.#read(pid, "stat");
      if (stat === null) continue;
      // "pid (comm) state ppid …": comm may hold spaces and parentheses.
      const close = stat.lastIndexOf(")");
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      parents.set(pid, ppid);
      names.set(pid, stat.slice(stat.indexOf("(") + 1, close));
      const env = await this.#read(pid, "environ");
      const m = env?.match(markerRe);
      if (m && keys.has(m[1]!)) marked.set(pid, m[1]!);
    }
    const owner = treesOf(roots, parents);
    for (const [pid, key] of marked) if (!owner.has(pid)) owner.set(pid, key);

    const sockets = new Map<number, number>();
    for (const file of ["tcp", "tcp6"]) {
      const text = await Deno.readTextFile(join(this.procRoot, "net", file)).catch(() => "");
      for (const s of parseProcNetTcp(text)) sockets.set(s.inode, s.port);
    }
    if (sockets.size === 0) return out;
    for (const [pid, key] of owner) {
      if (roots.get(key) === pid) continue; // the worker's own sockets (its sandbox proxy)
      const seen = new Set<number>();
      try {
        for await (const fd of Deno.readDir(join(this.procRoot, String(pid), "fd"))) {
          const target = await Deno.readLink(join(this.procRoot, String(pid), "fd", fd.name))
            .catch(() => "");
          const m = target.match(/^socket:\[(\d+)\]$/);
          const port = m ? sockets.get(Number(m[1])) : undefined;
          if (port === undefined || seen.has(port)) continue;
          seen.add(port);
          const list = out.get(key) ?? [];
          list.push({ pid, port, ...(names.has(pid) ? { process: names.get(pid)! } : {}) });
          out.set(key, list);
        }
      } catch { /* gone, or not ours to read */ }
    }
    return out;
  }

  async #read(pid: number, file: string): Promise<string | null> {
    try {
      return await Deno.readTextFile(join(this.procRoot, String(pid), file));
    } catch {
      return null;
    }
  }
}

/** Shared by macOS and Windows: a process table and a listener list from commands. */
class CommandPorts implements PortPlatform {
  constructor(
    readonly table: () => Promise<Map<number, number>>,
    readonly sockets: () => Promise<Listener[]>,
  ) {}

  async listeners(roots: ReadonlyMap<string, number>): Promise<Map<string, Listener[]>> {
    const out = new Map<string, Listener[]>();
    if (roots.size === 0) return out;
    const owner = treesOf(roots, await this.table());
    for (const l of await this.sockets()) {
      const key = owner.get(l.pid);
      if (key === undefined || roots.get(key) === l.pid) continue;
      const list = out.get(key) ?? [];
      if (!list.some((x) => x.port === l.port)) list.push(l);
      out.set(key, list);
    }
    return out;
  }
}

/** macOS: `ps` and `lsof`. */
export function macPorts(run: RunCommand = runCommand): PortPlatform {
  return new CommandPorts(
    async () => parsePidPairs(await run("ps", ["-Ao", "pid=,ppid="])),
    async () => parseLsof(await run("lsof", ["-nP", "-iTCP", "-sTCP:LISTEN", "-Fpcn"])),
  );
}

/** Windows: a CIM query for parents and `netstat -ano`. */
export function windowsPorts(run: RunCommand = runCommand): PortPlatform {
  return new CommandPorts(
    async () =>
      parsePidPairs(
        await run("powershell", [
          "-NoProfile",
          "-Command",
          'Get-CimInstance Win32_Process | ForEach-Object { "$($_.ProcessId) $($_.ParentProcessId)" }',
        ]),
      ),
    async () => parseNetstat(await run("netstat", ["-ano", "-p", "TCP"])),
  );
}

/** The platform this runner is on. */
export function currentPorts(): PortPlatform {
  if (Deno.build.os === "darwin") return macPorts();
  if (Deno.build.os === "windows") return windowsPorts();
  return new LinuxPorts();
}

async function runCommand(cmd: string, args: string[]): Promise<string> {
  try {
    const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "null" }).output();
    // lsof exits 1 when nothing listens: its (empty) stdout is still the answer.
    return new TextDecoder().decode(out.stdout);
  } catch {
    return "";
  }
}
