import assert from "node:assert/strict";
import { forwardedAddress } from "./_http.ts";

Deno.test("an X-Forwarded-For entry gives its address, without a port, or nothing", () => {
  assert.equal(forwardedAddress(" 203.0.113.9 "), "203.0.113.9");
  assert.equal(forwardedAddress("203.0.113.9:5123"), "203.0.113.9");
  assert.equal(forwardedAddress("2001:db8::1"), "2001:db8::1");
  assert.equal(forwardedAddress("[2001:db8::1]:443"), "2001:db8::1");
  assert.equal(forwardedAddress("[2001:db8::1]"), "2001:db8::1");
  assert.equal(forwardedAddress("::ffff:192.0.2.7"), "::ffff:192.0.2.7");
  for (const junk of ["", "unknown", "_hidden", "example.com", "1.2.3", "a.b.c.d:80", "[x]:1"]) {
    assert.equal(forwardedAddress(junk), null, junk);
  }
});
