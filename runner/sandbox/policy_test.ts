import assert from "node:assert/strict";
import {
  applyModeOverride,
  checkAccess,
  deepMerge,
  domainCovers,
  mergeProjectConfig,
  resolveSandbox,
  SandboxConfigError,
  searchRefused,
  validateSandboxConfig,
} from "./policy.ts";
import type { SandboxConfig, SandboxMode } from "../../shared/sandbox_api.ts";

const ctx = { home: "/home/u", cwd: "/home/u/proj" };

Deno.test("project mode escalates and never weakens (merge table: mode)", async (t) => {
  const cases: [SandboxMode | undefined, SandboxMode | undefined, SandboxMode][] = [
    [undefined, undefined, "basic"],
    ["none", "basic", "basic"],
    ["none", "full", "full"],
    ["basic", "full", "full"],
    ["full", "basic", "full"],
    ["full", "none", "full"],
    ["basic", "none", "basic"],
    [undefined, "none", "basic"],
  ];
  for (const [g, p, want] of cases) {
    await t.step(`global ${g ?? "(default)"} + project ${p ?? "(unset)"} = ${want}`, () => {
      const global: SandboxConfig = g ? { mode: g } : {};
      const project: SandboxConfig = p ? { mode: p } : {};
      const merged = mergeProjectConfig(global, project, ctx);
      assert.equal(merged.mode ?? "basic", want);
    });
  }
});

Deno.test("deny lists and denied domains are the union (merge table)", () => {
  const merged = mergeProjectConfig(
    {
      filesystem: { denyRead: ["~/a"], denyWrite: ["x"] },
      network: { deniedDomains: ["evil.com"] },
    },
    {
      filesystem: { denyRead: ["~/b", "~/a"], denyWrite: ["y"] },
      network: { deniedDomains: ["worse.com"] },
    },
    ctx,
  );
  assert.deepEqual(merged.filesystem?.denyRead, ["~/a", "~/b"]);
  assert.deepEqual(merged.filesystem?.denyWrite, ["x", "y"]);
  assert.deepEqual(merged.network?.deniedDomains, ["evil.com", "worse.com"]);
});

Deno.test("allowWrite is the intersection: a project may only narrow it (merge table)", async (t) => {
  await t.step("both given: only the project's paths inside the global ones stay", () => {
    const m = mergeProjectConfig(
      { filesystem: { allowWrite: [".", "/tmp"] } },
      { filesystem: { allowWrite: ["src", "/etc", "/tmp/x"] } },
      ctx,
    );
    assert.deepEqual(m.filesystem?.allowWrite, ["src", "/tmp/x"]);
  });
  await t.step("global absent: the preset (cwd and /tmp) bounds the project", () => {
    const m = mergeProjectConfig({}, { filesystem: { allowWrite: ["/", "build"] } }, ctx);
    assert.deepEqual(m.filesystem?.allowWrite, ["build"]);
  });
  await t.step("project absent: the global list stays", () => {
    const m = mergeProjectConfig({ filesystem: { allowWrite: ["/data"] } }, {}, ctx);
    assert.deepEqual(m.filesystem?.allowWrite, ["/data"]);
  });
});

Deno.test("allowedDomains is the intersection: a project may only narrow it (merge table)", async (t) => {
  await t.step("both given", () => {
    const m = mergeProjectConfig(
      { mode: "full", network: { allowedDomains: ["*.github.com", "npmjs.org"] } },
      { network: { allowedDomains: ["api.github.com", "evil.com", "npmjs.org"] } },
      ctx,
    );
    assert.deepEqual(m.network?.allowedDomains, ["api.github.com", "npmjs.org"]);
  });
  await t.step("global full without a list admits nothing: the project cannot widen", () => {
    const m = mergeProjectConfig(
      { mode: "full" },
      { network: { allowedDomains: ["evil.com"] } },
      ctx,
    );
    assert.deepEqual(m.network?.allowedDomains, []);
  });
  await t.step("global basic (unrestricted): the project's list applies", () => {
    const m = mergeProjectConfig(
      {},
      { mode: "full", network: { allowedDomains: ["example.com"] } },
      ctx,
    );
    assert.equal(m.mode, "full");
    assert.deepEqual(m.network?.allowedDomains, ["example.com"]);
  });
});

