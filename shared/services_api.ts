/**
 * Runner services on the wire: what a runner announces (`service_announce`),
 * what `GET /api/runners/{runnerId}/services` answers, and the sigil tokens
 * (`[[type:id key=val]]`) that the web client turns into pills.
 *
 * @module
 */

/** Kebab-case icon names (the manifest's `icon`). */
export const ICON_NAME = /^[a-z0-9]+(-[a-z0-9]+)*$/;
/** A service id: also the prefix of its trigger types (`<id>:<event>`). */
export const SERVICE_ID = /^[a-z0-9][a-z0-9_.-]{0,63}$/;
/** A sigil type (and alias): what comes before the colon of `[[type:id]]`. */
export const SIGIL_TYPE = /^[a-zA-Z][a-zA-Z0-9_.-]{0,63}$/;

/** Most services, panels or sigils one runner announces; the rest are dropped. */
export const MAX_SERVICES = 64;
export const MAX_SIGILS = 256;
/**
 * A sigil's params schema, as JSON: the relay keeps every runner's
 * definitions in memory and hands them to viewers and agents, so 256 of
 * them hold at most 1 MiB (not the 8 MiB a runner's message may carry).
 */
export const MAX_SIGIL_SCHEMA_BYTES = 4096;

/** A sigil definition (spec: Sigil definition), with the service that declared it. */
export interface SigilDef {
  type: string;
  label: string;
  description?: string;
  /** Path on the service's panel port with an `{id}` placeholder, e.g. `/api/notes/{id}`. */
  resolve?: string;
  /** JSON Schema of the params (`[[type:id key=val]]`): `properties` with `type`, `required`. */
  schema?: Record<string, unknown>;
  aliases?: string[];
  /** Kebab-case icon; the service's icon when absent. */
  icon?: string;
  /** The service that declared it (filled in by the runner). */
  serviceId?: string;
}

/** A panel a loaded service serves on a local port (reached through the tunnel). */
export interface PanelInfo {
  id: string;
  title: string;
  icon: string;
  port: number;
}

/** One discovered service, loaded or not. */
export interface ServiceInfo {
  id: string;
  label: string;
  icon: string;
  /** Where it was found: `home` (`~/.baton/services/`) or `plugin`. */
  source: "home" | "plugin";
  status: "running" | "failed";
  /** Why it failed (bad manifest, init threw, exited), when it did. */
  error?: string;
}

/** runner → relay after services load (and on every reconnect). */
export interface ServiceAnnouncePayload {
  triggerDefs: unknown[];
  panels: PanelInfo[];
  sigils: SigilDef[];
  services?: ServiceInfo[];
}

/** `GET /api/runners/{runnerId}/services`. */
export interface RunnerServicesResponse {
  serviceIds: string[];
  panels: { id: string; title: string; icon: string; port: number }[];
  sigils: SigilDef[];
  /** Every discovered service with its status (failed ones with the reason). */
  services: ServiceInfo[];
}

/** relay → viewer: a runner's services changed (it announced them again). */
export interface ServicesMessage {
  t: "services";
  runnerId: string;
  services: RunnerServicesResponse;
}

// ---------------------------------------------------------------------------
// Checking what a runner announces

function str(v: unknown, max: number): string | null {
  return typeof v === "string" && v.length > 0 && v.length <= max ? v : null;
}

/**
 * Whether a resolve path could leave its service's tunnel prefix once the
 * client puts it after `/api/tunnel/runner/{runnerId}/{port}` and fetches it
 * with the person's cookie: a `.` or `..` segment (or `%2e`, which URLs read
 * as a dot, or one that an id of dots completes), a backslash (read as `/`),
 * or `{id}` more than once (each `..` id would climb a level).
 */
