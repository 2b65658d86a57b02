/**
 * The xterm.js bundle, built apart from the app (web/dist/xterm.js) so that
 * the app's core stays small: the terminal panel loads it with a script tag
 * the first time it opens, and it hands its classes over on `window`.
 *
 * @module
 */
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";

(globalThis as unknown as { BatonXterm: unknown }).BatonXterm = { Terminal, FitAddon };
