import assert from "node:assert/strict";
import {
  hiddenVariables,
  modelsJsonVariables,
  PROVIDER_KEY_VARIABLES,
  withoutHidden,
} from "./tool_env.ts";

const env = (vars: Record<string, string>) => (k: string) => vars[k];

Deno.test("models.json's variable names for keys and headers are hidden, literal keys and commands are not", () => {
  const models = {
    providers: {
      a: { apiKey: "MY_KEY", headers: { "x-team": "TEAM_TOKEN", "x-literal": "abc-def" } },
      b: { apiKey: "sk-literal-value" },
      c: { apiKey: "!op read 'op://vault/key'" },
      d: { apiKey: "UNSET_NAME" },
      e: "not a provider",
    },
  };
  const vars = env({ MY_KEY: "1", TEAM_TOKEN: "2", UNSET: "3", MODEL_HDR: "4", AUTH_KEY: "5" });
  assert.deepEqual(modelsJsonVariables(models, vars).sort(), ["MY_KEY", "TEAM_TOKEN"]);
  // A model's own headers, a model override's, and auth.json's credentials too.
  const deep = {
    providers: {
      p: {
        models: [{ id: "m", headers: { "x-a": "MODEL_HDR" } }],
        modelOverrides: { m: { headers: { "x-b": "TEAM_TOKEN" } } },
      },
    },
  };
  const auth = { anthropic: { type: "api_key", key: "AUTH_KEY" }, other: { key: "sk-literal" } };
  assert.deepEqual(modelsJsonVariables(deep, vars, auth).sort(), [
    "AUTH_KEY",
    "MODEL_HDR",
    "TEAM_TOKEN",
  ]);
  for (const bad of [null, [], "x", { providers: [] }, { providers: null }]) {
    assert.deepEqual(modelsJsonVariables(bad, vars), []);
  }
});

Deno.test("hiddenVariables: every provider's and models.json's, less what the global config exposes", () => {
  const models = { providers: { m: { apiKey: "MY_KEY" } } };
  const vars = env({ MY_KEY: "1" });
  const all = hiddenVariables({ models, global: {}, env: vars });
  for (const k of [...PROVIDER_KEY_VARIABLES, "MY_KEY"]) assert.ok(all.has(k), k);
  // General developer credentials are the user's tools' own.
  for (const k of ["GITHUB_TOKEN", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD"]) {
    assert.equal(all.has(k), false, k);
  }
  assert.equal(
    hiddenVariables({ models, global: { exposeProviderKeys: true }, env: vars }).size,
    0,
  );
  const some = hiddenVariables({
    models,
    global: { exposeProviderKeys: ["OPENAI_API_KEY", "MY_KEY", 7] },
    env: vars,
  });
  assert.equal(some.has("OPENAI_API_KEY"), false);
  assert.equal(some.has("MY_KEY"), false);
  assert.ok(some.has("ANTHROPIC_API_KEY"));
  // Anything else than true or a list hides them all.
  for (const expose of [false, "yes", 1, { OPENAI_API_KEY: true }]) {
    const h = hiddenVariables({ models, global: { exposeProviderKeys: expose }, env: vars });
    assert.equal(h.size, all.size);
  }
});

Deno.test("withoutHidden drops the hidden names and undefined values only", () => {
  assert.deepEqual(
    withoutHidden(
      { PATH: "/bin", OPENAI_API_KEY: "k", EMPTY: "", GONE: undefined },
      new Set(["OPENAI_API_KEY"]),
    ),
    { PATH: "/bin", EMPTY: "" },
  );
});