function climbs(resolve: string): boolean {
  const path = resolve.split(/[?#]/)[0]!;
  if (path.includes("\\") || resolve.split("{id}").length > 2) return true;
  return path.split("/").some((segment) => {
    const t = segment.replace(/%2e/gi, ".");
    return /^\.+$/.test(t) || (t.includes("{id}") && /^\.+$/.test(t.replace("{id}", "")));
  });
}

/** A sigil definition as announced, or a reason it is refused. */
export function checkSigilDef(d: unknown): SigilDef | string {
  const o = d as Record<string, unknown> | null;
  if (!o || typeof o !== "object" || Array.isArray(o)) return "sigil is not an object";
  const type = str(o.type, 64);
  if (!type || !SIGIL_TYPE.test(type)) {
    return `sigil type must be a word: '${String(o.type).slice(0, 80)}'`;
  }
  const label = str(o.label, 100);
  if (!label) return `sigil '${type}' needs a label`;
  const out: SigilDef = { type, label };
  if (o.description !== undefined) {
    if (typeof o.description !== "string") return `sigil '${type}': description must be a string`;
    out.description = o.description.slice(0, 500);
  }
  if (o.resolve !== undefined) {
    const r = str(o.resolve, 500);
    if (!r || !r.startsWith("/") || !r.includes("{id}") || r.startsWith("//")) {
      return `sigil '${type}': resolve must be a path starting with / and holding {id}`;
    }
    if (climbs(r)) {
      return `sigil '${type}': resolve must hold {id} once and no '.' or '..' segment, nor '\\'`;
    }
    out.resolve = r;
  }
  if (o.schema !== undefined) {
    if (!o.schema || typeof o.schema !== "object" || Array.isArray(o.schema)) {
      return `sigil '${type}': schema must be an object`;
    }
    if (JSON.stringify(o.schema).length > MAX_SIGIL_SCHEMA_BYTES) {
      return `sigil '${type}': schema too large (over ${MAX_SIGIL_SCHEMA_BYTES} bytes of JSON)`;
    }
    out.schema = o.schema as Record<string, unknown>;
  }
  if (o.aliases !== undefined) {
    if (!Array.isArray(o.aliases) || o.aliases.some((a) => !str(a, 64) || !SIGIL_TYPE.test(a))) {
      return `sigil '${type}': aliases must be an array of words`;
    }
    out.aliases = (o.aliases as string[]).slice(0, 16);
  }
  if (o.icon !== undefined) {
    if (typeof o.icon !== "string" || !ICON_NAME.test(o.icon) || o.icon.length > 64) {
      return `sigil '${type}': icon must be a kebab-case name`;
    }
    out.icon = o.icon;
  }
  if (o.serviceId !== undefined) {
    if (typeof o.serviceId !== "string" || !SERVICE_ID.test(o.serviceId)) {
      return `sigil '${type}': bad serviceId`;
    }
    out.serviceId = o.serviceId;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Sigil tokens in agent output

/** One `[[type:id key=val]]` token found in text. */
export interface SigilToken {
  /** The whole token as written. */
  raw: string;
  type: string;
  id: string;
  params: Record<string, string>;
  /** Offset of the token in the text. */
  index: number;
}

/**
 * `[[type:id]]`, `[[type:id key=val key2="two words"]]`. The id is anything
 * but spaces, quotes and brackets; values are bare words or double-quoted.
 */
const TOKEN =
  /\[\[([a-zA-Z][a-zA-Z0-9_.-]{0,63}):([^\s"\[\]]{1,200})((?:\s+[a-zA-Z_][a-zA-Z0-9_-]{0,63}=(?:"[^"\]\n]{0,200}"|[^\s"\]]{1,200}))*)\s*\]\]/g;
const PARAM = /([a-zA-Z_][a-zA-Z0-9_-]{0,63})=(?:"([^"\]\n]*)"|([^\s"\]]+))/g;

/** The sigil tokens of `text`, in order (at most 200). */
export function findSigils(text: string): SigilToken[] {
  const out: SigilToken[] = [];
  if (!text.includes("[[")) return out;
  for (const m of text.matchAll(TOKEN)) {
    const params: Record<string, string> = {};
    for (const p of (m[3] ?? "").matchAll(PARAM)) params[p[1]!] = p[2] ?? p[3] ?? "";
    out.push({ raw: m[0], type: m[1]!, id: m[2]!, params, index: m.index! });
    if (out.length >= 200) break;
  }
  return out;
}

/** The definition a token's type names (its type or one of its aliases), if any. */
export function sigilDefFor(defs: readonly SigilDef[], type: string): SigilDef | undefined {
  return defs.find((d) => d.type === type) ?? defs.find((d) => d.aliases?.includes(type));
}

/**
 * Checks a token's params against the definition's schema (`properties` with
 * `type` string/number/integer/boolean, optional `enum`, and `required`);
 * returns the reason they do not fit, or null. Unknown params are refused
 * when the schema says `additionalProperties: false`.
 */
export function invalidSigilParams(def: SigilDef, params: Record<string, string>): string | null {
  const schema = def.schema;
  if (!schema) return null;
  const props = (schema.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = Array.isArray(schema.required) ? schema.required as string[] : [];
  for (const r of required) {
    if (!(r in params)) return `Missing param '${r}'`;
  }
  for (const [k, v] of Object.entries(params)) {
    const p = props[k];
    if (!p) {
      if (schema.additionalProperties === false) return `Unknown param '${k}'`;
      continue;
    }
    const t = p.type;
    if ((t === "number" || t === "integer") && (v.trim() === "" || isNaN(Number(v)))) {
      return `Param '${k}' must be a number`;
    }
    if (t === "integer" && !Number.isInteger(Number(v))) return `Param '${k}' must be an integer`;
    if (t === "boolean" && v !== "true" && v !== "false") {
      return `Param '${k}' must be true or false`;
    }
    if (Array.isArray(p.enum) && !p.enum.map(String).includes(v)) {
      return `Param '${k}' must be one of: ${p.enum.join(", ")}`;
    }
  }
  return null;
}

/** The display data a sigil's `resolve` endpoint answers (every field optional). */
export interface SigilResolved {
  title?: string;
  description?: string;
  status?: string;
  icon?: string;
}
