/**
 * Fallback HTTP load generator for machines without `wrk`: `connections`
 * concurrent fetch loops for `durationMs`. Slower than wrk (it shares the
 * cores with the server and does more per request), so its numbers are
 * only comparable with each other.
 *
 * @module
 */
import { emit } from "../_proc.ts";
import { Histogram } from "../_stats.ts";

const cfg = JSON.parse(Deno.args[0]!) as {
  url: string;
  headers: Record<string, string>;
  connections: number;
  durationMs: number;
};
const hist = new Histogram();
let ok = 0;
let bad = 0;
const end = performance.now() + cfg.durationMs;
await Promise.all(Array.from({ length: cfg.connections }, async () => {
  while (performance.now() < end) {
    const t = performance.now();
    const res = await fetch(cfg.url, { headers: cfg.headers });
    await res.arrayBuffer();
    hist.record(performance.now() - t);
    if (res.ok) ok++;
    else bad++;
  }
}));
emit("result", {
  requestsPerSec: ((ok + bad) / cfg.durationMs) * 1000,
  non2xx: bad,
  latency: hist.summary(),
});
