/**
 * The module boundaries of docs/architecture.md, checked over the source:
 * which role may import which, that the CLI goes through each role's
 * `mod.ts`, that `relay/` has no import circle, and that unit tests beside
 * the code do not lean on the integration harness.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { REPOSITORIES } from "../relay/store/contract.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const ROLES = ["relay", "runner", "shared", "web", "cli"] as const;
type Role = typeof ROLES[number];

/** Source file (relative to the root, `/`-separated) → files it imports (same form). */
type Graph = Map<string, string[]>;

/** What each role must not import. */
const FORBIDDEN: Record<Role, Role[]> = {
  relay: ["runner", "web", "cli"],
  runner: ["relay", "web", "cli"],
  shared: ["relay", "runner", "web", "cli"],
  web: ["relay", "runner", "cli"],
  cli: [],
};

const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g;

async function sourceGraph(): Promise<Graph> {
  const graph: Graph = new Map();
  async function walk(dir: string): Promise<void> {
    for await (const entry of Deno.readDir(join(ROOT, dir))) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) {
        if (entry.name === "dist" || entry.name === "node_modules") continue;
        await walk(path);
      } else if (/\.tsx?$/.test(entry.name)) {
        graph.set(path, importsOf(path, await Deno.readTextFile(join(ROOT, path))));
      }
    }
  }
  for (const role of ROLES) await walk(role);
  graph.set("main.ts", importsOf("main.ts", await Deno.readTextFile(join(ROOT, "main.ts"))));
  return graph;
}

/** The relative imports of one file, as root-relative paths. */
function importsOf(file: string, text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(SPECIFIER)) {
    const spec = m[1] ?? m[2]!;
    if (!spec.startsWith(".")) continue;
    out.push(relative(ROOT, resolve(ROOT, dirname(file), spec)).replaceAll("\\", "/"));
  }
  return out;
}

function roleOf(path: string): string {
  return path.split("/")[0]!;
}

/** Every import that crosses a boundary it must not, one line each. */
function boundaryBreaks(graph: Graph): string[] {
  const breaks: string[] = [];
  for (const [from, targets] of graph) {
    const role = roleOf(from) as Role;
    for (const to of targets) {
      const target = roleOf(to);
      if (FORBIDDEN[role]?.includes(target as Role)) breaks.push(`${from} → ${to}`);
      if (role === "cli" && target !== "cli" && ROLES.includes(target as Role)) {
        if (to !== `${target}/mod.ts`) {
          breaks.push(`${from} → ${to} (not through ${target}/mod.ts)`);
        }
      }
      if (/_test\.tsx?$/.test(from) && role !== ("tests" as string) && to.startsWith("tests/")) {
        breaks.push(`${from} → ${to} (a unit test uses the integration harness)`);
      }
    }
  }
  return breaks;
}

/** One import circle among the files under `dir`, or null. */
function findCircle(graph: Graph, dir: string): string[] | null {
  const inside = (p: string) => p.startsWith(`${dir}/`) && !/_test\.tsx?$/.test(p);
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  function visit(node: string): string[] | null {
    state.set(node, "open");
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!inside(next)) continue;
      if (state.get(next) === "open") return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(node, "done");
    return null;
  }
  for (const node of graph.keys()) {
    if (inside(node) && !state.has(node)) {
      const found = visit(node);
      if (found) return found;
    }
  }
  return null;
}

