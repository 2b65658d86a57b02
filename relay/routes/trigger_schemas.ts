/**
 * Request schemas of the trigger API, owned by `routes/triggers.ts`; the
 * webhook routes reuse the filter, model and path parts (the runner routes
 * the path), and the runner's trigger
 * calls (`runner_calls.ts`) the subscription and respond bodies. Handlers
 * validate with them and hand the typed result to the domain.
 *
 * @module
 */
import { z } from "zod";
import { MAX_INPUT_TEXT } from "../../shared/protocol.ts";

/**
 * A path a runner will resolve (a spawn's, a listener's or a webhook's `cwd`):
 * no NUL, which no system call takes (the runner failed the spawn with a
 * 502), and no other control character.
 */
export const PathString = z.string().max(4096)
  .regex(/^[^\p{Cc}]*$/u, "Path must not contain NUL or other control characters");

const Scalar = z.union([z.string().max(1000), z.number(), z.boolean()]);

/** A filter as clients send it. */
export const FilterSchema = z.object({
  field: z.string().min(1).max(300).regex(/^[^.\s][^\s]*$/, "a dot-path such as 'a.b.c'"),
  value: z.union([Scalar, z.array(Scalar).min(1).max(100)]),
  op: z.enum(["eq", "contains"]).optional(),
}).strict();

export const FiltersSchema = z.array(FilterSchema).max(50);
export const FilterModeSchema = z.enum(["and", "or"]);
export const ParamsSchema = z.record(z.string().min(1).max(100), Scalar).refine(
  (p) => Object.keys(p).length <= 50,
  "at most 50 params",
);
export const ModelSchema = z.object({
  provider: z.string().min(1).max(200),
  id: z.string().min(1).max(200),
});
const TypeSchema = z.string().min(1).max(200);
const PayloadSchema = z.record(z.string(), z.unknown());

export const TriggerBody = z.object({
  type: TypeSchema,
  payload: PayloadSchema,
  deliverAs: z.enum(["steer", "followUp"]).optional(),
  expectsResponse: z.boolean().optional(),
  source: z.string().min(1).max(200).optional(),
  summary: z.string().max(2000).optional(),
});

export const BroadcastBody = TriggerBody.omit({ expectsResponse: true });

export const SubscriptionBody = z.object({
  triggerType: TypeSchema,
  params: ParamsSchema.optional(),
  filters: FiltersSchema.optional(),
  filterMode: FilterModeSchema.optional(),
});

export const SubscriptionPatch = z.object({
  params: ParamsSchema.nullable().optional(),
  filters: FiltersSchema.nullable().optional(),
  filterMode: FilterModeSchema.nullable().optional(),
});

export const ListenerBody = z.object({
  triggerType: TypeSchema,
  prompt: z.string().max(MAX_INPUT_TEXT).optional(),
  cwd: PathString.nullable().optional(),
  model: ModelSchema.nullable().optional(),
  params: ParamsSchema.optional(),
});

export const ListenerPatch = z.object({
  triggerType: TypeSchema.optional(),
  prompt: z.string().max(MAX_INPUT_TEXT).nullable().optional(),
  cwd: PathString.nullable().optional(),
  model: ModelSchema.nullable().optional(),
  params: ParamsSchema.nullable().optional(),
});

export const RespondBody = z.object({
  triggerId: z.string().min(1).max(100),
  action: z.string().max(200).optional(),
  text: z.string().max(100_000).optional(),
});

/** `triggers.update` from an agent: a subscription patch naming its subscription. */
export const UpdateSubscriptionCall = SubscriptionPatch.extend({
  subscriptionId: z.string().min(1).max(200),
});

/** `triggers.unsubscribe` from an agent: a subscription id, or (legacy) a trigger type. */
export const UnsubscribeCall = z.object({
  subscriptionId: z.string().min(1).max(200).optional(),
  triggerType: z.string().min(1).max(200).optional(),
});