Deno.test("keys outside the merge table come from the global config only", () => {
  const m = mergeProjectConfig(
    { network: { allowAllUnixSockets: false } },
    {
      network: { allowAllUnixSockets: true, allowLocalBinding: false },
      filesystem: { disabled: true },
      allowPty: true,
      failClosed: true,
    },
    ctx,
  );
  assert.equal(m.network?.allowAllUnixSockets, false);
  assert.equal(m.filesystem, undefined);
  assert.equal(m.allowPty, undefined);
  assert.equal(m.failClosed, true, "a project may turn failClosed on");
});

Deno.test("domain patterns cover subdomains, not siblings", () => {
  assert.ok(domainCovers("*.github.com", "api.github.com"));
  assert.ok(domainCovers("*.github.com", "*.api.github.com"));
  assert.ok(!domainCovers("*.github.com", "github.com"));
  assert.ok(!domainCovers("*.github.com", "evilgithub.com"));
  assert.ok(!domainCovers("github.com", "api.github.com"));
});

Deno.test("mode override: --sandbox over BATON_SANDBOX over the file; bad values refused", () => {
  assert.equal(applyModeOverride({ mode: "full" }, { env: "none" }).mode, "none");
  assert.equal(applyModeOverride({}, { flag: "full", env: "none" }).mode, "full");
  assert.equal(applyModeOverride({ mode: "full" }, {}).mode, "full");
  assert.throws(() => applyModeOverride({}, { flag: "strict" }), SandboxConfigError);
  const r = resolveSandbox({ mode: "full" }, {
    ...ctx,
    batonDir: "/home/u/.baton",
    noSandbox: true,
  });
  assert.equal(r.mode, "none");
  assert.equal(r.runtime, null);
});

Deno.test("validation refuses an unknown mode and non-string array entries", () => {
  assert.throws(() => validateSandboxConfig({ mode: "strict" }), /Invalid sandbox\.mode/);
  assert.throws(
    () => validateSandboxConfig({ filesystem: { denyRead: ["~/a", 3] } }),
    /filesystem\.denyRead\[1\] must be a string/,
  );
  assert.throws(
    () => validateSandboxConfig({ network: { allowedDomains: "x.com" } }),
    /must be an array/,
  );
  assert.throws(() => validateSandboxConfig([]), /must be an object/);
  assert.deepEqual(validateSandboxConfig(undefined), {});
  assert.deepEqual(validateSandboxConfig({ mode: "full", custom: { a: 1 } }), {
    mode: "full",
    custom: { a: 1 },
  });
});

Deno.test("deep merge: null removes, objects merge, arrays and scalars replace", () => {
  const base = { mode: "basic", filesystem: { denyRead: ["a"], allowWrite: ["."] }, x: 1 };
  const out = deepMerge(base, {
    mode: "full",
    filesystem: { denyRead: ["b"], allowWrite: null },
    x: null,
    network: { allowedDomains: [] },
  });
  assert.deepEqual(out, {
    mode: "full",
    filesystem: { denyRead: ["b"] },
    network: { allowedDomains: [] },
  });
  assert.deepEqual(base.filesystem.denyRead, ["a"], "the base is not changed");
});

Deno.test("basic protects the spec's paths and baton's secrets; full denies the network", () => {
  const o = { ...ctx, batonDir: "/home/u/.baton", protect: ["/srv/relay"], sshAuthSock: "/s" };
  const basic = resolveSandbox({}, o);
  assert.equal(basic.mode, "basic");
  const fs = basic.runtime!.filesystem as Record<string, string[]>;
  for (const p of ["/home/u/.ssh", "/home/u/.aws", "/home/u/.baton/config.json", "/srv/relay"]) {
    assert.ok(fs.denyRead!.includes(p), p);
  }
  assert.deepEqual(fs.allowWrite, ["/home/u/proj", "/tmp"]);
  assert.ok(fs.denyWrite!.includes("/home/u/proj/.env"));
  assert.ok(fs.denyWrite!.includes("/home/u/proj/.pi"), "a project's pi extensions");
  const net = basic.runtime!.network as Record<string, unknown>;
  assert.equal(net.allowedDomains, undefined, "basic leaves the network alone");
  assert.deepEqual(net.allowUnixSockets, ["/s"]);
  assert.equal(net.allowLocalBinding, true);

  const full = resolveSandbox({ mode: "full", network: { allowedDomains: ["x.com"] } }, o);
  assert.deepEqual((full.runtime!.network as Record<string, unknown>).allowedDomains, ["x.com"]);
  const none = resolveSandbox({ mode: "full" }, o);
  assert.deepEqual((none.runtime!.network as Record<string, unknown>).allowedDomains, []);
});

