/**
 * Message attributes on the wire: what the producer, the consumers, the DLQ moves and the CLI's
 * triage and redrive agree on, and how a body and a free-text attribute are written so that SQS
 * (and fauxqs) take any string. Plain data, schemas and pure helpers, so every side imports it.
 */
import * as z from 'zod/mini';
import { idSchema, JOB_TYPE_NAMES, type JobType } from './job-types';
import './zod-english';

/**
 * Set on a message an operator sends back from a DLQ (`dlq redrive`, `workspace unblock
 * --replay`); its value is the token the redrive recorded on the job in the ledger first. Only a
 * delivery carrying the token the ledger holds runs a FAILED or SKIPPED job again (docs/decisions.md
 * §2, §26): anyone who can send to a queue can set the attribute, nobody else can write the ledger.
 */
export const REDRIVE_ATTRIBUTE = 'redrive';

/** On the copy a command stage's failed build leaves on its stage's DLQ: the job's run number then. */
export const RUN_ATTRIBUTE = 'run';

/** Added to a message moved to a DLQ, so an operator can triage without reading the ledger. */
export const DLQ_ATTRIBUTES = {
  /** The permanent reason code (INVALID_JOB, CONFLICT, SKIPPED, ...). */
  reason: 'reason',
  /** The human-readable message, cut to a length attributes can carry. */
  errorMessage: 'errorMessage',
} as const;

/**
 * The String attributes EventBridge sets on an event it could not deliver to a rule's target, on
 * the target's DLQ (the build-events DLQ): which rule, and why (ERROR_CODE, ERROR_MESSAGE).
 */
export const EVENTBRIDGE_DLQ_ATTRIBUTES = {
  ruleArn: 'RULE_ARN',
  errorCode: 'ERROR_CODE',
  errorMessage: 'ERROR_MESSAGE',
} as const;

/** A failure's reason code, as the ledger and the DLQ's `reason` attribute carry it (README, "Failure reasons"). */
export const reasonCodeSchema = z
  .string()
  .check(
    z.regex(/^[A-Z][A-Z_]*$/),
    z.describe('A reason code: INVALID_JOB, CONFLICT, SKIPPED, ... (the README lists each, with its recovery).'),
  );

/**
 * The String attributes every job message carries (the producer sets them), so an operator can
 * triage a DLQ without parsing bodies. Values are each attribute's StringValue.
 */
const jobAttributeFields = {
  jobId: idSchema('jobId').check(z.describe("The job's id, as in its body.")),
  workspaceId: idSchema('workspaceId').check(z.describe("The job's workspace, as in its body.")),
  tenantId: idSchema('tenantId').check(z.describe('The tenant the job is for, as in its body.')),
  type: z.enum(JOB_TYPE_NAMES as [JobType, ...JobType[]]).check(z.describe('The job type, as in its body.')),
};
export const jobAttributesSchema = z.strictObject(jobAttributeFields);
export type JobAttributes = z.infer<typeof jobAttributesSchema>;

/**
 * The String attributes of a job's message the platform moved to a DLQ: the job's, what a redrive
 * added when the message was sent back before, and why it is there. Values are each attribute's
 * StringValue. Any other attribute the sender set travels along.
 */
export const dlqAttributesSchema = z.looseObject({
  ...jobAttributeFields,
  [DLQ_ATTRIBUTES.reason]: reasonCodeSchema,
  [DLQ_ATTRIBUTES.errorMessage]: z
    .string()
    .check(z.minLength(1), z.describe('What went wrong, in words, cut to 1,000 characters (the ledger has it whole).')),
  [REDRIVE_ATTRIBUTE]: z.optional(
    z.string().check(z.describe('On a message an operator sent back from a DLQ: the DLQ message id it came from.')),
  ),
});

/**
 * Carried by a stage message the pipeline sent again because a limit asked its job to wait
 * (src/core/pipeline.ts): a fresh message starts its receive count at zero, so these say what the
 * earlier copies spent. Never copied to a DLQ: a redrive starts afresh.
 */
export const DEFERRAL_ATTRIBUTES = {
  /** Epoch milliseconds before which the job must not run (a wait longer than SQS's longest delay). */
  until: 'deferredUntil',
  /** Deliveries of earlier copies that failed (transient errors): they count against the job's retries. */
  failedReceives: 'failedReceives',
  /** How many times the job waited for a limit: the back-off of a limit that names no time grows with it. */
  deferrals: 'deferrals',
} as const;

/** A string attribute as SQS SendMessage takes it (structurally the SDK's MessageAttributeValue). */
export interface StringAttributeValue {
  readonly DataType: 'String';
  readonly StringValue: string;
}

/** String message attributes as SendMessage wants them (the producer, the DLQ moves, the CLI). */
export function stringAttributes(values: Readonly<Record<string, string>>): Record<string, StringAttributeValue> {
  return Object.fromEntries(
    Object.entries(values).map(([name, value]) => [name, { DataType: 'String', StringValue: value }]),
  );
}

/**
 * A message body as the platform sends it: JSON with every character outside printable ASCII
 * escaped (`\uXXXX`). SQS refuses some characters in a body (most controls, U+FFFE, U+FFFF) and
 * fauxqs, the local SQS, also every character outside the Basic Multilingual Plane (an emoji);
 * escaped, any string travels, and JSON.parse gives back exactly the same value.
 */
export function wireJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * A free-text string attribute (a DLQ's `errorMessage`) cut to `maxChars` without splitting a
 * character, with what SQS refuses in attribute values (controls but tab and line breaks,
 * U+FFFE, U+FFFF, lone surrogates) written as `\u{...}` escapes.
 */
export function attributeText(text: string, maxChars: number): string {
  let cut = text.length > maxChars ? text.slice(0, maxChars) : text;
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return cut.replace(
    /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu,
    (c) => `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`,
  );
}
