import { type ServedRelay, serveRelay } from "../../relay/serve.ts";
import { tempDir } from "./procs.ts";

/** A relay served inside the test process on a free port, with a temporary data folder. */
export interface TestRelay extends ServedRelay {
  dataDir: string;
  /** Shuts the relay down and removes its data. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts a relay in-process (faster than a subprocess when no crash is simulated). */
export async function startTestRelay(
  options: { allowSignup?: boolean; eventBufferSize?: number; dataDir?: string } = {},
): Promise<TestRelay> {
  const dataDir = options.dataDir ?? await tempDir("baton-relay-");
  const logs: string[] = [];
  const served = await serveRelay({
    hostname: "127.0.0.1",
    port: 0,
    dataDir,
    allowSignup: options.allowSignup ?? false,
    eventBufferSize: options.eventBufferSize ?? 1000,
    log: (line) => logs.push(line),
  });
  return {
    ...served,
    dataDir,
    async [Symbol.asyncDispose]() {
      await served.shutdown();
      if (!options.dataDir) await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    },
  };
}
