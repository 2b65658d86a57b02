/**
 * A scripted model server that speaks OpenAI's chat-completions wire format
 * (server-sent events), so the runner reaches it through the same
 * `models.json` configuration a user writes for Ollama or vLLM.
 *
 * @module
 */
import { join } from "node:path";

/** A tool call the scripted model makes. */
export interface ScriptedToolCall {
  name: string;
  args: Record<string, unknown>;
  id?: string;
}

/** One scripted model answer. */
export interface Turn {
  /** Text of the answer, streamed in the given pieces (a string is one piece). */
  text?: string | string[];
  /** Reasoning text streamed before the answer (as `reasoning_content`). */
  thinking?: string;
  toolCalls?: ScriptedToolCall[];
  /** Pause before each streamed piece, in milliseconds. */
  chunkDelayMs?: number;
  /** Holds the answer open after its text until this settles (an answer still streaming). */
  hold?: Promise<unknown>;
  /** Answer with this HTTP error instead of a stream. */
  error?: { status: number; message: string };
  usage?: { prompt: number; completion: number };
}

/** What the model was asked (the parsed request body). */
export interface ChatRequest {
  model: string;
  messages: { role: string; content: unknown; tool_calls?: unknown; tool_call_id?: string }[];
  tools?: { function: { name: string } }[];
  stream?: boolean;
}

/** Decides the answer to a request; return undefined to fall back to the queue. */
export type Responder = (req: ChatRequest, index: number) => Turn | undefined;

const encoder = new TextEncoder();

/** The model a runner offers once `writeModelsJson` has run (its default list). */
export const MODEL = { provider: "mock", id: "mock-1" };

/** A running mock model server. */
export class MockLlm {
  readonly requests: ChatRequest[] = [];
  /** The `Authorization` header of each chat request (the key the runner sent). */
  readonly authorizations: (string | null)[] = [];
  responder: Responder | null = null;
  readonly #queue: Turn[] = [];
  readonly #server: Deno.HttpServer<Deno.NetAddr>;
  readonly #waiters: { n: number; resolve: () => void }[] = [];

  private constructor() {
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (req) => this.#handle(req),
    );
  }

  /** Starts a server on a free port. */
  static start(): MockLlm {
    return new MockLlm();
  }

  /** Base URL for `models.json` (`http://127.0.0.1:<port>/v1`). */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.#server.addr.port}/v1`;
  }

  /** Queues answers, used in order by the next requests. */
  enqueue(...turns: Turn[]): void {
    this.#queue.push(...turns);
  }

  /** Resolves once `n` requests in total have arrived. */
  waitForRequests(n: number, timeoutMs = 20_000): Promise<void> {
    if (this.requests.length >= n) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`Mock model got ${this.requests.length} requests, wanted ${n}`)),
        timeoutMs,
      );
      this.#waiters.push({
        n,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /**
   * Writes `<home>/.baton/models.json` pointing provider `mock` at this
   * server, with the given model ids and `apiKey` (a literal key, or the
   * name of a variable pi reads it from).
   */
  async writeModelsJson(
    home: string,
    models: string[] = [MODEL.id],
    apiKey = "mock-key",
  ): Promise<void> {
    const dir = join(home, ".baton");
    await Deno.mkdir(dir, { recursive: true });
    await Deno.writeTextFile(
      join(dir, "models.json"),
      JSON.stringify(
        {
          providers: {
            mock: {
              baseUrl: this.baseUrl,
              api: "openai-completions",
              apiKey,
              compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
              models: models.map((id) => ({
                id,
                // A vision model, so attached images reach it as images.
                input: ["text", "image"],
                contextWindow: 100_000,
                maxTokens: 4096,
                cost: { input: 1, output: 2, cacheRead: 0, cacheWrite: 0 },
              })),
            },
          },
        },
        null,
        2,
      ),
    );
  }

  async close(): Promise<void> {
    await this.#server.shutdown();
  }

  async #handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname.endsWith("/models")) {
      return Response.json({ object: "list", data: [{ id: "mock-1", object: "model" }] });
    }
    if (!url.pathname.endsWith("/chat/completions") || req.method !== "POST") {
      return new Response("not found", { status: 404 });
    }
    const body = await req.json() as ChatRequest;
    const index = this.requests.length;
    this.requests.push(body);
    this.authorizations.push(req.headers.get("authorization"));
    for (const w of [...this.#waiters]) {
      if (this.requests.length >= w.n) {
        this.#waiters.splice(this.#waiters.indexOf(w), 1);
        w.resolve();
      }
    }
    const turn = this.responder?.(body, index) ?? this.#queue.shift() ?? { text: "OK." };
    if (turn.error) {
      return Response.json({ error: { message: turn.error.message, type: "mock_error" } }, {
        status: turn.error.status,
      });
    }
    return new Response(streamTurn(body.model, turn), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
    });
  }
}

function streamTurn(model: string, turn: Turn): ReadableStream<Uint8Array> {
  let cancelled = false;
  const id = `chatcmpl-${crypto.randomUUID()}`;
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
    id,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, delta, finish_reason: finish }],
  });
  return new ReadableStream({
    async start(controller) {
      const send = (obj: unknown) => {
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(obj)}\n\n`));
      };
      const pause = () =>
        turn.chunkDelayMs
          ? new Promise((r) => setTimeout(r, turn.chunkDelayMs))
          : Promise.resolve();
      try {
        send(chunk({ role: "assistant", content: "" }));
        if (turn.thinking) {
          await pause();
          send(chunk({ reasoning_content: turn.thinking }));
        }
        const pieces = turn.text === undefined
          ? []
          : Array.isArray(turn.text)
          ? turn.text
          : [turn.text];
        for (const piece of pieces) {
          await pause();
          if (cancelled) return;
          send(chunk({ content: piece }));
        }
        if (turn.hold) await turn.hold;
        if (cancelled) return;
        const calls = turn.toolCalls ?? [];
        for (const [i, call] of calls.entries()) {
          await pause();
          send(chunk({
            tool_calls: [{
              index: i,
              id: call.id ?? `call_${crypto.randomUUID().slice(0, 8)}`,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.args) },
            }],
          }));
        }
        send(chunk({}, calls.length > 0 ? "tool_calls" : "stop"));
        const usage = turn.usage ?? { prompt: 100, completion: 20 };
        send({
          id,
          object: "chat.completion.chunk",
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [],
          usage: {
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            total_tokens: usage.prompt + usage.completion,
          },
        });
        controller.enqueue(encoder.encode("data: [DONE]\n\n"));
        controller.close();
      } catch {
        // The client went away mid-stream (an abort): nothing more to send.
      }
    },
    cancel() {
      cancelled = true;
    },
  });
}
