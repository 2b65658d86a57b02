import assert from "node:assert/strict";
import { join } from "node:path";
import { checkedFileOperations, imageType, type OpenCheck } from "./checked_files.ts";

const linux = Deno.build.os === "linux";

/** A project folder the policy lets the tools write, and a secret folder it hides. */
async function withFolders(
  fn: (
    dirs: { project: string; secret: string; key: string },
    refused: string[],
    check: OpenCheck,
  ) => Promise<void>,
): Promise<void> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "baton-checked-" }));
  const project = join(root, "project");
  const secret = join(root, "secret");
  await Deno.mkdir(project);
  await Deno.mkdir(secret);
  const key = join(secret, "id_rsa");
  await Deno.writeTextFile(key, "PRIVATE KEY");
  const refused: string[] = [];
  const check: OpenCheck = (op, path) => {
    const why = path === secret || path.startsWith(secret + "/")
      ? `Sandbox: ${op === "read" ? "reading" : "writing"} '${secret}' is denied`
      : op === "write" && !path.startsWith(project + "/")
      ? `Sandbox: writes are allowed only in ${project}`
      : null;
    if (why) refused.push(`${op} ${path}`);
    return why;
  };
  try {
    await fn({ project, secret, key }, refused, check);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

Deno.test({
  name: "a read through a symlink, or a symlinked folder, to a hidden file is refused",
  ignore: !linux,
  async fn() {
    await withFolders(async ({ project, secret, key }, refused, check) => {
      const ops = checkedFileOperations(check);
      await Deno.symlink(key, join(project, "k"));
      await Deno.symlink(secret, join(project, "dir"));
      for (const path of [join(project, "k"), join(project, "dir", "id_rsa"), key]) {
        await assert.rejects(ops.read.readFile(path), /reading '.*secret' is denied/, path);
        await assert.rejects(ops.read.access(path), /is denied/, path);
        await assert.rejects(ops.edit.readFile(path), /is denied/, path);
      }
      assert.equal(refused.length, 9);
      assert.ok(refused.every((r) => r === `read ${key}`), refused.join("\n"));
    });
  },
});

Deno.test({
  name: "a write through a symlink is checked at its target and changes nothing when refused",
  ignore: !linux,
  async fn() {
    await withFolders(async ({ project, secret, key }, _refused, check) => {
      const ops = checkedFileOperations(check);
      // To an existing hidden file: not truncated, not written.
      await Deno.symlink(key, join(project, "k"));
      await assert.rejects(ops.write.writeFile(join(project, "k"), "x"), /is denied/);
      await assert.rejects(ops.edit.writeFile(join(project, "k"), "x"), /is denied/);
      assert.equal(await Deno.readTextFile(key), "PRIVATE KEY");
      // A dangling link into the hidden folder: the file is not created.
      await Deno.symlink(join(secret, "authorized_keys"), join(project, "new"));
      await assert.rejects(ops.write.writeFile(join(project, "new"), "x"), /is denied/);
      // A folder swapped for a link to the hidden one.
      await Deno.symlink(secret, join(project, "sub"));
      await assert.rejects(ops.write.writeFile(join(project, "sub", "planted"), "x"), /is denied/);
      // A chain of links that ends outside the writable folder.
      await Deno.symlink(join(project, "hop2"), join(project, "hop1"));
      await Deno.symlink("../outside.txt", join(project, "hop2"));
      await assert.rejects(ops.write.writeFile(join(project, "hop1"), "x"), /allowed only in/);
      assert.deepEqual([...Deno.readDirSync(secret)].map((e) => e.name), ["id_rsa"]);
      assert.equal(Deno.statSync(join(project, "..")).isDirectory, true);
      assert.throws(() => Deno.statSync(join(project, "..", "outside.txt")), Deno.errors.NotFound);
      // mkdir -p through the linked folder makes nothing in the hidden one.
      await assert.rejects(ops.write.mkdir(join(project, "sub", "a", "b")), /is denied/);
      assert.deepEqual([...Deno.readDirSync(secret)].map((e) => e.name), ["id_rsa"]);
    });
  },
});

Deno.test({
  name: "allowed reads, writes, edits and folders work as pi's own operations do",
  ignore: !linux,
  async fn() {
    await withFolders(async ({ project }, refused, check) => {
      const ops = checkedFileOperations(check);
      await ops.write.mkdir(join(project, "a", "b", "c"));
      const file = join(project, "a", "b", "c", "note.txt");
      await ops.write.writeFile(file, "héllo world, a longer first line\n");
      await ops.write.writeFile(file, "short\n"); // Shorter: the old tail is gone.
      assert.equal(await Deno.readTextFile(file), "short\n");
      assert.equal((await ops.read.readFile(file)).toString("utf-8"), "short\n");
      await ops.edit.access(file);
      // A link inside the project is followed to its target, which is written.
      await Deno.symlink("a/b/c/note.txt", join(project, "link"));
      await ops.edit.writeFile(join(project, "link"), "via link\n");
      assert.equal(await Deno.readTextFile(file), "via link\n");
      assert.equal(Deno.lstatSync(join(project, "link")).isSymlink, true);
      // A file's mode is kept when it is written again.
      await Deno.chmod(file, 0o600);
      await ops.write.writeFile(file, "again\n");
      assert.equal(Deno.statSync(file).mode! & 0o777, 0o600);
      await assert.rejects(ops.read.readFile(join(project, "missing")), /ENOENT/);
      await assert.rejects(ops.read.readFile(join(project, "a")), /EISDIR/);
      assert.deepEqual(refused, []);
    });
  },
});

Deno.test("the tools read no device or pipe, which would never end", async () => {
  await withFolders(async ({ project }, _refused, check) => {
    const ops = checkedFileOperations(check);
    await assert.rejects(ops.read.readFile("/dev/zero"), /not a regular file/);
    await assert.rejects(ops.read.access("/dev/zero"), /not a regular file/);
    if (Deno.build.os === "windows") return;
    const fifo = join(project, "pipe");
    const made = await new Deno.Command("mkfifo", { args: [fifo] }).output();
    assert.equal(made.code, 0);
    // pi's own read of a named pipe waits for a writer forever.
    await assert.rejects(ops.read.readFile(fifo), /not a regular file/);
    await assert.rejects(ops.edit.writeFile(fifo, "x"), /not a regular file|ENXIO/);
  });
});

Deno.test({
  name: "a symlink flipped back and forth while the tools read never yields the hidden file",
  ignore: !linux,
  async fn() {
    await withFolders(async ({ project, key }, _refused, check) => {
      const ops = checkedFileOperations(check);
      await Deno.writeTextFile(join(project, "ok.txt"), "fine");
      const link = join(project, "x");
      // What a detached loop of the agent's bash would do while the gate checks and pi opens.
      const flipper = new Deno.Command("sh", {
        args: [
          "-c",
          `while :; do ln -sfn "${key}" "${link}"; ln -sfn ok.txt "${link}"; done`,
        ],
        stdout: "null",
        stderr: "null",
      }).spawn();
      let fine = 0;
      let refusedReads = 0;
      try {
        // Until both states were read a few times (a loaded machine flips slower).
        for (let i = 0; i < 5000 && (fine < 5 || refusedReads < 5); i++) {
          try {
            const text = (await ops.read.readFile(link)).toString("utf-8");
            assert.notEqual(text, "PRIVATE KEY", `read ${i} returned the key`);
            if (text === "fine") fine++;
          } catch (err) {
            if (!/is denied/.test(String(err))) continue; // ENOENT mid-swap
            refusedReads++;
          }
        }
      } finally {
        flipper.kill();
        await flipper.status;
      }
      // Both states were seen: the swap did race the reads.
      assert.ok(fine > 0 && refusedReads > 0, `fine ${fine}, refused ${refusedReads}`);
    });
  },
});

const havePython = linux &&
  new Deno.Command("sh", { args: ["-c", "command -v python3"] }).outputSync().success;

Deno.test({
  name: "a memory-only file of another process, reached through /proc/<pid>/fd, is not read",
  ignore: !havePython,
  async fn() {
    await withFolders(async (_dirs, _refused, check) => {
      const ops = checkedFileOperations(check);
      // A process holding a secret in a memfd (as a browser or a key agent may).
      const holder = new Deno.Command("python3", {
        args: [
          "-c",
          "import os,sys,time\nfd=os.memfd_create('k')\nos.write(fd,b'MEMFD-SECRET')\n" +
          "print(fd,flush=True)\ntime.sleep(60)",
        ],
        stdout: "piped",
        stderr: "null",
      }).spawn();
      try {
        const reader = holder.stdout.pipeThrough(new TextDecoderStream()).getReader();
        const fd = Number((await reader.read()).value!.trim());
        const path = `/proc/${holder.pid}/fd/${fd}`;
        assert.equal(await Deno.readTextFile(path), "MEMFD-SECRET", "the setup reads it plainly");
        await assert.rejects(ops.read.readFile(path), /cannot check .* not a file on disk/);
        await assert.rejects(ops.read.access(path), /not a file on disk/);
        reader.releaseLock();
      } finally {
        holder.kill();
        await holder.status;
        await holder.stdout.cancel().catch(() => {});
      }
    });
  },
});

Deno.test("images are told by their first bytes", () => {
  const b = (...x: number[]) => new Uint8Array(x);
  assert.equal(imageType(b(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0)), "image/png");
  assert.equal(imageType(b(0xff, 0xd8, 0xff, 0xe0)), "image/jpeg");
  assert.equal(imageType(new TextEncoder().encode("GIF89a....")), "image/gif");
  assert.equal(imageType(new TextEncoder().encode("RIFF\0\0\0\0WEBP")), "image/webp");
  assert.equal(imageType(new TextEncoder().encode("RIFF\0\0\0\0WAVE")), null);
  assert.equal(imageType(new TextEncoder().encode("hello")), null);
  assert.equal(imageType(b()), null);
});
