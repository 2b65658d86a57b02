import assert from "node:assert/strict";
import { forwardedAddress, prefersHtml } from "./_http.ts";

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

Deno.test("a browser's navigation prefers HTML; fetch, curl and JSON clients do not", () => {
  const chromium = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif," +
    "image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";
  const firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
  for (const accept of [chromium, firefox, "TEXT/HTML", "application/json;q=0.5, text/html"]) {
    assert.equal(prefersHtml(accept), true, accept);
  }
  const others = [
    null,
    "",
    "*/*",
    "application/json",
    "application/json, text/html",
    "text/html;q=0.5, application/json",
    "text/html;q=0",
    "text/html;q=abc",
    "text/*",
    ",,;",
  ];
  for (const accept of others) assert.equal(prefersHtml(accept), false, String(accept));
});
