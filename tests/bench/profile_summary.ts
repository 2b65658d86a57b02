/**
 * Summarises a V8 `.cpuprofile` (from `BATON_BENCH_PROFILE=<dir>` or
 * `deno run --cpu-prof`): self time by function and by package, so
 * docs/performance.md can say where time goes.
 *
 *   deno run -A tests/bench/profile_summary.ts <file.cpuprofile> [top]
 *
 * @module
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

/** Where a script URL belongs: an npm package, the relay's own code, or the runtime. */
function owner(url: string): string {
  if (!url) return "(native / runtime)";
  const npm = url.match(/\/npm\/registry\.npmjs\.org\/((?:@[^/]+\/)?[^/]+)\//);
  if (npm) return `npm:${npm[1]}`;
  const local = url.match(/\/work\/main\/(.*)$/) ??
    url.match(/file:\/\/.*?\/((?:relay|shared|tests|runner|cli)\/.*)$/);
  if (local) return local[1]!;
  if (url.startsWith("ext:") || url.startsWith("node:")) {
    return url.split("/").slice(0, 2).join("/");
  }
  return url;
}

export function summarise(profile: Profile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byFn = new Map<string, number>();
  const byOwner = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const fn = `${n.callFrame.functionName || "(anonymous)"} ${owner(n.callFrame.url)}:${
      n.callFrame.lineNumber + 1
    }`;
    byFn.set(fn, (byFn.get(fn) ?? 0) + us);
    const o = n.callFrame.functionName === "(idle)"
      ? "(idle)"
      : n.callFrame.functionName === "(garbage collector)"
      ? "(garbage collector)"
      : owner(n.callFrame.url);
    byOwner.set(o, (byOwner.get(o) ?? 0) + us);
  }
  const pct = (us: number) => `${((us / total) * 100).toFixed(1).padStart(5)}%`;
  const lines = [`total ${(total / 1000).toFixed(0)} ms sampled`, "", "by owner:"];
  for (const [o, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, 15)) {
    lines.push(`  ${pct(us)}  ${o}`);
  }
  lines.push("", "by function (self time):");
  for (const [f, us] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`  ${pct(us)}  ${f}`);
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const [file, top] = Deno.args;
  if (!file) {
    console.error("Usage: deno run -A tests/bench/profile_summary.ts <file.cpuprofile> [top]");
    Deno.exit(2);
  }
  console.log(summarise(JSON.parse(await Deno.readTextFile(file)), Number(top ?? 25)));
}
