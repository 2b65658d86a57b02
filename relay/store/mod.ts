/**
 * The relay's repositories: every SQL statement of the relay lives under this
 * folder, behind one small class per table.
 *
 * @module
 */
import { type Database, transaction } from "./db.ts";
import { AccountsRepo } from "./accounts.ts";
import { AttachmentsRepo } from "./attachments.ts";
import { EventsRepo } from "./events.ts";
import { KeysRepo } from "./keys.ts";
import { PushRepo } from "./push.ts";
import { RateLimitsRepo } from "./rate_limits.ts";
import { RetentionRepo } from "./retention.ts";
import { RunnersRepo } from "./runners.ts";
import { SessionsRepo } from "./sessions.ts";
import { SettingsRepo } from "./settings.ts";
import { TriggersRepo } from "./triggers.ts";
import { TunnelGrantsRepo } from "./tunnel_grants.ts";
import { WebhooksRepo } from "./webhooks.ts";
import { asyncRepo, type AsyncSettings, type AsyncStore } from "./contract.ts";

export type { Async, AsyncSettings, AsyncStore, Dialect } from "./contract.ts";
export { REPOSITORIES } from "./contract.ts";
export type { AccountRecord } from "./accounts.ts";
export type { AttachmentRecord, NewAttachment } from "./attachments.ts";
export type { KeyRecord } from "./keys.ts";
export type { PushSubscriptionRecord } from "./push.ts";
export type { LimitHit } from "./rate_limits.ts";
export type { Deletable } from "./retention.ts";
export type { RunnerRecord } from "./runners.ts";
export type { SessionPatch, SessionRecord } from "./sessions.ts";
export type { StoredEvent } from "./events.ts";
export type { HistoryEntry, ListenerRecord, SubscriptionRecord } from "./triggers.ts";
export type { GrantRecord, SpentTicket, TicketRecord } from "./tunnel_grants.ts";
export type { WebhookRecord } from "./webhooks.ts";

/** All repositories over one database. */
export class Store {
  readonly accounts: AccountsRepo;
  readonly keys: KeysRepo;
  readonly runners: RunnersRepo;
  readonly sessions: SessionsRepo;
  readonly events: EventsRepo;
  readonly settings: SettingsRepo;
  readonly triggers: TriggersRepo;
  readonly webhooks: WebhooksRepo;
  readonly retention: RetentionRepo;
  readonly attachments: AttachmentsRepo;
  readonly push: PushRepo;
  readonly rateLimits: RateLimitsRepo;
  readonly tunnelGrants: TunnelGrantsRepo;

  constructor(readonly db: Database) {
    this.accounts = new AccountsRepo(db);
    this.keys = new KeysRepo(db);
    this.runners = new RunnersRepo(db);
    this.sessions = new SessionsRepo(db);
    this.events = new EventsRepo(db);
    this.settings = new SettingsRepo(db);
    this.triggers = new TriggersRepo(db);
    this.webhooks = new WebhooksRepo(db);
    this.retention = new RetentionRepo(db);
    this.attachments = new AttachmentsRepo(db);
    this.push = new PushRepo(db);
    this.rateLimits = new RateLimitsRepo(db);
    this.tunnelGrants = new TunnelGrantsRepo(db);
  }

  /** Runs `fn` in one transaction. */
  tx<T>(fn: () => T): T {
    return transaction(this.db, fn);
  }
}

/**
 * This SQLite store as the relay's asynchronous contract: the same
 * repositories, each call still run at once on this thread.
 */
export function asyncStore(store: Store): AsyncStore {
  return {
    dialect: "sqlite",
    accounts: asyncRepo(store.accounts),
    keys: asyncRepo(store.keys),
    runners: asyncRepo(store.runners),
    sessions: asyncRepo(store.sessions),
    events: asyncRepo(store.events),
    settings: asyncRepo(store.settings) as AsyncSettings,
    triggers: asyncRepo(store.triggers),
    webhooks: asyncRepo(store.webhooks),
    retention: asyncRepo(store.retention),
    attachments: asyncRepo(store.attachments),
    push: asyncRepo(store.push),
    rateLimits: asyncRepo(store.rateLimits),
    tunnelGrants: asyncRepo(store.tunnelGrants),
  };
}
