/**
 * A synthetic runner daemon: speaks the control protocol (hello, welcome,
 * requests, events, acks) like `runner/daemon.ts`, with no workers behind
 * it. Spawn requests succeed at once; events are whatever the caller sends.
 *
 * @module
 */
import { PROTOCOL_VERSION, RUNNER_WS_PATH } from "../../../shared/protocol.ts";
import { openRelaySocket, type RelaySocket } from "../../../runner/relay_socket.ts";

/** Options of {@linkcode SyntheticRunner.connect}. */
export interface SyntheticRunnerOptions {
  /** The relay's HTTP base URL. */
  url: string;
  apiKey: string;
  runnerId?: string;
  name?: string;
  signal?: AbortSignal;
}

/** The relay end of a runner, seen from a fake daemon. */
export class SyntheticRunner {
  /** Highest acknowledged seq per session. */
  readonly acked = new Map<string, number>();
  /** Called for every ack (after `acked` is updated). */
  onAck: (sessionId: string, seq: number) => void = () => {};
  /** Resolves with the close code once the connection is gone. */
  readonly closed: Promise<number>;

  private constructor(readonly ws: RelaySocket, readonly runnerId: string) {
    this.closed = new Promise((resolve) => ws.once("close", resolve));
  }

  /** Dials the relay, says hello and resolves once welcomed. */
  static connect(options: SyntheticRunnerOptions): Promise<SyntheticRunner> {
    const runnerId = options.runnerId ?? `bench-${crypto.randomUUID().slice(0, 8)}`;
    // The daemon's own socket (see runner/relay_socket.ts for why not Deno's).
    const ws = openRelaySocket(options.url.replace(/^http/, "ws") + RUNNER_WS_PATH);
    const runner = new SyntheticRunner(ws, runnerId);
    return new Promise((resolve, reject) => {
      ws.onopen = () => {
        ws.send(JSON.stringify({
          t: "hello",
          v: PROTOCOL_VERSION,
          apiKey: options.apiKey,
          runnerId,
          name: options.name ?? runnerId,
          roots: [],
          version: "bench",
          platform: Deno.build.os,
          sessions: [],
        }));
      };
      ws.onerror = () => reject(new Error("Runner socket failed"));
      ws.onclose = (ev) => reject(new Error(`Runner socket closed: ${ev.code} ${ev.reason}`));
      ws.onmessage = (ev) => {
        const msg = JSON.parse(ev.data as string);
        if (msg.t === "welcome") {
          ws.onerror = null;
          ws.onclose = null;
          resolve(runner);
        } else if (msg.t === "error") reject(new Error(`Relay refused the runner: ${msg.message}`));
        runner.#handle(msg);
      };
    });
  }

  /** Sends one raw frame (an `events` message built by the caller). */
  send(frame: string): void {
    this.ws.send(frame);
  }

  get bufferedAmount(): number {
    return this.ws.bufferedAmount;
  }

  close(): void {
    if (this.ws.readyState < this.ws.CLOSING) this.ws.close(1000, "Bench done");
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
