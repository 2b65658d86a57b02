import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { WebSocketServer } from "ws";
import { MAX_WS_MESSAGE_BYTES } from "../shared/protocol.ts";
import { openRelaySocket } from "./relay_socket.ts";

Deno.test("the runner's socket closes with 1009 on a message from the relay over the channel's limit", async () => {
  const wss = new WebSocketServer({ noServer: true });
  const server = createServer();
  let told: (code: number) => void = () => {};
  const relaySaw = new Promise<number>((r) => told = r);
  server.on("upgrade", (req, socket, head) =>
    wss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("close", (code: number) => told(code));
      ws.send("x".repeat(MAX_WS_MESSAGE_BYTES - 16));
      ws.send("y".repeat(MAX_WS_MESSAGE_BYTES + 1));
    }));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const { port } = server.address() as AddressInfo;
    const socket = openRelaySocket(`ws://127.0.0.1:${port}/_runner`);
    const sizes: number[] = [];
    socket.on("message", (data: Buffer) => sizes.push(data.length));
    socket.on("error", () => {});
    await new Promise((r) => socket.on("close", r));
    assert.equal(await relaySaw, 1009, "the runner closed with 1009");
    assert.deepEqual(sizes, [MAX_WS_MESSAGE_BYTES - 16], "the message under the limit arrived");
  } finally {
    wss.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
