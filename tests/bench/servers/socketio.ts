/**
 * Baseline (b): socket.io 4 on node:http. A publisher connects to the `/pub`
 * namespace and emits `events` with the frame text; the server broadcasts it
 * to every socket of the main namespace (`io.emit`, which encodes the packet
 * once for all of them), or, when the publisher names a room, to the sockets
 * that joined it (`?room=` on connect; `io.to(room).emit`).
 *
 * @module
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "socket.io";
import { emit, untilStopped } from "../_proc.ts";

const http = createServer();
const io = new Server(http, { serveClient: false, maxHttpBufferSize: 8 * 1024 * 1024 });
io.on("connection", (socket) => {
  const room = socket.handshake.query.room;
  if (typeof room === "string") socket.join(room);
});
io.of("/pub").on("connection", (socket) => {
  socket.on("events", (frame: string, room?: string) => {
    if (room) io.to(room).emit("events", frame);
    else io.emit("events", frame);
  });
});

await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", () => resolve()));
// Listening for the stop signal before saying so: a signal sent on that line
// would otherwise kill the process before its listener is in place.
const stopped = untilStopped();
emit("listening", { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}` });
await stopped;
io.close();
Deno.exit(0);
