/**
 * A service folder's `manifest.json` (spec: Service manifest), with the
 * optional split files `triggers.json` / `sigils.json` that override its
 * inline arrays (a bare array, or an object holding it under `triggers` /
 * `sigils`). Defaults: `icon` `square`, `entry` `./index.ts`, `panel.dir`
 * `./panel` (only when that folder exists, unless named explicitly).
 *
 * @module
 */
import { isAbsolute, join, relative, resolve } from "node:path";
import { ICON_NAME, SERVICE_ID } from "../../shared/services_api.ts";
import { FileShapeError, readBoundedText } from "../bounded_read.ts";

/** A manifest that cannot be used: the message says which field and why. */
export class ManifestError extends Error {
  override name = "ManifestError";
}

/** A checked manifest with its defaults filled in and paths resolved. */
export interface ServiceManifest {
  id: string;
  label: string;
  icon: string;
  /** The folder holding `manifest.json` (absolute). */
  dir: string;
  /** The entry module (absolute, inside `dir`). */
  entry: string;
  /** The static panel folder (absolute), or null for a service with no panel. */
  panelDir: string | null;
  /** Trigger definitions as written (the relay checks them). */
  triggers: unknown[];
  /** Sigil definitions as written (the relay checks them). */
  sigils: unknown[];
}

/** Largest manifest or split file read (a service's definitions are small). */
const MAX_FILE_BYTES = 256 * 1024;

async function readJson(path: string): Promise<unknown | undefined> {
  let text: string;
  try {
    text = await readBoundedText(path, MAX_FILE_BYTES);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    if (err instanceof FileShapeError) {
      throw new ManifestError(
        err.code === "too_large"
          ? `${path} is larger than ${MAX_FILE_BYTES} bytes`
          : `${path} is not a regular file`,
      );
    }
    throw err;
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ManifestError(
      `Invalid JSON in ${path}: ${err instanceof Error ? err.message : err}`,
    );
  }
}

/** A path from the manifest, resolved inside the service folder (or refused). */
function inside(dir: string, p: string, what: string): string {
  const full = resolve(dir, p);
  const rel = relative(dir, full);
  if (rel.startsWith("..") || isAbsolute(rel)) {
    throw new ManifestError(`${what} must stay inside the service folder: '${p}'`);
  }
  return full;
}

/** The array of a split file: `[...]` or `{<key>: [...]}`. */
function splitArray(value: unknown, key: string, path: string): unknown[] {
  if (Array.isArray(value)) return value;
  const inner = (value as Record<string, unknown> | null)?.[key];
  if (value && typeof value === "object" && Array.isArray(inner)) return inner;
  throw new ManifestError(`${path} must be an array or an object with a '${key}' array`);
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isDirectory;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** Reads and checks the service in `dir`; throws {@linkcode ManifestError} when it is unusable. */
export async function readManifest(dir: string): Promise<ServiceManifest> {
  dir = resolve(dir);
  const path = join(dir, "manifest.json");
  const raw = await readJson(path);
  if (raw === undefined) throw new ManifestError(`No manifest.json in ${dir}`);
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    throw new ManifestError(`${path} must hold an object`);
  }
  const m = raw as Record<string, unknown>;
  if (typeof m.id !== "string" || !SERVICE_ID.test(m.id)) {
    throw new ManifestError(
      `'id' must be lowercase letters, digits, '.', '_' or '-' (at most 64): '${
        String(m.id ?? "").slice(0, 80)
      }'`,
    );
  }
  if (typeof m.label !== "string" || m.label.trim() === "" || m.label.length > 100) {
    throw new ManifestError(`'label' is required (a string of at most 100 characters)`);
  }
  const icon = m.icon ?? "square";
  if (typeof icon !== "string" || !ICON_NAME.test(icon) || icon.length > 64) {
    throw new ManifestError(`'icon' must be a kebab-case name: '${String(icon).slice(0, 80)}'`);
  }
  const entryRaw = m.entry ?? "./index.ts";
  if (typeof entryRaw !== "string" || entryRaw === "") {
    throw new ManifestError(`'entry' must be a path`);
  }
  const entry = inside(dir, entryRaw, "'entry'");
  let panelDir: string | null = null;
  const panel = m.panel;
  if (panel !== undefined && panel !== null) {
    if (typeof panel !== "object" || Array.isArray(panel)) {
      throw new ManifestError(`'panel' must be an object like {"dir": "./panel"}`);
    }
    const pd = (panel as Record<string, unknown>).dir ?? "./panel";
    if (typeof pd !== "string" || pd === "") throw new ManifestError(`'panel.dir' must be a path`);
    panelDir = inside(dir, pd, "'panel.dir'");
  } else if (await isDir(join(dir, "panel"))) {
    panelDir = join(dir, "panel");
  }
  for (const key of ["triggers", "sigils"] as const) {
    if (m[key] !== undefined && !Array.isArray(m[key])) {
      throw new ManifestError(`'${key}' must be an array`);
    }
  }
  let triggers = (m.triggers as unknown[] | undefined) ?? [];
  let sigils = (m.sigils as unknown[] | undefined) ?? [];
  const tPath = join(dir, "triggers.json");
  const t = await readJson(tPath);
  if (t !== undefined) triggers = splitArray(t, "triggers", tPath);
  const sPath = join(dir, "sigils.json");
  const s = await readJson(sPath);
  if (s !== undefined) sigils = splitArray(s, "sigils", sPath);
  return { id: m.id, label: m.label.trim(), icon, dir, entry, panelDir, triggers, sigils };
}
