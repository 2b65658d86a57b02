/**
 * Trigger definitions, subscription filters and the spec's matching rules,
 * shared by the relay (which evaluates them at delivery) and the runner
 * (which declares definitions).
 *
 * @module
 */

/** A parameter a trigger definition accepts in subscriptions and listeners. */
export interface TriggerParam {
  name: string;
  type: string;
  description?: string;
}

/** A trigger a service or the runner advertises. */
export interface TriggerDef {
  /** `<service>:<event_name>`. */
  type: string;
  label: string;
  description?: string;
  /** JSON Schema of the payload. */
  schema?: Record<string, unknown>;
  params: TriggerParam[];
}

/** One condition of a subscription (or webhook) on the trigger's payload. */
export interface TriggerFilter {
  /** Dot-path into the payload, e.g. `pull_request.base.ref`. */
  field: string;
  /** A scalar, or an array meaning "any of these". */
  value: string | number | boolean | (string | number | boolean)[];
  op?: "eq" | "contains";
}

export type FilterMode = "and" | "or";

/** The type format of trigger definitions. */
export const TRIGGER_TYPE = /^[a-z0-9][a-z0-9_.-]{0,63}:[a-zA-Z0-9_.-]{1,128}$/;

/** The value at a dot-path (`a.b.0.c`), or undefined. */
export function valueAt(payload: unknown, path: string): unknown {
  let cur: unknown = payload;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object") return undefined;
    if (!Object.hasOwn(cur as object, part)) return undefined;
    cur = (cur as Record<string, unknown>)[part];
  }
  return cur;
}

function isScalar(v: unknown): v is string | number | boolean {
  return typeof v === "string" || typeof v === "number" || typeof v === "boolean";
}

/**
 * Loose equality of scalars, as a person reading JSON expects: "42" matches
 * 42 and "4.0" matches 4, "true" matches true; objects never match.
 */
export function looseEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (!isScalar(a) || !isScalar(b)) return false;
  if (String(a) === String(b)) return true;
  const [x, y] = [Number(a), Number(b)];
  return typeof a !== "boolean" && typeof b !== "boolean" && String(a).trim() !== "" &&
    String(b).trim() !== "" && !isNaN(x) && x === y;
}

function oneMatches(
  actual: unknown,
  want: string | number | boolean,
  op: "eq" | "contains",
): boolean {
  if (Array.isArray(actual)) return actual.some((a) => oneMatches(a, want, op));
  if (op === "contains") return typeof actual === "string" && actual.includes(String(want));
  return looseEqual(actual, want);
}

/** Whether one filter holds for the payload. An array value means any of its values. */
export function filterMatches(payload: unknown, f: TriggerFilter): boolean {
  const actual = valueAt(payload, f.field);
  if (actual === undefined) return false;
  const wanted = Array.isArray(f.value) ? f.value : [f.value];
  return wanted.some((w) => oneMatches(actual, w, f.op ?? "eq"));
}

/** Filters combined by `mode` (no filters: everything matches). */
export function filtersMatch(
  payload: unknown,
  filters: readonly TriggerFilter[] | undefined,
  mode: FilterMode = "and",
): boolean {
  if (!filters || filters.length === 0) return true;
  return mode === "or"
    ? filters.some((f) => filterMatches(payload, f))
    : filters.every((f) => filterMatches(payload, f));
}

/**
 * The spec's "param matching at delivery": a scalar param matches the payload
 * field of the same name by loose equality; an array payload field matches
 * if it contains the value; a param named `<field>Contains` matches as a
 * substring of the string field `<field>`. Every param must match.
 */
export function paramsMatch(
  payload: unknown,
  params: Record<string, unknown> | undefined,
): boolean {
  if (!params) return true;
  for (const [name, want] of Object.entries(params)) {
    if (want === undefined || want === null || want === "") continue;
    if (name.endsWith("Contains") && name.length > "Contains".length) {
      const field = valueAt(payload, name.slice(0, -"Contains".length));
      if (typeof field !== "string" || !field.includes(String(want))) return false;
      continue;
    }
    const actual = valueAt(payload, name);
    if (Array.isArray(actual)) {
      if (!actual.some((a) => looseEqual(a, want))) return false;
    } else if (!looseEqual(actual, want)) return false;
  }
  return true;
}

/**
 * Checks params against a definition: each must be declared, of a scalar
 * type matching the declared one. Returns a reason, or null when valid.
 */
export function invalidParams(def: TriggerDef, params: Record<string, unknown>): string | null {
  for (const [name, v] of Object.entries(params)) {
    const base = name.endsWith("Contains") ? name.slice(0, -"Contains".length) : name;
    const p = def.params.find((x) => x.name === name) ?? def.params.find((x) => x.name === base);
    if (!p) {
      const known = def.params.map((x) => x.name).join(", ") || "none";
      return `Unknown param for ${def.type}: '${name}' (known: ${known})`;
    }
    const type = name === p.name ? p.type : "string";
    const ok = type === "number"
      ? typeof v === "number" || (typeof v === "string" && v.trim() !== "" && !isNaN(Number(v)))
      : type === "boolean"
      ? typeof v === "boolean" || v === "true" || v === "false"
      : typeof v === "string" || typeof v === "number" || typeof v === "boolean";
    if (!ok) return `Param '${name}' must be a ${type}`;
  }
  return null;
}

/** Checks a trigger definition from a runner or service; returns a reason or null. */
export function invalidTriggerDef(d: unknown): string | null {
  const def = d as Partial<TriggerDef>;
  if (!def || typeof def !== "object") return "not an object";
  if (typeof def.type !== "string" || !TRIGGER_TYPE.test(def.type)) {
    return `type must look like '<service>:<event_name>': '${String(def.type).slice(0, 80)}'`;
  }
  if (def.label !== undefined && typeof def.label !== "string") return "label must be a string";
  if (def.params !== undefined) {
    if (!Array.isArray(def.params)) return "params must be an array";
    for (const p of def.params) {
      if (!p || typeof p.name !== "string" || typeof p.type !== "string") {
        return "each param needs a name and a type";
      }
    }
  }
  if (def.schema !== undefined && (typeof def.schema !== "object" || def.schema === null)) {
    return "schema must be an object";
  }
  return null;
}

/** A definition with defaults filled in. */
export function normalizeTriggerDef(d: Partial<TriggerDef> & { type: string }): TriggerDef {
  return {
    type: d.type,
    label: typeof d.label === "string" && d.label ? d.label : d.type,
    ...(typeof d.description === "string" ? { description: d.description } : {}),
    ...(d.schema && typeof d.schema === "object" ? { schema: d.schema } : {}),
    params: Array.isArray(d.params)
      ? d.params.map((p) => ({
        name: p.name,
        type: p.type,
        ...(typeof p.description === "string" ? { description: p.description } : {}),
      }))
      : [],
  };
}