Deno.test("extra keys pass through as runtime overrides, on top of the preset", () => {
  const r = resolveSandbox({
    mandatoryDenySearchDepth: 2,
    ignoreViolations: { npm: ["/x"] },
    enableWeakerNestedSandbox: true,
    filesystem: { allowRead: ["~/.ssh/known_hosts"] },
  }, { ...ctx, batonDir: "/home/u/.baton" });
  assert.equal(r.runtime!.mandatoryDenySearchDepth, 2);
  assert.deepEqual(r.runtime!.ignoreViolations, { npm: ["/x"] });
  assert.equal(r.runtime!.enableWeakerNestedSandbox, true);
  const fs = r.runtime!.filesystem as Record<string, unknown>;
  assert.deepEqual(fs.allowRead, ["~/.ssh/known_hosts"]);
  assert.ok(Array.isArray(fs.denyRead));
});

Deno.test("the file tools may not read or write /proc; bash, with a /proc of its own, is not told", () => {
  const r = resolveSandbox({ filesystem: { allowWrite: ["/"] } }, { ...ctx, batonDir: "/b" });
  for (const p of ["/proc/self/environ", "/proc/1234/mem", "/proc"]) {
    assert.match(checkAccess(r.paths, "read", p)!, /reading '\/proc' is denied/, p);
    assert.match(checkAccess(r.paths, "write", p)!, /'\/proc' is denied/, p);
  }
  assert.equal(checkAccess(r.paths, "read", "/process/notes.txt"), null);
  const fs = r.runtime!.filesystem as Record<string, string[]>;
  assert.equal(fs.denyRead!.includes("/proc"), false);
  assert.deepEqual(resolveSandbox({ mode: "none" }, { ...ctx, batonDir: "/b" }).paths.denyRead, []);
});

Deno.test("searchRefused: a search may not cover a hidden path; a folder beside or inside one is fine", () => {
  const { paths } = resolveSandbox({}, { ...ctx, batonDir: "/home/u/.baton" });
  assert.match(
    searchRefused(paths, "/home/u")!,
    /searching '\/home\/u' would read '\/home\/u\/\.ssh'/,
  );
  assert.match(searchRefused(paths, "/")!, /which is denied/);
  assert.equal(searchRefused(paths, "/home/u/proj"), null);
  assert.equal(searchRefused(paths, "/home/u/.sshfs"), null);
});

Deno.test("checkAccess: a glob entry (the key hand-over files) covers what it names", () => {
  const { paths } = resolveSandbox({}, { ...ctx, batonDir: "/home/u/.baton" });
  const handover = "/home/u/.baton/runner/.handover-4f0e";
  assert.match(checkAccess(paths, "read", handover)!, /\.handover-\*' is denied/);
  assert.equal(checkAccess(paths, "read", "/home/u/.baton/runner/registry.json"), null);
});

Deno.test("checkAccess: reads under denied paths, writes outside cwd and /tmp refused", () => {
  const { paths } = resolveSandbox({}, { ...ctx, batonDir: "/home/u/.baton" });
  assert.match(checkAccess(paths, "read", "/home/u/.ssh/id_rsa")!, /reading '\/home\/u\/\.ssh'/);
  assert.equal(checkAccess(paths, "read", "/etc/hosts"), null);
  assert.match(checkAccess(paths, "read", "/home/u/.baton/config.json")!, /denied/);
  assert.equal(checkAccess(paths, "read", "/home/u/.baton/skills/x/SKILL.md"), null);
  assert.match(
    checkAccess(paths, "write", "/home/u/.baton/extensions/evil.ts")!,
    /writing '\/home\/u\/\.baton' is denied/,
  );
  assert.equal(checkAccess(paths, "write", "/home/u/proj/src/a.ts"), null);
  assert.equal(checkAccess(paths, "write", "/tmp/x"), null);
  assert.match(checkAccess(paths, "write", "/home/u/proj/.env")!, /writing/);
  assert.match(checkAccess(paths, "write", "/home/u/other.txt")!, /allowed only in/);
  assert.match(checkAccess(paths, "write", "/home/u/.ssh/authorized_keys")!, /denied/);
});
