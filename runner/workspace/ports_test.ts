import assert from "node:assert/strict";
import { join } from "node:path";
import {
  LinuxPorts,
  macPorts,
  parseLsof,
  parseNetstat,
  parseProcNetTcp,
  SESSION_MARKER_ENV,
  treesOf,
  windowsPorts,
} from "./ports.ts";

const TCP =
  `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1111 1 0 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2222 1 0 100 0 0 10 0
   2: 0A00020F:2328 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 3333 1 0 100 0 0 10 0
   3: 0100007F:CEEE 0100007F:9845 01 00000000:00000000 03:00000C9C 00000000  1000        0 4444 3 0
`;
const TCP6 =
  `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1435 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5555 1 0
   1: 0000000000000000FFFF00000100007F:1436 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 6666 1 0
   2: 00000000000000000000000001000000:1437 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7777 1 0
`;

Deno.test("/proc/net/tcp parsing keeps listening sockets reachable on 127.0.0.1 only", () => {
  assert.deepEqual(parseProcNetTcp(TCP), [
    { inode: 1111, port: 3000 }, // 0.0.0.0
    { inode: 2222, port: 8080 }, // 127.0.0.1
  ]); // 10.0.2.15 and an established socket are left out
  assert.deepEqual(parseProcNetTcp(TCP6), [
    { inode: 5555, port: 5173 }, // ::
    { inode: 6666, port: 5174 }, // ::ffff:127.0.0.1
  ]); // ::1 alone is not reached through 127.0.0.1
});

Deno.test("a process tree is followed from each session's worker", () => {
  const parents = new Map([[10, 1], [11, 10], [12, 11], [20, 1], [21, 20], [30, 12]]);
  const owner = treesOf(new Map([["a", 10], ["b", 20]]), parents);
  assert.deepEqual([...owner].sort((x, y) => x[0] - y[0]), [
    [10, "a"],
    [11, "a"],
    [12, "a"],
    [20, "b"],
    [21, "b"],
    [30, "a"],
  ]);
});

/** Lays out a fake /proc: processes with a parent, an environment and socket fds. */
async function fakeProc(
  procs: { pid: number; ppid: number; comm: string; env?: string; sockets?: number[] }[],
): Promise<string> {
  const root = await Deno.makeTempDir({ prefix: "baton-proc-" });
  await Deno.mkdir(join(root, "net"));
  await Deno.writeTextFile(join(root, "net", "tcp"), TCP);
  await Deno.writeTextFile(join(root, "net", "tcp6"), TCP6);
  await Deno.mkdir(join(root, "self"));
  for (const p of procs) {
    const dir = join(root, String(p.pid));
    await Deno.mkdir(join(dir, "fd"), { recursive: true });
    await Deno.writeTextFile(join(dir, "stat"), `${p.pid} (${p.comm}) S ${p.ppid} ${p.pid} 0 0`);
    await Deno.writeTextFile(join(dir, "environ"), `PATH=/bin\0${p.env ?? ""}\0`);
    await Deno.symlink("/dev/null", join(dir, "fd", "0"));
    for (const [i, inode] of (p.sockets ?? []).entries()) {
      await Deno.symlink(`socket:[${inode}]`, join(dir, "fd", String(3 + i)));
    }
  }
  return root;
}

