import assert from "node:assert/strict";
import { join } from "node:path";
import { ManifestError, readManifest } from "./manifest.ts";

async function folder(files: Record<string, string>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "baton-manifest-" });
  for (const [name, text] of Object.entries(files)) {
    await Deno.mkdir(join(dir, name, ".."), { recursive: true });
    await Deno.writeTextFile(join(dir, name), text);
  }
  return dir;
}

const m = (o: unknown) => JSON.stringify(o);

Deno.test("readManifest fills in the spec's defaults", async () => {
  const dir = await folder({ "manifest.json": m({ id: "ci", label: "CI" }) });
  try {
    const got = await readManifest(dir);
    assert.equal(got.icon, "square");
    assert.equal(got.entry, join(dir, "index.ts"));
    // No panel folder, no panel.
    assert.equal(got.panelDir, null);
    assert.deepEqual(got.triggers, []);
    assert.deepEqual(got.sigils, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("readManifest takes the panel folder when it exists, or the one named", async (t) => {
  await t.step("./panel by default", async () => {
    const dir = await folder({
      "manifest.json": m({ id: "a", label: "A" }),
      "panel/index.html": "<p>hi</p>",
    });
    assert.equal((await readManifest(dir)).panelDir, join(dir, "panel"));
    await Deno.remove(dir, { recursive: true });
  });
  await t.step("panel.dir named, entry and icon given", async () => {
    const dir = await folder({
      "manifest.json": m({
        id: "a",
        label: "A",
        icon: "git-branch",
        entry: "./src/main.ts",
        panel: { dir: "./ui" },
      }),
    });
    const got = await readManifest(dir);
    assert.equal(got.panelDir, join(dir, "ui"));
    assert.equal(got.entry, join(dir, "src", "main.ts"));
    assert.equal(got.icon, "git-branch");
    await Deno.remove(dir, { recursive: true });
  });
});

Deno.test("split files override the inline arrays, as a bare array or under their key", async (t) => {
  const inline = { id: "s", label: "S", triggers: [{ type: "s:old" }], sigils: [{ type: "old" }] };
  await t.step("inline arrays without split files", async () => {
    const dir = await folder({ "manifest.json": m(inline) });
    const got = await readManifest(dir);
    assert.deepEqual(got.triggers, [{ type: "s:old" }]);
    assert.deepEqual(got.sigils, [{ type: "old" }]);
    await Deno.remove(dir, { recursive: true });
  });
  await t.step("bare arrays", async () => {
    const dir = await folder({
      "manifest.json": m(inline),
      "triggers.json": m([{ type: "s:new" }]),
      "sigils.json": m([{ type: "new", label: "New" }]),
    });
    const got = await readManifest(dir);
    assert.deepEqual(got.triggers, [{ type: "s:new" }]);
    assert.deepEqual(got.sigils, [{ type: "new", label: "New" }]);
    await Deno.remove(dir, { recursive: true });
  });
  await t.step("object form", async () => {
    const dir = await folder({
      "manifest.json": m(inline),
      "triggers.json": m({ triggers: [{ type: "s:obj" }] }),
      "sigils.json": m({ sigils: [] }),
    });
    const got = await readManifest(dir);
    assert.deepEqual(got.triggers, [{ type: "s:obj" }]);
    assert.deepEqual(got.sigils, []);
    await Deno.remove(dir, { recursive: true });
  });
  await t.step("a split file of the wrong shape is refused", async () => {
    const dir = await folder({ "manifest.json": m(inline), "sigils.json": m({ nope: [] }) });
    await assert.rejects(readManifest(dir), /sigils\.json must be an array or an object/);
    await Deno.remove(dir, { recursive: true });
  });
});

Deno.test("readManifest refuses what cannot work, naming the field", async (t) => {
  const cases: [string, Record<string, string>, RegExp][] = [
    ["no manifest", {}, /No manifest\.json/],
    ["invalid JSON", { "manifest.json": "{" }, /Invalid JSON/],
    ["not an object", { "manifest.json": "[]" }, /must hold an object/],
    ["no id", { "manifest.json": m({ label: "x" }) }, /'id'/],
    ["bad id", { "manifest.json": m({ id: "Has Space", label: "x" }) }, /'id'/],
    ["no label", { "manifest.json": m({ id: "x" }) }, /'label' is required/],
    ["bad icon", { "manifest.json": m({ id: "x", label: "x", icon: "Big Icon" }) }, /'icon'/],
    [
      "entry outside",
      { "manifest.json": m({ id: "x", label: "x", entry: "../../etc/x.ts" }) },
      /'entry' must stay inside/,
    ],
    [
      "panel outside",
      { "manifest.json": m({ id: "x", label: "x", panel: { dir: "/tmp" } }) },
      /'panel.dir' must stay inside/,
    ],
    [
      "triggers not array",
      { "manifest.json": m({ id: "x", label: "x", triggers: {} }) },
      /'triggers'/,
    ],
  ];
  for (const [name, files, re] of cases) {
    await t.step(name, async () => {
      const dir = await folder(files);
      try {
        await assert.rejects(readManifest(dir), (err: Error) => {
          assert.ok(err instanceof ManifestError, String(err));
          assert.match(err.message, re);
          return true;
        });
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
});
