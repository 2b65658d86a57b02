/**
 * A model as the client's selects hold it: the string `provider/id`, and
 * back to the reference the API takes (an id may itself hold slashes).
 *
 * @module
 */
import type { ModelRef } from "../../shared/protocol.ts";

/** `provider/id`, the value of a model's option. */
export function modelValue(m: ModelRef): string {
  return `${m.provider}/${m.id}`;
}

/** The reference a select's value stands for; null for "" (the runner's default). */
export function modelRef(value: string): ModelRef | null {
  const [provider, ...rest] = value ? value.split("/") : [];
  return provider ? { provider, id: rest.join("/") } : null;
}