Deno.test("module boundaries hold across the source tree", async (t) => {
  const graph = await sourceGraph();

  await t.step("the checks see a broken rule when there is one", () => {
    const bad: Graph = new Map([
      ["relay/a.ts", ["relay/b.ts", "runner/daemon.ts"]],
      ["relay/b.ts", ["relay/a.ts"]],
      ["shared/x.ts", ["web/app/store.ts"]],
      ["cli/y.ts", ["relay/hub.ts", "relay/mod.ts"]],
      ["runner/z_test.ts", ["tests/harness/wait.ts"]],
    ]);
    assert.deepEqual(boundaryBreaks(bad), [
      "relay/a.ts → runner/daemon.ts",
      "shared/x.ts → web/app/store.ts",
      "cli/y.ts → relay/hub.ts (not through relay/mod.ts)",
      "runner/z_test.ts → tests/harness/wait.ts (a unit test uses the integration harness)",
    ]);
    assert.deepEqual(findCircle(bad, "relay"), ["relay/a.ts", "relay/b.ts", "relay/a.ts"]);
  });

  await t.step("the graph is read from the real files", () => {
    assert.ok(graph.size > 50, `only ${graph.size} files found`);
    assert.ok(graph.get("relay/mod.ts")?.includes("relay/app.ts"));
    assert.ok(graph.get("main.ts")?.includes("cli/relay.ts"), "dynamic imports are read too");
  });

  await t.step(
    "relay ↛ runner/web/cli, runner ↛ relay/web/cli, shared ↛ any role, web ↛ relay/runner/cli; cli only through mod.ts",
    () => {
      assert.deepEqual(boundaryBreaks(graph), []);
    },
  );

  await t.step("relay/ has no import circle (type imports included)", () => {
    assert.equal(findCircle(graph, "relay")?.join(" → ") ?? null, null);
  });

  await t.step("a relay module over 400 lines says at its top why it is that long", async () => {
    const long: string[] = [];
    for (const file of graph.keys()) {
      if (!file.startsWith("relay/") || /_test\.tsx?$/.test(file)) continue;
      const text = await Deno.readTextFile(join(ROOT, file));
      const lines = text.split("\n").length;
      const head = text.slice(0, 1500);
      if (lines > 400 && !/over 400 lines/i.test(head)) long.push(`${file} (${lines} lines)`);
    }
    assert.deepEqual(long, []);
  });

  await t.step(
    "a runner or shared module over 450 lines says at its top why it is that long",
    async () => {
      const long: string[] = [];
      for (const file of graph.keys()) {
        if (!/^(runner|shared)\//.test(file) || /_test\.tsx?$/.test(file)) continue;
        const text = await Deno.readTextFile(join(ROOT, file));
        const lines = text.split("\n").length;
        const head = text.slice(0, 1500);
        if (lines > 450 && !/over 450 lines/i.test(head)) long.push(`${file} (${lines} lines)`);
      }
      assert.deepEqual(long, []);
    },
  );

  await t.step("every role has a mod.ts", async () => {
    for (const role of ["relay", "runner", "shared", "web"]) {
      const text = await Deno.readTextFile(join(ROOT, role, "mod.ts"));
      assert.match(text, /@module/, `${role}/mod.ts has a @module comment`);
    }
  });
});

/** Deno's module graph from `root`: what its static imports load, and what only a dynamic one does. */
async function loadedAtStart(root: string): Promise<{ start: Set<string>; later: Set<string> }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", root],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    roots: string[];
    redirects?: Record<string, string>;
    modules: {
      specifier: string;
      dependencies?: { code?: { specifier: string }; isDynamic?: boolean }[];
    }[];
  };
  const deps = new Map(info.modules.map((m) => [m.specifier, m.dependencies ?? []]));
  const name = (s: string) => {
    const r = info.redirects?.[s] ?? s;
    return r.startsWith("file:") ? relative(ROOT, fileURLToPath(r)).replaceAll("\\", "/") : r;
  };
  const start = new Set<string>();
  const later = new Set<string>();
  const walk = (spec: string, dynamic: boolean) => {
    const resolved = info.redirects?.[spec] ?? spec;
    const into = dynamic ? later : start;
    if (start.has(name(resolved)) || into.has(name(resolved))) return;
    into.add(name(resolved));
    for (const d of deps.get(resolved) ?? []) {
      if (d.code) walk(d.code.specifier, dynamic || d.isDynamic === true);
    }
  };
  for (const r of info.roots) walk(r, false);
  for (const s of start) later.delete(s);
  return { start, later };
}

Deno.test("baton relay loads better-auth, the HTTP API, ws, prom-client, NATS and pg only on first use, and never the runner", async () => {
  // pg (the PostgreSQL client) only with a PostgreSQL URL (relay/relay_store.ts).
  // Each would be memory an idle relay holds for nothing (docs/performance.md,
  // "Idle relay memory"): better-auth ~30 MB, the API's routes with zod and
  // hono-openapi ~13 MB, ws ~3 MB, the runner's daemon (through cli/_args.ts
  // once) its WebSocket client and ~4 MB more.
  const { start, later } = await loadedAtStart("cli/relay.ts");
  const lazy =
    /^npm:\/(better-auth|@better-auth\/|@mariozechner\/|zod@|hono-openapi@|ws@|web-push@|@nats-io\/|pg(-[a-z]+)?@)/;
  const unwanted = [...start].filter((s) =>
    lazy.test(s) || s.startsWith("npm:/prom-client@") ||
    s.startsWith("runner/") || s.startsWith("relay/routes/") || s === "relay/api.ts" ||
    s === "relay/metrics_text.ts"
  );
  assert.deepEqual(unwanted, []);
  const firstUse = ["relay/_better_auth.ts", "relay/api.ts", "relay/routes/sessions.ts"];
  for (
    const module of [
      ...firstUse,
      "relay/metrics_text.ts",
      "relay/bus/nats_bus.ts",
      "relay/store/pg/mod.ts",
    ]
  ) {
    assert.ok(later.has(module), `${module} is still there to load on first use`);
  }
  // web-push (and its crypto helpers) comes with the first push notification.
  // prom-client (and the event-loop sampler) comes with the first scrape of /metrics.
  for (const pkg of ["better-auth@", "zod@", "hono-openapi@", "ws@", "web-push@", "prom-client@"]) {
    assert.ok([...later].some((s) => s.startsWith(`npm:/${pkg}`)), `${pkg} loads on first use`);
  }
});

