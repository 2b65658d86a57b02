/**
 * The page for an address the app has no page for.
 *
 * @module
 */
import { Icon } from "./icon.tsx";
import { AppLink } from "./widgets.tsx";

/** Says there is no page at `path`, with a way home. */
export function PageNotFound({ path }: { path: string }) {
  return (
    <main class="page narrow">
      <div class="card empty">
        <Icon name="alert" size={28} />
        <h1>Page not found</h1>
        <p>
          baton has no page at <code>{path}</code>.
        </p>
        <p>
          <AppLink href="/">Start a session</AppLink> or pick one from the list.
        </p>
      </div>
    </main>
  );
}
