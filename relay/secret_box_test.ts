import assert from "node:assert/strict";
import { SecretBox } from "./secret_box.ts";

Deno.test("sealed secrets open with the same relay secret only, and hide the plain text", async () => {
  const box = await SecretBox.fromSecret("relay-secret-".repeat(4), "webhooks");
  const sealed = await box.seal("0123abcd".repeat(8));
  assert.doesNotMatch(sealed, /0123abcd/);
  assert.notEqual(await box.seal("x"), await box.seal("x"), "a fresh IV each time");
  assert.equal(await box.open(sealed), "0123abcd".repeat(8));
  const other = await SecretBox.fromSecret("another-secret-".repeat(4), "webhooks");
  await assert.rejects(other.open(sealed));
  const tampered = sealed.slice(0, -4) + (sealed.endsWith("AAAA") ? "BBBB" : "AAAA");
  await assert.rejects(box.open(tampered));
});
