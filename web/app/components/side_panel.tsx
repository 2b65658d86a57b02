/**
 * The frame every side panel of the session view shares: an `aside` named by
 * its title, a head with an icon, the title and a close button, then the
 * panel's own content; and the muted line a panel shows while it loads or
 * has nothing to show.
 *
 * @module
 */
import type { ComponentChildren } from "preact";
import { Icon, type IconName } from "./icon.tsx";

/** A side panel: `{name}-title` labels it; the close button says "Close the {title} panel". */
export function SidePanel(
  { name, class: className, icon, title, closeTitle, onClose, children }: {
    name: string;
    /** Classes beside `side-panel`. */
    class?: string;
    icon: IconName;
    title: string;
    /** The close button's tooltip, where closing needs a word. */
    closeTitle?: string;
    onClose: () => void;
    children: ComponentChildren;
  },
) {
  return (
    <aside
      class={className ? `side-panel ${className}` : "side-panel"}
      aria-labelledby={`${name}-title`}
    >
      <div class="panel-head">
        <h2 id={`${name}-title`}>
          <Icon name={icon} />
          {` ${title}`}
        </h2>
        <button
          type="button"
          class="icon-btn"
          aria-label={`Close the ${title.toLowerCase()} panel`}
          title={closeTitle}
          onClick={onClose}
        >
          <Icon name="x" />
        </button>
      </div>
      {children}
    </aside>
  );
}

/** A panel's muted line: while it loads (`busy`), or when it has nothing to show. */
export function PanelNote({ busy, children }: { busy?: boolean; children: ComponentChildren }) {
  return <p class="muted pad" aria-busy={busy ? "true" : undefined}>{children}</p>;
}
