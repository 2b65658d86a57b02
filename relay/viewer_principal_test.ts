import assert from "node:assert/strict";
import { CloseCode } from "../shared/protocol.ts";
import type { Principal } from "./auth.ts";
import { acceptViewerSocket, type ViewerHub } from "./viewer.ts";
import type { ChannelSocket } from "./ws_transport.ts";

const PRINCIPAL: Principal = {
  userId: "u1",
  email: "a@example.com",
  name: "A",
  via: "cookie",
  keyId: null,
  authSessionId: "b1",
  scope: "full",
  runnerId: null,
};

/** A viewer socket whose principal is checked by a lookup that answers when told. */
function world() {
  const sent: string[] = [];
  const closed: string[] = [];
  const subscribed: string[] = [];
  const reading: string[] = [];
  let state: number = WebSocket.OPEN;
  const socket: ChannelSocket = {
    pause: () => void reading.push("pause"),
    resume: () => void reading.push("resume"),
    get readyState() {
      return state;
    },
    bufferedAmount: 0,
    send: (data) => void sent.push(JSON.parse(data).t),
    close: (code, reason) => {
      state = WebSocket.CLOSING;
      closed.push(`${code} ${reason}`);
    },
    onmessage: null,
    onclose: null,
    onerror: null,
  };
  const hub = {
    addViewer() {},
    removeViewer() {},
    subscribe(_v: unknown, sessionId: string) {
      subscribed.push(sessionId);
      return Promise.resolve({});
    },
    log() {},
  } as unknown as ViewerHub;
  let answer!: (live: boolean) => void;
  acceptViewerSocket(socket, {
    hub,
    principal: PRINCIPAL,
    principalFromKey: () => Promise.resolve(null),
    principalLive: () => new Promise((resolve) => answer = resolve),
  });
  const message = (msg: Record<string, unknown>) =>
    socket.onmessage!({ data: JSON.stringify(msg) });
  return {
    sent,
    closed,
    subscribed,
    reading,
    message,
    answer: (live: boolean) => answer(live),
  };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("messages sent while the viewer's principal is checked wait for the check, in order", async () => {
  const w = world();
  w.message({ t: "subscribe", sessionId: "s1" });
  w.message({ t: "subscribe", sessionId: "s2" });
  await settled();
  assert.deepEqual(w.sent, [], "nothing before the check");
  assert.deepEqual(w.subscribed, []);
  w.answer(true);
  await settled();
  assert.deepEqual(w.closed, []);
  assert.deepEqual(w.sent, ["hello"]);
  assert.deepEqual(w.subscribed, ["s1", "s2"]);
});

Deno.test("a viewer whose browser session ended before its socket opened is closed, its messages unread", async () => {
  const w = world();
  w.message({ t: "subscribe", sessionId: "s1" });
  w.answer(false);
  await settled();
  assert.deepEqual(w.closed, [`${CloseCode.revoked} Signed out or key revoked`]);
  assert.deepEqual(w.sent, []);
  assert.deepEqual(w.subscribed, []);
});

Deno.test("a flood while the principal is checked stops the socket's reading, and all of it is handled after", async () => {
  const w = world();
  for (let i = 0; i < 1000; i++) w.message({ t: "subscribe", sessionId: `s${i}` });
  await settled();
  assert.deepEqual(w.reading, ["pause"], "reading stopped while the check holds the queue");
  assert.deepEqual(w.subscribed, []);
  w.answer(true);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(w.reading, ["pause", "resume"]);
  assert.equal(w.subscribed.length, 1000);
  assert.deepEqual(w.subscribed.slice(0, 3), ["s0", "s1", "s2"]);
  assert.equal(w.subscribed.at(-1), "s999");
});
