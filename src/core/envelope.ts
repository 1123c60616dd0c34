/**
 * The job envelope (the wire contract): one schema, used by the producer before sending and by
 * every consumer on receipt. Validation errors name every offending field.
 */
import { createHash } from 'node:crypto';
import type { SQSRecord } from 'aws-lambda';
import * as z from 'zod/mini';
import { commitTimeProblem } from '../../contract/git-objects';
import { repoUrlSchema } from '../../contract/git-remotes';
import type { JobAttributes } from '../../contract/messages';
import '../../contract/zod-english';
import { idSchema, JOB_TYPES, JOB_TYPE_NAMES, type JobType, type StagedJobType } from '../../contract/job-types';
import { canonicalInlineDiff } from './diff-wire';
import { InvalidJobError, type FieldIssue } from './errors';

/** The fields every envelope has, whatever its type. */
export const envelopeIdFields = {
  jobId: idSchema('jobId').check(
    z.describe(
      'Your id for the job. Sending the same job again with the same id is safe: the queue deduplicates it for 5 minutes, the ledger for good.',
    ),
  ),
  workspaceId: idSchema('workspaceId').check(
    z.describe(
      'The workspace: jobs of one workspace take effect in order; its first job binds it to a repository and branch.',
    ),
  ),
  tenantId: idSchema('tenantId').check(z.describe('Who the job is for: stage queues serve tenants fairly.')),
};

const createdAtSchema = z.iso
  .datetime({ offset: false, error: 'createdAt must be an ISO-8601 UTC timestamp (…Z)' })
  .check(
    // It becomes the commit time of an apply_patch, and git dates cannot precede the epoch.
    z.refine(
      (time) => commitTimeProblem(time) === undefined,
      'createdAt must be 1970-01-01 or later: git dates start at the Unix epoch',
    ),
    z.describe('When the job was made, ISO-8601 UTC (…Z), 1970 or later: the commit time of an apply_patch.'),
  );

const envelopeBase = z.strictObject({
  ...envelopeIdFields,
  type: z.enum(JOB_TYPE_NAMES as [JobType, ...JobType[]], {
    error: `type must be one of ${JOB_TYPE_NAMES.join(', ')}`,
  }),
  createdAt: createdAtSchema,
  // Checked against its job type below; here only its presence (a missing key would read "expected nonoptional").
  payload: z.custom<unknown>((value) => value !== undefined, {
    error: 'is required: an object with the fields of its job type',
  }),
});

/**
 * The envelope of one job type as one schema: what parseEnvelope accepts for that type (it checks
 * the base first and the payload against its type after, to word its errors). The wire JSON Schema
 * (src/core/wire-schema.ts) is made from it.
 */
export function envelopeSchemaOf(type: JobType) {
  return z.strictObject({
    ...envelopeIdFields,
    type: z.literal(type),
    createdAt: createdAtSchema,
    payload: JOB_TYPES[type].payload,
  });
}

export type JobEnvelope<T extends JobType = JobType> = {
  [K in T]: Omit<z.infer<typeof envelopeBase>, 'type' | 'payload'> & {
    type: K;
    payload: z.infer<(typeof JOB_TYPES)[K]['payload']>;
  };
}[T];

/** The commit a staged job was pinned to by the sequencer, added when it is forwarded. */
export const pinSchema = z.strictObject(
  {
    sha: z.string().check(z.regex(/^[0-9a-f]{40}$/, 'must be a 40-character lower-case hex commit id')),
    // The same rules as repo.url: a forged pin cannot name file:// or carry a token.
    repoUrl: repoUrlSchema,
    branch: z.string().check(z.minLength(1, 'must not be empty')),
  },
  {
    error: (issue) =>
      issue.input === undefined ? 'is required: the sequencer adds it when it forwards the job' : undefined,
  },
);
export type Pin = z.infer<typeof pinSchema>;

/** A message on the stage queue of `type`: its envelope and the pin the sequencer added (parseStageMessageOf). */
export function stageMessageSchemaOf(type: StagedJobType) {
  return z.extend(envelopeSchemaOf(type), {
    pin: pinSchema.check(z.describe('The commit the sequencer pinned the job to, at its turn.')),
  });
}
export type StageMessage<T extends JobType = JobType> = JobEnvelope<T> & { pin: Pin };

function issuesOf(error: z.core.$ZodError, prefix: string[] = []): FieldIssue[] {
  return error.issues.map((i) => ({ path: [...prefix, ...i.path.map(String)], message: i.message }));
}

function describe(issues: readonly FieldIssue[]): string {
  return issues.map((i) => `${i.path.length ? i.path.join('.') : '(body)'}: ${i.message}`).join('; ');
}

/** InvalidJobError naming every field at fault, with the fields as data too. */
function invalid(what: string, error: z.core.$ZodError, prefix: string[] = []): InvalidJobError {
  const issues = issuesOf(error, prefix);
  return new InvalidJobError(`${what}: ${describe(issues)}`, issues);
}

