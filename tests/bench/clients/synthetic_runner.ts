/**
 * A synthetic runner daemon: speaks the control protocol (hello, welcome,
 * requests, events, acks) like `runner/daemon.ts`, with no workers behind
 * it. Spawn requests succeed at once; events are whatever the caller sends.
 *
 * @module
 */
import { RUNNER_WS_PATH } from "../../../shared/protocol.ts";
import { runnerHello } from "../../harness/fake_runner.ts";
import { TcpWebSocket } from "./tcp_ws.ts";

/** Options of {@linkcode SyntheticRunner.connect}. */
export interface SyntheticRunnerOptions {
  /** The relay's HTTP base URL. */
  url: string;
  apiKey: string;
  runnerId?: string;
  name?: string;
}

/** The relay end of a runner, seen from a fake daemon. */
export class SyntheticRunner {
  /** Highest acknowledged seq per session. */
  readonly acked = new Map<string, number>();
  /** Called for every ack (after `acked` is updated). */
  onAck: (sessionId: string, seq: number) => void = () => {};

  private constructor(readonly ws: TcpWebSocket, readonly runnerId: string) {}

  /** Resolves with the close code once the connection is gone. */
  get closed(): Promise<number> {
    return this.ws.closed;
  }

  /**
   * Dials the relay, says hello and resolves once welcomed. The socket is
   * the bench's publisher client (see tcp_ws.ts), not the daemon's npm:ws:
   * the same TCP_NODELAY for less of the load generator's CPU.
   */
  static async connect(options: SyntheticRunnerOptions): Promise<SyntheticRunner> {
    const runnerId = options.runnerId ?? `bench-${crypto.randomUUID().slice(0, 8)}`;
    const ws = await TcpWebSocket.connect(options.url.replace(/^http/, "ws") + RUNNER_WS_PATH);
    const runner = new SyntheticRunner(ws, runnerId);
    return new Promise((resolve, reject) => {
      ws.closed.then((code) => reject(new Error(`Runner socket closed: ${code}`)));
      ws.onmessage = (text) => {
        const msg = JSON.parse(text);
        if (msg.t === "welcome") resolve(runner);
        else if (msg.t === "error") reject(new Error(`Relay refused the runner: ${msg.message}`));
        runner.#handle(msg);
      };
      ws.send(JSON.stringify(runnerHello(options.apiKey, runnerId, {
        name: options.name ?? runnerId,
        version: "bench",
        platform: Deno.build.os,
      })));
    });
  }

  /** Sends one raw frame (an `events` message built by the caller). */
  send(frame: string): void {
    this.ws.send(frame);
  }

  close(): void {
    this.ws.close(1000, "Bench done");
  }

  #handle(msg: { t: string; [k: string]: unknown }): void {
    switch (msg.t) {
      case "ack": {
        const sessionId = msg.sessionId as string;
        const seq = msg.seq as number;
        this.acked.set(sessionId, seq);
        this.onAck(sessionId, seq);
        return;
      }
      case "req": {
        const data = msg.data as { cwd?: string | null } | undefined;
        const answer = msg.op === "spawn"
          ? { cwd: data?.cwd || "/tmp" }
          : msg.op === "models"
          ? { models: [] }
          : {};
        this.ws.send(JSON.stringify({ t: "res", id: msg.id, ok: true, data: answer }));
        return;
      }
    }
  }
}

/** Starts a session on a (synthetic) runner through the HTTP API; returns its id. */
export async function spawnSession(
  url: string,
  apiKey: string,
  runnerId: string,
  prompt = "bench",
): Promise<string> {
  const res = await fetch(`${url}/api/runners/spawn`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ runnerId, prompt, cwd: "/tmp" }),
  });
  if (!res.ok) throw new Error(`Spawn failed: ${res.status} ${await res.text()}`);
  return (await res.json()).sessionId;
}
