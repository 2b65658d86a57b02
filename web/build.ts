/**
 * Builds the web client into web/dist: the bundled app, its stylesheet and
 * the PNG icons. `deno task build:web`; the output is committed so the relay
 * serves it without a build step, and a test checks it is up to date.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { concatBytes } from "../shared/bytes.ts";

const WEB = dirname(fileURLToPath(import.meta.url));

/** Builds into `outDir` (default web/dist). */
export async function buildWeb(outDir = join(WEB, "dist")): Promise<void> {
  await Deno.mkdir(outDir, { recursive: true });
  await bundle(join(WEB, "app", "main.tsx"), join(outDir, "app.js"));
  // xterm.js apart: the terminal panel loads it on demand (components/terminal/).
  await bundle(
    join(WEB, "app", "components", "terminal", "xterm_entry.ts"),
    join(outDir, "xterm.js"),
  );
  const css = await Deno.readTextFile(join(WEB, "app", "styles.css"));
  await Deno.writeTextFile(join(outDir, "app.css"), minifyCss(css));
  const xtermCss = await Deno.readTextFile(await xtermCssPath());
  await Deno.writeTextFile(join(outDir, "xterm.css"), minifyCss(xtermCss));
  await Deno.writeFile(join(outDir, "icon-192.png"), await iconPng(192));
  await Deno.writeFile(join(outDir, "icon-512.png"), await iconPng(512));
}

/** Runs `deno bundle` on `entry` into `out`. */
async function bundle(entry: string, out: string): Promise<void> {
  const res = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "browser",
      "--minify",
      "--config",
      join(WEB, "app", "deno.json"),
      "-o",
      out,
      entry,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!res.success) {
    throw new Error(`deno bundle failed:\n${new TextDecoder().decode(res.stderr)}`);
  }
}

/** xterm's stylesheet in Deno's npm cache (the bundle above put the package there). */
async function xtermCssPath(): Promise<string> {
  const info = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  const { npmCache } = JSON.parse(new TextDecoder().decode(info.stdout));
  return join(npmCache, "registry.npmjs.org", "@xterm", "xterm", "6.0.0", "css", "xterm.css");
}

/** Drops comments and the whitespace around punctuation (enough for our own CSS). */
function minifyCss(css: string): string {
  return css
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\s+/g, " ")
    .replace(/\s*([{};,>])\s*/g, "$1")
    .replace(/;}/g, "}")
    .trim() + "\n";
}

/** The app icon (the same drawing as static/icon.svg) as a PNG of `size` pixels. */
async function iconPng(size: number): Promise<Uint8Array> {
  const px = new Uint8Array(size * size * 4);
  const r = size * 14 / 64;
  const c = size / 2;
  const angle = -35 * Math.PI / 180;
  const [cos, sin] = [Math.cos(angle), Math.sin(angle)];
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 4;
      // Rounded square mask with a one-pixel soft edge.
      const dx = Math.max(r - x - 0.5, x + 0.5 - (size - r), 0);
      const dy = Math.max(r - y - 0.5, y + 0.5 - (size - r), 0);
      const alpha = Math.max(0, Math.min(1, r - Math.hypot(dx, dy) + 0.5));
      const t = (x + y) / (2 * size);
      let rgb = [0x43 + (0x22 - 0x43) * t, 0x38 + (0xa6 - 0x38) * t, 0xca + (0xb3 - 0xca) * t];
      // The baton: a rounded bar rotated -35° around the centre.
      const u = (x + 0.5 - c) * cos + (y + 0.5 - c) * sin;
      const v = -(x + 0.5 - c) * sin + (y + 0.5 - c) * cos;
      const half = size * 20 / 64;
      const thick = size * 3.5 / 64;
      const ex = Math.max(Math.abs(u) - (half - thick), 0);
      const bar = Math.max(0, Math.min(1, thick - Math.hypot(ex, v) + 0.5));
      rgb = rgb.map((ch) => ch + (255 - ch) * bar);
      px[i] = Math.round(rgb[0]!);
      px[i + 1] = Math.round(rgb[1]!);
      px[i + 2] = Math.round(rgb[2]!);
      px[i + 3] = Math.round(alpha * 255);
    }
  }
  return await encodePng(size, size, px);
}

async function encodePng(w: number, h: number, rgba: Uint8Array): Promise<Uint8Array> {
  const raw = new Uint8Array((w * 4 + 1) * h);
  for (let y = 0; y < h; y++) {
    raw[y * (w * 4 + 1)] = 0;
    raw.set(rgba.subarray(y * w * 4, (y + 1) * w * 4), y * (w * 4 + 1) + 1);
  }
  const idat = new Uint8Array(
    await new Response(new Blob([raw]).stream().pipeThrough(new CompressionStream("deflate")))
      .arrayBuffer(),
  );
  const ihdr = new Uint8Array(13);
  const dv = new DataView(ihdr.buffer);
  dv.setUint32(0, w);
  dv.setUint32(4, h);
  ihdr.set([8, 6, 0, 0, 0], 8);
  const parts = [
    new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk("IHDR", ihdr),
    chunk("IDAT", idat),
    chunk("IEND", new Uint8Array()),
  ];
  return concatBytes(...parts);
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, data.length);
  const body = out.subarray(4, 8 + data.length);
  body.set(new TextEncoder().encode(type), 0);
  body.set(data, 4);
  let crc = 0xffffffff;
  for (const b of body) crc = CRC_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  dv.setUint32(8 + data.length, (crc ^ 0xffffffff) >>> 0);
  return out;
}

if (import.meta.main) {
  await buildWeb();
  for await (const f of Deno.readDir(join(WEB, "dist"))) {
    const { size } = await Deno.stat(join(WEB, "dist", f.name));
    console.log(`web/dist/${f.name}  ${(size / 1024).toFixed(1)} KB`);
  }
}
