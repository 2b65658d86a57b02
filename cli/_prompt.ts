/** Whether both stdin and stdout are terminals (so questions can be asked). */
export function interactive(): boolean {
  return Deno.stdin.isTerminal() && Deno.stdout.isTerminal();
}

const encoder = new TextEncoder();

/** Asks a question on the terminal and returns the answer line. */
export function ask(question: string, fallback = ""): string {
  const answer = prompt(question + (fallback ? ` [${fallback}]` : ""));
  return answer === null || answer.trim() === "" ? fallback : answer.trim();
}

/** Asks for a secret without echoing it. */
export async function askSecret(question: string): Promise<string> {
  await Deno.stdout.write(encoder.encode(question + " "));
  Deno.stdin.setRaw(true);
  const chars: string[] = [];
  const buf = new Uint8Array(64);
  try {
    outer: while (true) {
      const n = await Deno.stdin.read(buf);
      if (n === null) break;
      for (const ch of new TextDecoder().decode(buf.subarray(0, n))) {
        if (ch === "\r" || ch === "\n") break outer;
        if (ch === "\u0003") throw new Deno.errors.Interrupted("Cancelled");
        if (ch === "\u007f" || ch === "\b") chars.pop();
        else chars.push(ch);
      }
    }
  } finally {
    Deno.stdin.setRaw(false);
    await Deno.stdout.write(encoder.encode("\n"));
  }
  return chars.join("");
}

/** Reads all of stdin (for `--password-stdin`), without the final newline. */
export async function readStdin(): Promise<string> {
  const text = await new Response(Deno.stdin.readable).text();
  return text.replace(/\r?\n$/, "");
}