Deno.test("no merge conflict markers are left in the source, styles or docs", async () => {
  // A marker that slipped through a merge and was then formatted (a CSS
  // file takes it as a selector) silently dropped every rule after it.
  const MARKER = /^\s*(<{7}|>{7}) |^\s*={7}\s*$/m;
  const found: string[] = [];
  async function walk(dir: string): Promise<void> {
    for await (const entry of Deno.readDir(join(ROOT, dir))) {
      const path = dir ? `${dir}/${entry.name}` : entry.name;
      if (entry.isDirectory) {
        if ([".git", "node_modules", "dist", "results"].includes(entry.name)) continue;
        await walk(path);
      } else if (/\.(tsx?|css|md|json|html|ya?ml|sh)$/.test(entry.name)) {
        if (MARKER.test(await Deno.readTextFile(join(ROOT, path)))) found.push(path);
      }
    }
  }
  await walk("");
  assert.deepEqual(found, []);
});

/**
 * The relay's store answers promises (relay/store/contract.ts): a call left
 * without `await` is a promise where a value was meant, and `if (!promise)`
 * or `promise?.field` pass the type check. Every call to a repository on an
 * expression ending in `store` must be awaited, returned or explicitly
 * dropped (`void`), and its result not used before it settles.
 */
const REPOSITORY_CALL = new RegExp(
  String.raw`(?<![\w$#.])(?:[\w$#]+\s*\??\.\s*)*#?store\s*\.\s*(?:${
    REPOSITORIES.join("|")
  })\s*\.\s*[\w$]+\s*\(`,
  "g",
);

/**
 * Calls that need no await, as `file: repo.method`, each with its reason.
 * (None so far: add one only with a comment that says why it is safe.)
 */
const UNAWAITED_ALLOWED = new Set<string>([]);

/** The repository calls in `text` that are not awaited, returned or voided, as `line: call`. */
function unawaitedStoreCalls(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(REPOSITORY_CALL)) {
    const at = m.index!;
    const lineStart = text.lastIndexOf("\n", at) + 1;
    const before = text.slice(lineStart, at);
    // In a comment: `// ...` before it on its line, or a JSDoc line.
    if (before.includes("//") || /^\s*\*/.test(before)) continue;
    // The token right before the call, past any `(` and `!`, across lines.
    const head = text.slice(0, at).replace(/[\s(!]+$/, "");
    // An arrow's body is its return value: the arrow's declared type checks it.
    const awaited = /(?<![\w$])(await|return|void)$|=>$/.test(head);
    // Its result used at once (`store.x.y().z`, `?.z`, `[i]`): a promise's, not the value's.
    let depth = 0;
    let end = at + m[0].length - 1;
    for (; end < text.length; end++) {
      if (text[end] === "(") depth++;
      else if (text[end] === ")" && --depth === 0) break;
    }
    // Handling the promise itself (`.catch(`, `.then(`, `.finally(`) is not using its value.
    const next = text.slice(end + 1, end + 40);
    const usedAtOnce = /^\s*(\?\.|\.|\[)/.test(next) &&
      !/^\s*\.\s*(catch|then|finally)\s*\(/.test(next);
    if (!awaited || usedAtOnce) {
      const line = text.slice(0, at).split("\n").length;
      found.push(`${line}: ${m[0].replace(/\s+/g, "")}`);
    }
  }
  return found;
}

Deno.test("every call to a store repository in relay/ is awaited, returned or voided", async (t) => {
  await t.step("the check sees an unawaited call when there is one", () => {
    const sample = [
      "const a = await this.#store.sessions.get(id);",
      "if (!store.sessions.get(id)) throw notFound();",
      "return this.store.keys.byHash(h);",
      "const p = (id) => opts.store.sessions.get(id)?.parentId ?? null;",
      "void store.keys.touch(id, now);",
      "if (!await this.#store.runners\n  .getOwned(u, r)) return;",
      "const n = await store.push.countOf(u).length;",
      "// store.sessions.get(id) in a comment",
      "const s = sessions.get(id); mystore.keys.touch(1);",
      "readLog: (id) => store.events.after(id, 0, 10),",
      "void store.runners.touch(id, now).catch(log);",
      "const r = store.sessions.get(id).then((s) => s?.title);",
    ].join("\n");
    assert.deepEqual(unawaitedStoreCalls(sample), [
      "2: store.sessions.get(",
      "4: opts.store.sessions.get(",
      "8: store.push.countOf(",
      "13: store.sessions.get(",
    ]);
  });

  await t.step("relay/ (outside relay/store/) awaits each one", async () => {
    const found: string[] = [];
    async function walk(dir: string): Promise<void> {
      for await (const entry of Deno.readDir(join(ROOT, dir))) {
        const path = `${dir}/${entry.name}`;
        if (entry.isDirectory) {
          if (path !== "relay/store") await walk(path);
        } else if (/\.tsx?$/.test(entry.name) && !/_test\.tsx?$/.test(entry.name)) {
          const text = await Deno.readTextFile(join(ROOT, path));
          for (const hit of unawaitedStoreCalls(text)) {
            const call = hit.match(/([\w$]+\.[\w$]+)\($/)![1];
            if (!UNAWAITED_ALLOWED.has(`${path}: ${call}`)) found.push(`${path}:${hit}`);
          }
        }
      }
    }
    await walk("relay");
    assert.deepEqual(found, []);
  });
});
