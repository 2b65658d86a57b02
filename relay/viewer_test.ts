import assert from "node:assert/strict";
import type { Principal } from "./auth.ts";
import type { Subscription } from "./fanout.ts";
import { acceptViewerSocket, type Viewer, type ViewerHub } from "./viewer.ts";
import type { ChannelSocket } from "./ws_transport.ts";

const principal = {
  userId: "u1",
  email: "a@b.c",
  name: "a",
  via: "cookie",
  keyId: null,
  authSessionId: "b1",
  scope: "full",
  runnerId: null,
} as unknown as Principal;

Deno.test("a viewer's messages are answered in the order they came while a subscribe waits for the store", async () => {
  const sent: { t: string; [k: string]: unknown }[] = [];
  const socket = {
    readyState: WebSocket.OPEN,
    bufferedAmount: 0,
    send: (f: string) => sent.push(JSON.parse(f)),
    close: () => {},
  } as unknown as ChannelSocket;
  const loads: (() => void)[] = [];
  const screens: string[] = [];
  const hub = {
    addViewer: () => {},
    removeViewer: () => {},
    // The session's row and log are read first (a round trip to the store).
    subscribe: (v: Viewer, sessionId: string) =>
      new Promise<Subscription>((resolve) =>
        loads.push(() => {
          const sub = { viewer: v, sessionId, sent: 0, live: true } as Subscription;
          v.subs.set(sessionId, sub);
          v.send({ t: "caught_up", sessionId, seq: 0 });
          resolve(sub);
        })
      ),
    unsubscribe: (sub: Subscription) => sub.viewer.subs.delete(sub.sessionId),
    screenChanged: (_v: Viewer, sessionId: string) => screens.push(sessionId),
    listRunners: () => Promise.resolve([]),
    listSessions: () => Promise.resolve([]),
    log: () => {},
  } as unknown as ViewerHub;
  acceptViewerSocket(socket, {
    hub,
    principal,
    principalFromKey: () => Promise.resolve(null),
    principalLive: () => Promise.resolve(true),
  });
  const say = (msg: unknown) => socket.onmessage!({ data: JSON.stringify(msg) } as MessageEvent);
  say({ t: "subscribe", sessionId: "s1", since: 0 });
  say({ t: "visibility", sessionId: "s1", visible: true });
  say({ t: "ping" });
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(sent.map((m) => m.t), ["hello"], "all wait for the subscription");
  loads.shift()!();
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(sent.map((m) => m.t), ["hello", "caught_up", "pong"], "no not_subscribed error");
  assert.deepEqual(screens, ["s1"], "the hub heard the session came on screen");
  // Nothing waiting: answered at once.
  say({ t: "ping" });
  assert.equal(sent.at(-1)?.t, "pong");
  say({ t: "unsubscribe", sessionId: "s1" });
  say({ t: "visibility", sessionId: "s1", visible: false });
  assert.equal(sent.at(-1)?.code, "not_subscribed", "after the unsubscribe, in order");
});
