/**
 * What the pages ask of a runner: which one a card shows, the models it
 * offers and the folders it worked in last. An answer belongs to the runner
 * (and the connection) it was asked of: a late one for another is dropped,
 * and an offline runner has none.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type { ModelsResponse, RecentFoldersResponse } from "../../shared/api.ts";
import type { ModelInfo, RunnerInfo } from "../../shared/protocol.ts";
import { api } from "./api.ts";
import { runners } from "./store.ts";

/**
 * The runner a card shows, starting with `first` (or the first one to
 * appear, when there is none yet).
 */
export function useRunnerChoice(
  first: RunnerInfo | undefined,
): [runnerId: string, setRunnerId: (id: string) => void] {
  const [runnerId, setRunnerId] = useState(first?.id ?? "");
  useEffect(() => {
    if (!runnerId && first) setRunnerId(first.id);
  }, [first?.id]);
  return [runnerId, setRunnerId];
}

/** Whether the runner is connected now (read from the feed, so the caller re-renders on a change). */
function useConnected(runnerId: string): boolean {
  return runners.value.find((r) => r.id === runnerId)?.connected ?? false;
}

/** A runner's models, as far as they are known. */
export interface RunnerModels {
  /** null until the runner answered, and while it is offline or when asking failed. */
  models: ModelInfo[] | null;
  /** Why asking failed. */
  error: string | null;
  /** The problem the runner found in its models.json (the list is then what it could read). */
  configError: string | null;
}

/** Options of {@linkcode useRunnerModels}. */
export interface RunnerModelsOptions {
  /**
   * Asks again when this value changes, keeping the list shown until the new
   * one comes (the hidden models changed: the relay leaves them out).
   */
  reloadOn?: unknown;
}

const NO_MODELS: RunnerModels = { models: null, error: null, configError: null };

/** The models a connected runner offers (`/api/runners/:id/models`). */
export function useRunnerModels(
  runnerId: string,
  options: RunnerModelsOptions = {},
): RunnerModels {
  const connected = useConnected(runnerId);
  const [answer, setAnswer] = useState<RunnerModels & { runnerId: string } | null>(null);
  // Another runner, or the same one gone and back: forget the old list at once.
  useEffect(() => setAnswer(null), [runnerId, connected]);
  useEffect(() => {
    if (!runnerId || !connected) return;
    let live = true;
    api<ModelsResponse>(`/api/runners/${runnerId}/models`).then(
      (r) =>
        live &&
        setAnswer({ runnerId, models: r.models, error: null, configError: r.error ?? null }),
      (e) =>
        live &&
        setAnswer({ runnerId, models: null, error: (e as Error).message, configError: null }),
    );
    return () => {
      live = false;
    };
  }, [runnerId, connected, options.reloadOn]);
  return connected && answer?.runnerId === runnerId ? answer : NO_MODELS;
}

/** The folders a connected runner's sessions used last, for the folder field's suggestions. */
export function useRecentFolders(runnerId: string): string[] {
  const connected = useConnected(runnerId);
  const [folders, setFolders] = useState<string[]>([]);
  useEffect(() => {
    setFolders([]);
    if (!runnerId || !connected) return;
    let live = true;
    api<RecentFoldersResponse>(`/api/runners/${runnerId}/recent-folders`).then(
      (r) => live && setFolders(r.folders),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [runnerId, connected]);
  return folders;
}
