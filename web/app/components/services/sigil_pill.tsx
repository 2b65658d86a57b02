/**
 * Sigils in agent output: a `[[type:id key=val]]` token whose type (or one
 * of its aliases) a service of the session's runner declared becomes a
 * pill with the definition's icon and label, and what its `resolve`
 * endpoint says of the id (through the tunnel, cached). Params that do not
 * fit the definition's schema leave the token as text, with the reason on
 * hover; unknown types stay plain text.
 *
 * @module
 */
import { createContext, render } from "preact";
import { useContext, useEffect, useLayoutEffect, useState } from "preact/hooks";
import {
  findSigils,
  invalidSigilParams,
  type SigilDef,
  sigilDefFor,
  type SigilResolved,
  type SigilToken,
} from "../../../../shared/services_api.ts";
import { resolveSigil, runnerServices } from "../../runner_services.ts";
import { Icon, type IconName, isIconName } from "../icon.tsx";

/** The runner whose sigils the conversation below renders (null: none). */
export const SigilRunner = createContext<string | null>(null);

/** A service's kebab-case icon name as one of the app's icons. */
export function serviceIcon(name: string | undefined): IconName {
  if (!name) return "square";
  if (isIconName(name)) return name;
  if (/note|file|doc|text/.test(name)) return "sticky-note";
  if (/git|branch|merge/.test(name)) return "branch";
  return "square";
}

/** One pill. */
export function SigilPill(
  { runnerId, def, token }: { runnerId: string; def: SigilDef; token: SigilToken },
) {
  const [got, setGot] = useState<SigilResolved | null>(null);
  useEffect(() => {
    let live = true;
    resolveSigil(runnerId, def, token.id).then((r) => live && setGot(r));
    return () => {
      live = false;
    };
  }, [runnerId, def.type, token.id]);
  const icon = serviceIcon(def.icon ?? serviceIconOf(runnerId, def.serviceId));
  const title = got?.title ?? token.id;
  const tip = [`${def.label}: ${token.id}`, got?.description ?? def.description]
    .filter(Boolean).join("\n");
  return (
    <span class="sigil" data-sigil={def.type} title={tip}>
      <Icon name={icon} size={12} />
      <span class="sigil-label">{def.label}</span>
      <span class="sigil-title">{title}</span>
      {got?.status && <span class="sigil-status">{got.status}</span>}
    </span>
  );
}

function serviceIconOf(runnerId: string, serviceId: string | undefined): string | undefined {
  return runnerServices.value[runnerId]?.services.find((s) => s.id === serviceId)?.icon;
}

/**
 * Turns the sigil tokens in the text of `root` (outside code) into pills;
 * called after each render of an agent's Markdown.
 */
export function useSigils(root: { current: HTMLElement | null }, html: string): void {
  const runnerId = useContext(SigilRunner);
  const defs = runnerId ? runnerServices.value[runnerId]?.sigils ?? [] : [];
  useLayoutEffect(() => {
    const el = root.current;
    if (!el || !runnerId) return;
    // A pass over the same HTML (new definitions arrived): start again from the tokens.
    // When the HTML changed, Preact has replaced the element's content already.
    if (el.querySelector(".sigil-mount, .sigil-invalid")) el.innerHTML = html;
    if (defs.length === 0 || !el.textContent?.includes("[[")) return;
    const mounts: HTMLElement[] = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const texts: Text[] = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const t = n as Text;
      if (t.data.includes("[[") && !t.parentElement?.closest("code, pre, a")) texts.push(t);
    }
    for (const t of texts) {
      const tokens = findSigils(t.data);
      if (tokens.length === 0) continue;
      const frag = document.createDocumentFragment();
      let at = 0;
      for (const tok of tokens) {
        const def = sigilDefFor(defs, tok.type);
        if (!def) continue;
        frag.append(t.data.slice(at, tok.index));
        at = tok.index + tok.raw.length;
        const bad = invalidSigilParams(def, tok.params);
        if (bad) {
          const span = document.createElement("span");
          span.className = "sigil-invalid";
          span.title = `${def.label}: ${bad}`;
          span.textContent = tok.raw;
          frag.append(span);
          continue;
        }
        const mount = document.createElement("span");
        mount.className = "sigil-mount";
        render(<SigilPill runnerId={runnerId} def={def} token={tok} />, mount);
        mounts.push(mount);
        frag.append(mount);
      }
      if (at === 0) continue;
      frag.append(t.data.slice(at));
      t.replaceWith(frag);
    }
    return () => mounts.forEach((m) => render(null, m));
  }, [html, runnerId, defs]);
}
