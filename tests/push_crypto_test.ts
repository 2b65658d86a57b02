/**
 * The test push service's own cryptography, checked against the RFCs before
 * it is trusted to judge the relay's messages.
 */
import assert from "node:assert/strict";
import { b64urlDecode, decryptPush, subscriberFrom, verifyVapid } from "./harness/push_service.ts";

Deno.test("the test push service decrypts RFC 8291 Appendix A's message", async () => {
  // RFC 8291, Appendix A (the user agent's keys and the final message body).
  const ua = await subscriberFrom(
    "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94",
    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
    "BTBZMqHH6r4Tts7J_aSIgg",
  );
  const body = b64urlDecode(
    "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6Tlz" +
      "AC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN",
  );
  const plain = await decryptPush(body, ua);
  assert.equal(new TextDecoder().decode(plain), "When I grow up, I want to be a watermelon");

  // One flipped bit anywhere in the ciphertext: refused, not garbage.
  const tampered = body.slice();
  tampered[tampered.length - 5]! ^= 1;
  await assert.rejects(decryptPush(tampered, ua));
});

Deno.test("the test push service checks a VAPID JWT's ES256 signature", async () => {
  const pair = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
  ]);
  const k = btoa(String.fromCharCode(
    ...new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey)),
  )).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const part = (o: unknown) =>
    btoa(JSON.stringify(o)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  const signed = `${part({ typ: "JWT", alg: "ES256" })}.${
    part({ aud: "https://push.example", exp: 1e10, sub: "mailto:a@b.c" })
  }`;
  const sig = new Uint8Array(
    await crypto.subtle.sign(
      { name: "ECDSA", hash: "SHA-256" },
      pair.privateKey,
      new TextEncoder().encode(signed),
    ),
  );
  const s = btoa(String.fromCharCode(...sig)).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
  const claims = await verifyVapid(`vapid t=${signed}.${s}, k=${k}`);
  assert.equal(claims.aud, "https://push.example");
  // Signed by one key, presented with another's.
  const other = await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, [
    "sign",
  ]);
  const k2 = btoa(String.fromCharCode(
    ...new Uint8Array(await crypto.subtle.exportKey("raw", other.publicKey)),
  )).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  await assert.rejects(verifyVapid(`vapid t=${signed}.${s}, k=${k2}`), /does not verify/);
});
