/**
 * The relay's JSON API as the client calls it: same-origin, with the
 * session cookie, and errors in words a person can read.
 *
 * @module
 */
/** An error answer from the relay, in words a person can read. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
    this.name = "ApiError";
  }
}

/** Calls the relay's JSON API with the session cookie; throws {@linkcode ApiError}. */
export async function api<T = unknown>(
  path: string,
  init: { method?: string; body?: unknown } = {},
): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, {
      method: init.method ?? "GET",
      credentials: "same-origin",
      headers: init.body !== undefined ? { "content-type": "application/json" } : {},
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    });
  } catch {
    throw new ApiError(0, "network", "Cannot reach the relay. Check your connection.");
  }
  const text = await res.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // Not JSON: fall through to the status-based message.
  }
  if (!res.ok) {
    const err =
      (data as { error?: { code?: string; message?: string }; message?: string; code?: string }) ??
        {};
    const code = err.error?.code ?? err.code ?? `http_${res.status}`;
    const message = err.error?.message ?? err.message ?? `The relay answered ${res.status}`;
    throw new ApiError(res.status, String(code).toLowerCase(), message);
  }
  return data as T;
}
