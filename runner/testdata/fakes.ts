/**
 * Fakes for the runner's unit tests: the options of a ControlLink that says
 * a plain hello and ignores what the relay sends, for tests that watch how
 * the link dials rather than what it answers.
 *
 * @module
 */
import type { ControlLinkOptions } from "../control_link.ts";
import type { RelayNodes } from "../relay_nodes.ts";

/**
 * ControlLink options for runner "r" with key `brt_x` and no sessions: every
 * callback does nothing (requests answer `{}`), the log is dropped;
 * `overrides` replace any of them.
 */
export function linkOptions(
  relay: RelayNodes,
  overrides: Partial<ControlLinkOptions> = {},
): ControlLinkOptions {
  return {
    relay,
    hello: () => ({
      apiKey: "brt_x",
      runnerId: "r",
      name: "r",
      roots: [],
      version: "t",
      platform: "linux",
      sessions: [],
    }),
    onWelcome: () => {},
    onRequest: () => Promise.resolve({}),
    onAck: () => {},
    onRelayError: () => {},
    log: () => {},
    ...overrides,
  };
}
