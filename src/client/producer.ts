/**
 * The producer library: how agents and the CLI put jobs on the FIFO queue. A job is validated
 * against the same envelope schema the consumers use before anything is sent, travels in its
 * workspace's message group with a deduplication id derived from its jobId, and a diff over the
 * inline limit is claim-checked to S3 (never truncated).
 */
import { randomUUID } from 'node:crypto';
import {
  SendMessageBatchCommand,
  SendMessageCommand,
  type MessageAttributeValue,
  type SendMessageBatchRequestEntry,
  type SendMessageBatchResult,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { DiffRef } from '../../contract/job-types';
import { INLINE_DIFF_LIMIT_BYTES, MAX_DIFF_BYTES, MAX_MESSAGE_BYTES } from '../../contract/runtime-env';
import {
  deduplicationId,
  jobAttributes,
  jobDigest,
  messageGroupId,
  parseEnvelope,
  type JobEnvelope,
} from '../core/envelope';
import { ConfigurationError, errorMessage, InvalidJobError, PermanentJobError } from '../core/errors';
import { parsePatchOperations } from '../core/patch/parse';
import { TERMINAL_STATUSES, type DiffStore, type JobRecord, type JobStatus, type Ledger } from '../core/ports';
import { stringAttributes, wireJson } from '../../contract/messages';
import { inlineDiff, inlineDiffBytes } from '../core/diff-wire';

/** Per job type (distributes over the union), so `payload` stays tied to `type`. */
type WithOptionalIds<E> = E extends unknown
  ? Omit<E, 'jobId' | 'createdAt'> & { readonly jobId?: string; readonly createdAt?: string }
  : never;

/** An apply_patch's `diff` may be given as bytes (any encoding); the producer picks how it travels. */
type WithDiffBytes<E> = E extends { type: 'apply_patch'; payload: infer P }
  ? Omit<E, 'payload'> & { readonly payload: Omit<P, 'diff'> & { readonly diff?: string | Uint8Array } }
  : E;

/**
 * A job as a caller writes it: jobId and createdAt are filled in when absent, and an apply_patch
 * `diff` may be bytes: it is sent as text when it is UTF-8, else as `diffBase64`, or by reference
 * when it is large (src/core/diff-wire.ts), and reaches the tree byte for byte.
 */
export type JobRequest = WithOptionalIds<WithDiffBytes<JobEnvelope>>;

export interface EnqueueOptions {
  readonly sqs: SQSClient;
  /** URL of the FIFO ingress queue. */
  readonly queueUrl: string;
  /** Where diffs over INLINE_DIFF_LIMIT_BYTES go; without it such a job is refused. */
  readonly diffStore?: DiffStore;
  /**
   * The ledger, for a sender allowed to use it (the CLI is): `enqueueAgentJob` records the job
   * QUEUED before sending it, so `wait`, `cancel` and `status` know it from the start, and a job id
   * reused for a different request is refused (and recorded) here instead of failing on the DLQ.
   */
  readonly ledger?: Pick<Ledger, 'recordQueued' | 'recordConflict'>;
}

export interface EnqueueResult {
  readonly jobId: string;
  /** Absent when the job was not sent again because the ledger already has it (see `existing`). */
  readonly messageId?: string;
  readonly sequenceNumber?: string;
  /** Set when the diff was claim-checked to S3. */
  readonly diffRef?: DiffRef;
  /** With a ledger: the status of this same request, sent before; a finished one is not sent again. */
  readonly existing?: JobStatus;
}

export type EnqueueOutcome =
  | ({ readonly status: 'SENT'; readonly messageId: string } & EnqueueResult)
  | { readonly status: 'FAILED'; readonly jobId?: string; readonly error: Error };

/** A job that was valid but not enqueued. */
export class EnqueueError extends Error {
  override readonly name = 'EnqueueError';
  constructor(
    /**
     * SEND_FAILED: SQS refused the entry. EARLIER_JOB_FAILED: held back to keep its workspace's
     * order. With a ledger: CONFLICT, the job id is taken by a different request (recorded);
     * CANCELLED, the job id was cancelled.
     */
    readonly reason: 'SEND_FAILED' | 'EARLIER_JOB_FAILED' | 'CONFLICT' | 'CANCELLED',
    message: string,
    readonly code?: string,
    /** CONFLICT, CANCELLED: the ledger record of the job id. */
    readonly existing?: JobRecord,
  ) {
    super(message);
  }
}

/** SendMessageBatch limits: 10 entries and 1 MiB in total. */
const BATCH_ENTRIES = 10;

/** A fresh job id (fits ID_PATTERN). Reuse it when retrying a send: it is what deduplicates. */
export function newJobId(): string {
  return randomUUID();
}

/**
 * Validates and sends one job. Throws InvalidJobError (naming every bad field) before sending.
 * With `options.ledger`, records it QUEUED first: see EnqueueOptions.ledger.
 */
export async function enqueueAgentJob(job: JobRequest, options: EnqueueOptions): Promise<EnqueueResult> {
  const message = await prepare(job, options.diffStore);
  const existing = options.ledger ? await recordBeforeSending(message.envelope, options.ledger) : undefined;
  // A finished job is not sent again; an unfinished one is (its message may be lost: the queue and the ledger deduplicate).
  if (existing !== undefined && TERMINAL_STATUSES.includes(existing))
    return { jobId: message.jobId, diffRef: message.diffRef, existing };
  const response = await options.sqs.send(new SendMessageCommand({ QueueUrl: options.queueUrl, ...message.entry }));
  if (!response.MessageId)
    throw new EnqueueError('SEND_FAILED', `SendMessage returned no MessageId for job ${message.jobId}`);
  return {
    jobId: message.jobId,
    messageId: response.MessageId,
    sequenceNumber: response.SequenceNumber,
    diffRef: message.diffRef,
    existing,
  };
}

/**
 * Records the job QUEUED unless its id is known. Returns the status of the same request sent
 * before (undefined for a first send); throws for an id taken by another request or cancelled.
 */
async function recordBeforeSending(
  envelope: JobEnvelope,
  ledger: NonNullable<EnqueueOptions['ledger']>,
): Promise<JobStatus | undefined> {
  const digest = jobDigest(envelope);
  const now = Date.now();
  const outcome = await ledger.recordQueued({ job: envelope, digest, now });
  if (outcome.kind === 'queued') return undefined;
  const { record } = outcome;
  if (record.status === 'CANCELLED') {
    throw new EnqueueError(
      'CANCELLED',
      `job ${envelope.jobId} was cancelled: not sent (send the work again with a new job id)`,
      undefined,
      record,
    );
  }
  if (record.digest === digest) return record.status;
  await ledger.recordConflict({ job: envelope, digest, seenBy: 'enqueue', now });
  const original = `${record.type} in workspace ${record.workspaceId}, ${record.status}`;
  throw new EnqueueError(
    'CONFLICT',
    `job id ${envelope.jobId} is taken by a different request (${original}): not sent; use a new job id`,
    undefined,
    record,
  );
}

/**
 * Sends many jobs with SendMessageBatch, in order, and reports one outcome per job in input order.
 * Once a job of a workspace fails (invalid or refused), the later jobs of that workspace in this
 * call are not sent (EARLIER_JOB_FAILED): sending them would let them run before it. A batch holds
 * at most one job per workspace, because SQS reports batch entries independently: a refused entry
 * could otherwise be followed by an accepted later job of its workspace in the same call.
 */
export async function enqueueAgentJobs(
  jobs: readonly JobRequest[],
  options: EnqueueOptions,
): Promise<EnqueueOutcome[]> {
  const outcomes: EnqueueOutcome[] = new Array(jobs.length);
  const failedWorkspaces = new Map<string, string>();
  const fail = (index: number, workspaceId: string, jobId: string | undefined, error: Error) => {
    outcomes[index] = { status: 'FAILED', jobId, error };
    if (!failedWorkspaces.has(workspaceId)) failedWorkspaces.set(workspaceId, jobId ?? `#${index}`);
  };

  let batch: BatchItem[] = [];
  let batchBytes = 0;
  const flush = async () => {
    if (batch.length) await sendBatch(batch, options, outcomes, fail);
    batch = [];
    batchBytes = 0;
  };

  for (const [index, job] of jobs.entries()) {
    if (batch.some((item) => item.message.workspaceId === job.workspaceId)) await flush();
    const blockedBy = failedWorkspaces.get(job.workspaceId);
    if (blockedBy !== undefined) {
      fail(
        index,
        job.workspaceId,
        job.jobId,
        new EnqueueError(
          'EARLIER_JOB_FAILED',
          `not sent: earlier job ${blockedBy} of workspace ${job.workspaceId} failed`,
        ),
      );
      continue;
    }
    let message: PreparedMessage;
    try {
      message = await prepare(job, options.diffStore);
    } catch (error) {
      fail(index, job.workspaceId, job.jobId, error as Error);
      continue;
    }
    if (batch.length === BATCH_ENTRIES || batchBytes + message.bytes > MAX_MESSAGE_BYTES) await flush();
    batch.push({ index, message });
    batchBytes += message.bytes;
  }
  await flush();
  return outcomes;
}

interface BatchItem {
  /** Position in the caller's list. */
  readonly index: number;
  readonly message: PreparedMessage;
}

interface PreparedMessage {
  readonly envelope: JobEnvelope;
  readonly jobId: string;
  readonly workspaceId: string;
  readonly entry: Omit<SendMessageBatchRequestEntry, 'Id'>;
  /** Body plus attributes, as SQS counts them against its size limit. */
  readonly bytes: number;
  readonly diffRef?: DiffRef;
}

/**
 * The job as the consumers will read it (ids, type, payload, the diff's size, and that the diff is
 * a patch the sequencer can apply), without sending anything: InvalidJobError naming every bad field. `enqueueAgentJob` runs the same check first.
 */
export function validateJob(job: JobRequest): JobEnvelope {
  const envelope = parseEnvelope({
    ...withInlineDiff(job),
    jobId: job.jobId ?? newJobId(),
    createdAt: job.createdAt ?? new Date().toISOString(),
  });
  checkDiffSize(envelope);
  checkDiffParses(envelope);
  return envelope;
}

async function prepare(job: JobRequest, diffStore: DiffStore | undefined): Promise<PreparedMessage> {
  const { envelope: final, diffRef } = await claimCheckDiff(validateJob(job), diffStore);
  // ASCII-only JSON: any character reaches the consumer, on SQS and on fauxqs (contract/messages.ts).
  const body = wireJson(final);
  const attributes = stringAttributes(jobAttributes(final));
  const bytes = Buffer.byteLength(body) + attributeBytes(attributes);
  if (bytes > MAX_MESSAGE_BYTES) {
    throw new InvalidJobError(
      `job ${final.jobId} is ${bytes} bytes as a message, over the ${MAX_MESSAGE_BYTES}-byte SQS limit`,
    );
  }
  return {
    envelope: final,
    jobId: final.jobId,
    workspaceId: final.workspaceId,
    bytes,
    diffRef,
    entry: {
      MessageBody: body,
      MessageGroupId: messageGroupId(final.workspaceId),
      MessageDeduplicationId: deduplicationId(final.jobId, final.type),
      MessageAttributes: attributes,
    },
  };
}

/** The job with a `diff` given as bytes in its inline form (`diff` text or `diffBase64`). */
function withInlineDiff(job: JobRequest): object {
  if (job.type !== 'apply_patch' || job.payload.diff === undefined || typeof job.payload.diff === 'string') return job;
  const { diff, ...rest } = job.payload;
  return { ...job, payload: { ...rest, ...inlineDiff(diff) } };
}

/** An inline diff over MAX_DIFF_BYTES is refused, naming its field. */
function checkDiffSize(envelope: JobEnvelope): void {
  if (envelope.type !== 'apply_patch') return;
  const bytes = inlineDiffBytes(envelope.payload)?.byteLength ?? 0;
  if (bytes <= MAX_DIFF_BYTES) return;
  const field = envelope.payload.diff !== undefined ? 'diff' : 'diffBase64';
  const issue = { path: ['payload', field], message: `${bytes} bytes is over the ${MAX_DIFF_BYTES}-byte limit` };
  throw new InvalidJobError(`invalid apply_patch payload: payload.${field}: ${issue.message}`, [issue]);
}

/**
 * A diff the patch engine refuses (not a diff at all, or a patch it would never apply: a path out
 * of the tree, a symlink, a binary) is refused here, where its sender is, in the engine's own words
 * (src/core/patch/parse.ts): sent, it would fail at its turn. The bytes are the ones the sequencer
 * parses, whichever form they travel in; a diffRef the caller made itself is the sequencer's to read.
 */
function checkDiffParses(envelope: JobEnvelope): void {
  if (envelope.type !== 'apply_patch') return;
  const diff = inlineDiffBytes(envelope.payload);
  if (diff === undefined) return;
  try {
    parsePatchOperations(diff);
  } catch (error) {
    if (!(error instanceof PermanentJobError)) throw error;
    const field = envelope.payload.diff !== undefined ? 'diff' : 'diffBase64';
    const issue = { path: ['payload', field], message: error.message };
    throw new InvalidJobError(`invalid apply_patch payload: payload.${field}: ${issue.message}`, [issue]);
  }
}

/** Moves a diff over the inline limit to the diff store, as bytes, and replaces it with its reference. */
async function claimCheckDiff(
  envelope: JobEnvelope,
  diffStore: DiffStore | undefined,
): Promise<{ envelope: JobEnvelope; diffRef?: DiffRef }> {
  if (envelope.type !== 'apply_patch') return { envelope };
  const diff = inlineDiffBytes(envelope.payload);
  if (diff === undefined) return { envelope };
  const bytes = diff.byteLength;
  if (bytes <= INLINE_DIFF_LIMIT_BYTES) return { envelope };
  if (!diffStore) {
    throw new ConfigurationError(
      `job ${envelope.jobId}: a ${bytes}-byte diff is over the ${INLINE_DIFF_LIMIT_BYTES}-byte inline limit and no diffStore was given`,
    );
  }
  const { diff: _text, diffBase64: _base64, ...rest } = envelope.payload;
  const diffRef = await diffStore.put(`${envelope.workspaceId}/${envelope.jobId}`, diff);
  return { envelope: { ...envelope, payload: { ...rest, diffRef } }, diffRef };
}

async function sendBatch(
  batch: readonly BatchItem[],
  options: EnqueueOptions,
  outcomes: EnqueueOutcome[],
  fail: (index: number, workspaceId: string, jobId: string, error: Error) => void,
): Promise<void> {
  const byId = new Map(batch.map((item, position) => [String(position), item]));
  const itemOf = (id: string | undefined) => (id === undefined ? undefined : byId.get(id));
  let response: SendMessageBatchResult;
  try {
    response = await options.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: options.queueUrl,
        Entries: [...byId].map(([Id, { message }]) => ({ Id, ...message.entry })),
      }),
    );
  } catch (error) {
    // The request as a whole failed (network, throttling): every entry is reported, none is lost.
    const reason = errorMessage(error);
    for (const { index, message } of batch) {
      fail(
        index,
        message.workspaceId,
        message.jobId,
        new EnqueueError(
          'SEND_FAILED',
          `SendMessageBatch failed for job ${message.jobId}: ${reason}`,
          (error as Error).name,
        ),
      );
    }
    return;
  }
  for (const entry of response.Successful ?? []) {
    const item = itemOf(entry.Id);
    if (!item || !entry.MessageId) continue;
    const { jobId, diffRef } = item.message;
    outcomes[item.index] = {
      status: 'SENT',
      jobId,
      messageId: entry.MessageId,
      sequenceNumber: entry.SequenceNumber,
      diffRef,
    };
  }
  for (const entry of response.Failed ?? []) {
    const item = itemOf(entry.Id);
    if (!item) continue;
    const { jobId, workspaceId } = item.message;
    fail(
      item.index,
      workspaceId,
      jobId,
      new EnqueueError(
        'SEND_FAILED',
        `SQS refused job ${jobId}: ${entry.Code} ${entry.Message ?? ''}`.trim(),
        entry.Code,
      ),
    );
  }
  // An entry SQS reported neither way is unknown: treat it as failed so the caller retries it
  // (the deduplication id makes a retry of an already-accepted message harmless).
  for (const { index, message } of batch) {
    if (outcomes[index] === undefined) {
      fail(
        index,
        message.workspaceId,
        message.jobId,
        new EnqueueError('SEND_FAILED', `SendMessageBatch did not report job ${message.jobId}`),
      );
    }
  }
}

/** String message attributes as SQS takes them (also what a DLQ redrive sends again). */

function attributeBytes(attributes: Record<string, MessageAttributeValue>): number {
  return Object.entries(attributes).reduce(
    (sum, [name, value]) =>
      sum +
      Buffer.byteLength(name) +
      Buffer.byteLength(value.DataType ?? '') +
      Buffer.byteLength(value.StringValue ?? ''),
    0,
  );
}
