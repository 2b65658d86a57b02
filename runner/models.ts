/**
 * The models a runner offers: pi's registry, that is its built-in providers
 * with a key configured plus the providers of `~/.baton/models.json`.
 *
 * @module
 */
import { join } from "node:path";
import type { ModelInfo, ModelRef } from "../shared/protocol.ts";
import { RequestError } from "./control_link.ts";

async function modelRegistry(batonDir: string) {
  const { AuthStorage, ModelRegistry } = await import("@mariozechner/pi-coding-agent");
  const auth = AuthStorage.create(join(batonDir, "auth.json"));
  return ModelRegistry.create(auth, join(batonDir, "models.json"));
}

/** The models this runner can use right now (configured keys and custom providers). */
export async function listModels(
  batonDir: string,
): Promise<{ models: ModelInfo[]; error?: string }> {
  const registry = await modelRegistry(batonDir);
  const models = registry.getAvailable().map((m) => ({
    provider: m.provider,
    id: m.id,
    name: m.name,
    reasoning: m.reasoning,
    contextWindow: m.contextWindow,
  }));
  const error = registry.getError();
  return error ? { models, error } : { models };
}

/** Throws `unknown_model` unless the runner can use `model`. */
export async function assertModelKnown(batonDir: string, model: ModelRef): Promise<void> {
  if (typeof model.provider !== "string" || typeof model.id !== "string") {
    throw new RequestError("bad_request", "model must be {provider, id}");
  }
  const registry = await modelRegistry(batonDir);
  if (!registry.find(model.provider, model.id)) {
    throw new RequestError("unknown_model", `Unknown model: '${model.provider}/${model.id}'`);
  }
}