/** Every issue of a failed parse as `path: message`, joined (`prefix` is the path of what was parsed). */
export function describeIssues(error: z.core.$ZodError, prefix: string[] = []): string {
  return describe(issuesOf(error, prefix));
}

/** Validates an envelope (object or JSON text). Throws InvalidJobError naming every problem. */
export function parseEnvelope(input: unknown): JobEnvelope {
  const value = typeof input === 'string' ? parseJson(input) : input;
  const base = envelopeBase.safeParse(value);
  if (!base.success) throw invalid('invalid job envelope', base.error);
  const payload = JOB_TYPES[base.data.type].payload.safeParse(base.data.payload);
  if (!payload.success) {
    throw invalid(`invalid ${base.data.type} payload`, payload.error, ['payload']);
  }
  return { ...base.data, payload: payload.data } as JobEnvelope;
}

/** Whether a parsed job is a stage message (carries the pin its parser validated). */
export function isStageMessage(job: JobEnvelope): job is StageMessage {
  return (job as Partial<StageMessage>).pin !== undefined;
}

/** Validates a forwarded stage message: an envelope plus its pin. */
export function parseStageMessage(input: unknown): StageMessage {
  const value = typeof input === 'string' ? parseJson(input) : input;
  if (typeof value !== 'object' || value === null)
    throw new InvalidJobError('invalid stage message: body is not an object');
  const { pin, ...envelope } = value as Record<string, unknown>;
  const parsedPin = pinSchema.safeParse(pin);
  if (!parsedPin.success) throw invalid('invalid stage message', parsedPin.error, ['pin']);
  return { ...parseEnvelope(envelope), pin: parsedPin.data };
}

/** Validates a message on the stage queue of `type`: a stage message of that type and no other. */
export function parseStageMessageOf<T extends StagedJobType>(type: T, input: unknown): StageMessage<T> {
  const message = parseStageMessage(input);
  if (message.type !== type)
    throw new InvalidJobError(`the ${JOB_TYPES[type].stage.queue} queue received a ${message.type} job`);
  return message as StageMessage<T>;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new InvalidJobError(`invalid job envelope: body is not JSON (${(error as Error).message})`);
  }
}

/** FIFO message group: one per workspace, so a workspace's jobs are serial and workspaces run in parallel. */
export function messageGroupId(workspaceId: string): string {
  return `ws#${workspaceId}`;
}

/**
 * Message group of a stage message: its tenant. A stage queue is a standard queue, and a standard
 * queue whose messages carry a MessageGroupId is an SQS fair queue: when one tenant's backlog takes
 * a disproportionate share of the consumers, SQS delivers the other tenants' messages first, so
 * their dwell time stays low. No queue attribute turns it on; every send to a stage queue or its
 * DLQ passes through here. (A tenant id, 1-64 of [A-Za-z0-9._-], is a valid group id as it is.)
 */
export function tenantGroupId(tenantId: string): string {
  return tenantId;
}

/**
 * The message group a copy of a delivered record keeps (a DLQ move), and the tenant the local
 * poller serves it as: the record's own group (a FIFO queue's workspace; a fair queue's tenant),
 * else its tenant from the `tenantId` attribute every job message carries (fauxqs, the local SQS,
 * accepts a group on a standard queue but does not return it), else none (a build event).
 */
export function deliveredGroupId(record: Pick<SQSRecord, 'attributes' | 'messageAttributes'>): string | undefined {
  const tenantId = record.messageAttributes['tenantId']?.stringValue;
  return record.attributes.MessageGroupId ?? (tenantId === undefined ? undefined : tenantGroupId(tenantId));
}

/** FIFO deduplication id: sha256("<jobId>:<type>") in hex. */
export function deduplicationId(jobId: string, type: JobType): string {
  return createHash('sha256').update(`${jobId}:${type}`).digest('hex');
}

/** Canonical JSON: keys sorted at every depth, so equal payloads give equal digests. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Digest of what the job asks for: workspace, tenant, type and canonical payload. A redelivery has
 * the same digest; the same jobId reused for different work does not (a conflict).
 * createdAt is left out on purpose: a producer that retries a send re-stamps it.
 * An inline diff counts by its bytes: `diffBase64` of UTF-8 text digests as that `diff` text.
 */
export function jobDigest(job: JobEnvelope): string {
  const { workspaceId, tenantId, type } = job;
  // The same diff bytes are the same request, whichever inline form the producer chose.
  const payload = job.type === 'apply_patch' ? canonicalInlineDiff(job.payload) : job.payload;
  return createHash('sha256').update(canonicalJson({ workspaceId, tenantId, type, payload })).digest('hex');
}

/** Message attributes set on every message so an operator can triage a DLQ without parsing bodies. */
export function jobAttributes(job: Pick<JobEnvelope, 'jobId' | 'workspaceId' | 'tenantId' | 'type'>): JobAttributes {
  return { jobId: job.jobId, workspaceId: job.workspaceId, tenantId: job.tenantId, type: job.type };
}
