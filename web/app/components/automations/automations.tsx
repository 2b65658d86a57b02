/**
 * The Automations page: what starts agents without a person.
 *
 * @module
 */
import { Listeners } from "./_listeners.tsx";
import { Webhooks } from "./_webhooks.tsx";

/** Webhooks and runner listeners. */
export function Automations() {
  return (
    <main class="page" aria-labelledby="automations-title">
      <h1 id="automations-title">Automations</h1>
      <Webhooks />
      <Listeners />
    </main>
  );
}
