import assert from "node:assert/strict";
import { join } from "node:path";
import { FileShapeError, readBounded, readBoundedText } from "./bounded_read.ts";

async function shape(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => null, (e) => e);
  assert.ok(err instanceof FileShapeError, `expected a FileShapeError, got ${err}`);
  return err.code;
}

Deno.test("readBounded reads a regular file up to its cap and refuses one past it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const f = join(dir, "a.json");
    await Deno.writeTextFile(f, "0123456789");
    assert.equal(await readBoundedText(f, 10), "0123456789");
    assert.equal(await shape(readBounded(f, 9)), "too_large");
    await Deno.writeTextFile(join(dir, "empty"), "");
    assert.equal((await readBounded(join(dir, "empty"), 4)).byteLength, 0);
    await assert.rejects(readBounded(join(dir, "missing"), 4), Deno.errors.NotFound);
    await assert.rejects(readBounded(join(f, "under-a-file"), 4), Deno.errors.NotFound);
    assert.equal(await shape(readBounded(dir, 4)), "not_a_file");
    if (Deno.uid() !== 0) {
      await Deno.chmod(f, 0);
      await assert.rejects(readBounded(f, 100), Deno.errors.PermissionDenied);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test({
  name: "readBounded refuses a device and a named pipe at once, and a link when told not to follow",
  ignore: Deno.build.os === "windows",
  async fn() {
    const dir = await Deno.makeTempDir();
    try {
      const zero = join(dir, "config.json");
      await Deno.symlink("/dev/zero", zero);
      // Read naively, this fills memory until the process dies.
      assert.equal(await shape(readBounded(zero, 1 << 20)), "not_a_file");
      const fifo = join(dir, "fifo");
      const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
      assert.ok(made.success);
      // Opened for reading without a writer, a pipe would wait for one for good.
      assert.equal(await shape(readBounded(fifo, 1 << 20)), "not_a_file");
      const real = join(dir, "real.txt");
      await Deno.writeTextFile(real, "hello");
      const link = join(dir, "link.txt");
      await Deno.symlink(real, link);
      assert.equal(await readBoundedText(link, 100), "hello");
      assert.equal(await shape(readBounded(link, 100, { noFollow: true })), "not_a_file");
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
