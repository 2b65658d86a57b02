/**
 * pi reads its own package.json when it loads (name, version, config folder
 * name), from the folder its module file sits in. The single-file bundle has
 * no such folder, so there the runner writes a copy of the fields pi reads
 * under `~/.baton/runtime/` and points `PI_PACKAGE_DIR` at it before pi
 * loads. A source tree and a compiled binary carry pi's package as it is.
 *
 * @module
 */
import { join } from "node:path";

/** What pi reads from its package.json (the rest of pi's package stays unread). */
export interface PiPackage {
  name: string;
  version: string;
  piConfig: { configDir: string };
}

/**
 * Writes pi's package.json under `<home>/.baton/runtime/` (once per version)
 * and sets `PI_PACKAGE_DIR` to its folder, unless it is set already.
 */
export function providePiPackage(home: string, version: string): string {
  const given = Deno.env.get("PI_PACKAGE_DIR");
  if (given) return given;
  const dir = join(home, ".baton", "runtime", `pi-coding-agent-${version}`);
  const pkg: PiPackage = {
    name: "@mariozechner/pi-coding-agent",
    version,
    piConfig: { configDir: ".pi" },
  };
  Deno.mkdirSync(dir, { recursive: true });
  Deno.writeTextFileSync(join(dir, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  Deno.env.set("PI_PACKAGE_DIR", dir);
  return dir;
}

/** pi's version from an import map entry (`npm:@mariozechner/pi-coding-agent@0.73.1`). */
export function piVersion(imports: Record<string, string>): string {
  const spec = imports["@mariozechner/pi-coding-agent"] ?? "";
  return spec.match(/@(\d[^/]*)$/)?.[1] ?? "0.0.0";
}