Deno.test("Linux: ports of a session's tree and of its marked (reparented) processes", async () => {
  const root = await fakeProc([
    { pid: 100, ppid: 1, comm: "deno", sockets: [6666] }, // session a's worker (its proxy)
    { pid: 101, ppid: 100, comm: "bash" },
    { pid: 102, ppid: 101, comm: "node (vite)", sockets: [1111, 3333] },
    // A server started with nohup … &: its shell exited, init adopted it.
    { pid: 150, ppid: 1, comm: "python3", env: `${SESSION_MARKER_ENV}=a`, sockets: [2222] },
    { pid: 200, ppid: 1, comm: "deno" }, // session b's worker, nothing listens
    { pid: 300, ppid: 1, comm: "postgres", sockets: [5555] }, // someone else's
    { pid: 301, ppid: 1, comm: "x", env: `${SESSION_MARKER_ENV}=gone`, sockets: [6666] },
  ]);
  try {
    const found = await new LinuxPorts(root).listeners(new Map([["a", 100], ["b", 200]]));
    assert.deepEqual(
      found.get("a")!.sort((x, y) => x.port - y.port),
      [
        { pid: 102, port: 3000, process: "node (vite)" },
        { pid: 150, port: 8080, process: "python3" },
      ],
    );
    assert.equal(found.get("b"), undefined);
    assert.equal(found.size, 1);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("Linux, for real: a detached server started with the session's marker is found", async () => {
  using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const own = listener.addr.port;
  // A shell that starts a server in the background and exits at once (as the agent's bash tool does).
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = probe.addr.port;
  probe.close();
  const sh = new Deno.Command("bash", {
    args: ["-c", `nohup python3 -m http.server ${port} --bind 127.0.0.1 >/dev/null 2>&1 & echo $!`],
    env: { [SESSION_MARKER_ENV]: "s1" },
    stdout: "piped",
  });
  const pid = Number(new TextDecoder().decode((await sh.output()).stdout).trim());
  try {
    const platform = new LinuxPorts();
    let found: number[] = [];
    for (let i = 0; i < 100 && !found.includes(port); i++) {
      await new Promise((r) => setTimeout(r, 50));
      const all = await platform.listeners(new Map([["s1", 999_999_999], ["me", Deno.pid]]));
      found = (all.get("s1") ?? []).map((l) => l.port);
      // The root's own sockets are not previews (a worker's sandbox proxy).
      if (i === 0) assert.ok(!(all.get("me") ?? []).some((l) => l.port === own), "own port");
    }
    assert.deepEqual(found, [port]);
  } finally {
    Deno.kill(pid, "SIGTERM");
  }
});

Deno.test("macOS: lsof and ps output, filtered to the session's tree", async () => {
  const ps = "    1     0\n  500     1\n  501   500\n  600     1\n";
  const lsof = [
    "p500",
    "cdeno",
    "n127.0.0.1:40000",
    "p501",
    "cnode",
    "n*:5173",
    "n[::1]:5174",
    "n127.0.0.1:9229",
    "p600",
    "cpostgres",
    "n127.0.0.1:5432",
    "",
  ].join("\n");
  assert.deepEqual(parseLsof(lsof).map((l) => l.port), [40000, 5173, 9229, 5432]);
  const calls: string[] = [];
  const platform = macPorts((cmd, args) => {
    calls.push(`${cmd} ${args.join(" ")}`);
    return Promise.resolve(cmd === "ps" ? ps : lsof);
  });
  const found = await platform.listeners(new Map([["s", 500]]));
  assert.deepEqual(found.get("s"), [
    // 500 itself (the worker) listens on nothing that counts
    { pid: 501, port: 5173, process: "node" },
    { pid: 501, port: 9229, process: "node" },
  ]);
  assert.deepEqual(calls, ["ps -Ao pid=,ppid=", "lsof -nP -iTCP -sTCP:LISTEN -Fpcn"]);
});

Deno.test("Windows: netstat -ano and the process table, filtered to the session's tree", async () => {
  const netstat = [
    "",
    "Active Connections",
    "",
    "  Proto  Local Address          Foreign Address        State           PID",
    "  TCP    0.0.0.0:135            0.0.0.0:0              LISTENING       900",
    "  TCP    127.0.0.1:3000         0.0.0.0:0              LISTENING       4242",
    "  TCP    192.168.1.5:3001       0.0.0.0:0              LISTENING       4242",
    "  TCP    [::]:8000              [::]:0                 LISTENING       4243",
    "  TCP    127.0.0.1:3000         127.0.0.1:50000        ESTABLISHED     4242",
  ].join("\r\n");
  assert.deepEqual(parseNetstat(netstat).map((l) => l.port), [135, 3000, 8000]);
  const table = "4 0\r\n900 4\r\n4000 4\r\n4242 4000\r\n4243 4242\r\n";
  const platform = windowsPorts((cmd) =>
    Promise.resolve(cmd === "netstat" ? netstat : cmd === "powershell" ? table : "")
  );
  const found = await platform.listeners(new Map([["s", 4000]]));
  assert.deepEqual(found.get("s")!.map((l) => l.port), [3000, 8000]);
});
