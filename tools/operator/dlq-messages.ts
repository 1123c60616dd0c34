/**
 * DLQ operations on SQS, the same locally (fauxqs) and on AWS. A FIFO DLQ only hands out the next
 * message of a group after the previous one is deleted, so every walk receives in order, holds
 * what it does not act on (visibility timeout) until it is done, then releases it.
 *
 * StartMessageMoveTask is not used, even on AWS: it cannot filter by group and cannot set the
 * `redrive` attribute that lets a claim take over a FAILED or SKIPPED record (decisions §2), so a
 * job moved by it would be a no-op. fauxqs lacks it as well.
 */
import { createHash, randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { QueueEndpoint } from './targets';
import { REDRIVE_ATTRIBUTE, RUN_ATTRIBUTE, stringAttributes } from '../../contract/messages';
import {
  isStageMessage,
  jobDigest,
  parseEnvelope,
  parseStageMessage,
  tenantGroupId,
  type JobEnvelope,
} from '../../src/core/envelope';
import { errorMessage } from '../../src/core/errors';
import type { JobRecord, Ledger } from '../../src/core/ports';

export interface DlqMessage {
  /** Base name of the queue whose DLQ holds the message. */
  readonly queue: string;
  readonly messageId: string;
  readonly receiptHandle: string;
  readonly groupId?: string;
  /** String message attributes: jobId, workspaceId, tenantId, type, the failure reason, ... */
  readonly attributes: Readonly<Record<string, string>>;
  readonly body: string;
  readonly sentAt?: string;
  readonly receiveCount: number;
}

/** What a walk does with a message it visited. */
export type Disposition = 'delete' | 'hold';

/** Seconds a walk keeps messages invisible while it works; released at the end. */
const HOLD_SECONDS = 60;
const MAX_BATCH = 10;
/** Message attributes of the job envelope that travel with a redriven message. */
const JOB_ATTRIBUTES = ['jobId', 'workspaceId', 'tenantId', 'type'] as const;

/** `sha256("<jobId>:<type>:redrive:<dlqMessageId>")`: fresh, so the original send's dedup window does not swallow it. */
export function redriveDeduplicationId(jobId: string, type: string, dlqMessageId: string): string {
  return copyDeduplicationId('redrive', jobId, type, dlqMessageId);
}

/** The dedup id of a copy of a DLQ message: one per copied message and purpose, so a retried copy is deduplicated. */
function copyDeduplicationId(
  purpose: 'redrive' | 'requeue',
  jobId: string,
  type: string,
  dlqMessageId: string,
): string {
  return createHash('sha256').update(`${jobId}:${type}:${purpose}:${dlqMessageId}`).digest('hex');
}

function toDlqMessage(queue: string, m: Message): DlqMessage {
  const attributes = Object.fromEntries(
    Object.entries(m.MessageAttributes ?? {}).flatMap(([k, v]) =>
      v.StringValue === undefined ? [] : [[k, v.StringValue]],
    ),
  );
  const sent = m.Attributes?.SentTimestamp;
  return {
    queue,
    messageId: m.MessageId ?? '',
    receiptHandle: m.ReceiptHandle ?? '',
    groupId: m.Attributes?.MessageGroupId,
    attributes,
    body: m.Body ?? '',
    sentAt: sent ? new Date(Number(sent)).toISOString() : undefined,
    receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 0),
  };
}

async function receive(sqs: SQSClient, queue: QueueEndpoint): Promise<DlqMessage[]> {
  const { Messages } = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.dlqUrl,
      MaxNumberOfMessages: MAX_BATCH,
      WaitTimeSeconds: 0,
      VisibilityTimeout: HOLD_SECONDS,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  return (Messages ?? []).map((m) => toDlqMessage(queue.name, m));
}

async function release(sqs: SQSClient, queue: QueueEndpoint, messages: readonly DlqMessage[]): Promise<void> {
  for (let i = 0; i < messages.length; i += MAX_BATCH) {
    const chunk = messages.slice(i, i + MAX_BATCH);
    await sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: queue.dlqUrl,
        Entries: chunk.map((m, n) => ({ Id: String(n), ReceiptHandle: m.receiptHandle, VisibilityTimeout: 0 })),
      }),
    );
  }
}

/**
 * The messages a receive can see now, left on the queue. On a FIFO DLQ that is the head of each
 * group (fauxqs hands out one per group; AWS may hand out more): later ones wait behind it.
 */
export async function peekDlq(sqs: SQSClient, queue: QueueEndpoint): Promise<DlqMessage[]> {
  const seen: DlqMessage[] = [];
  try {
    for (let batch = await receive(sqs, queue); batch.length > 0; batch = await receive(sqs, queue))
      seen.push(...batch);
  } finally {
    await release(sqs, queue, seen);
  }
  return seen;
}

export async function approximateDepth(sqs: SQSClient, queue: QueueEndpoint): Promise<number> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queue.dlqUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

/**
 * Visits a DLQ's messages in queue order. `visit` decides per message; a held message ends its
 * group's walk (FIFO: nothing behind it may be visited before it). Messages sent after the walk
 * started are not visited, so a walk ends even while new failures arrive.
 */
export async function walkDlq(
  sqs: SQSClient,
  queue: QueueEndpoint,
  visit: (message: DlqMessage) => Promise<Disposition>,
): Promise<void> {
  const startedAt = Date.now();
  const held: DlqMessage[] = [];
  const stoppedGroups = new Set<string>();
  try {
    for (let batch = await receive(sqs, queue); batch.length > 0; batch = await receive(sqs, queue)) {
      for (const message of batch) {
        const group = message.groupId;
        const late = message.sentAt !== undefined && Date.parse(message.sentAt) > startedAt;
        const disposition = late || (group !== undefined && stoppedGroups.has(group)) ? 'hold' : await visit(message);
        if (disposition === 'delete') {
          await sqs.send(new DeleteMessageCommand({ QueueUrl: queue.dlqUrl, ReceiptHandle: message.receiptHandle }));
        } else {
          held.push(message);
          if (group !== undefined) stoppedGroups.add(group);
        }
      }
    }
  } finally {
    await release(sqs, queue, held);
  }
}

/** What a sweep does: which messages it acts on, and what it does with each. */
export interface Sweep {
  /** Messages the sweep acts on; the others are held (left as they are, in place). */
  inScope(message: DlqMessage): boolean;
  /** Acts on a message in scope: true when done with it (it is deleted), false to keep it. */
  take(message: DlqMessage): Promise<boolean>;
}

/**
 * Walks a DLQ acting on the messages in scope. On a FIFO DLQ a kept message is copied to its
 * group's tail and the original deleted, so the walk reaches what is behind it and the kept
 * messages stay in their order; on a standard DLQ it is only held.
 */
export async function sweepDlq(sqs: SQSClient, queue: QueueEndpoint, sweep: Sweep): Promise<void> {
  // The copies put at a group's tail are never visited: walkDlq's sent-time check alone would
  // requeue them again and again if this machine's clock ran ahead of SQS's.
  const copies = new Set<string>();
  await walkDlq(sqs, queue, async (message) => {
    if (copies.has(message.messageId) || !sweep.inScope(message)) return 'hold';
    if (await sweep.take(message)) return 'delete';
    if (!queue.fifo) return 'hold';
    copies.add(await requeueAtTail(sqs, queue, message));
    return 'delete';
  });
}

/** The job a DLQ message carries, from its attributes (set on every message by the producer). */
export function messageJob(message: DlqMessage): { jobId: string; type: string; workspaceId?: string } {
  return {
    jobId: message.attributes.jobId ?? '',
    type: message.attributes.type ?? '',
    workspaceId: message.attributes.workspaceId,
  };
}

/**
 * The group fields of a copy of a DLQ message: on FIFO its workspace group and a dedup id; on a
 * stage queue (a fair queue) its tenant's group, from the `tenantId` attribute (a message without
 * one goes without a group: SQS treats it as a tenant of its own).
 */
function groupFields(
  queue: QueueEndpoint,
  message: DlqMessage,
  deduplicationId: () => string,
): { MessageGroupId?: string; MessageDeduplicationId?: string } {
  if (queue.fifo) return { MessageGroupId: message.groupId, MessageDeduplicationId: deduplicationId() };
  const tenantId = message.attributes.tenantId;
  return tenantId ? { MessageGroupId: tenantGroupId(tenantId) } : {};
}

/**
 * Why a DLQ copy is not the job the ledger records, or undefined when it is. Attributes are the
 * sender's to write (a forged message moved to a DLQ keeps its forged `jobId`), so the copy is
 * read: its body must be a job, the job its attributes name, with the request digest the ledger
 * recorded (and, on a stage's DLQ, the pin the sequencer recorded); a copy a build's completion
 * made names its run, which must be the job's current one.
 */
export function copyMismatch(
  queue: Pick<QueueEndpoint, 'fifo'>,
  message: DlqMessage,
  record: JobRecord | undefined,
): string | undefined {
  const named = message.attributes.jobId ?? '';
  let job: JobEnvelope;
  try {
    // The FIFO queue carries envelopes; a stage queue, envelopes with their pin.
    job = queue.fifo ? parseEnvelope(message.body) : parseStageMessage(message.body);
  } catch (error) {
    return `its body is not a job (${errorMessage(error)})`;
  }
  if (job.jobId !== named) return `its body is job ${job.jobId}, its attributes name ${named}`;
  if (record === undefined) return `the ledger has no job ${named}`;
  if (jobDigest(job) !== record.digest) return `its request differs from the one the ledger records for job ${named}`;
  const pin = isStageMessage(job) ? job.pin : undefined;
  if (
    record.pin !== undefined &&
    (pin?.sha !== record.pin.sha || pin.repoUrl !== record.pin.repoUrl || pin.branch !== record.pin.branch)
  ) {
    return `its pin differs from the one the sequencer recorded for job ${named}`;
  }
  const run = message.attributes[RUN_ATTRIBUTE];
  if (run !== undefined && Number(run) !== (record.run ?? 0))
    return `it is the copy of run ${run}; job ${named} is at run ${record.run ?? 0}`;
  return undefined;
}

/** What became of one DLQ copy an operator's redrive looked at. */
export type RedriveOutcome =
  { readonly redriven: true; readonly messageId: string } | { readonly redriven: false; readonly why: string };

/**
 * The operator's redrive of one DLQ copy (`dlq redrive`, `workspace unblock --replay`): the copy
 * is matched against the job's ledger record (copyMismatch), the redrive is recorded on the job
 * (a fresh token: authorizeRedrive), and only then is the copy sent back carrying that token.
 * The pipeline runs a FAILED or SKIPPED job again only for a delivery whose token the ledger
 * holds: the `redrive` attribute alone is anyone's to set (decisions §26).
 */
export async function redriveCopy(
  sqs: SQSClient,
  ledger: Pick<Ledger, 'authorizeRedrive'>,
  queue: QueueEndpoint,
  message: DlqMessage,
  record: JobRecord | undefined,
): Promise<RedriveOutcome> {
  const mismatch = copyMismatch(queue, message, record);
  if (mismatch !== undefined)
    return {
      redriven: false,
      why: `a copy that is not the job the ledger records: ${mismatch} (message ${message.messageId}, left for you)`,
    };
  const token = randomUUID();
  const authorized = await ledger.authorizeRedrive({ jobId: messageJob(message).jobId, token, now: Date.now() });
  if (authorized === undefined)
    return {
      redriven: false,
      why: `it is ${record?.status ?? 'unknown'}, not FAILED or SKIPPED: nothing to run again (message ${message.messageId})`,
    };
  return { redriven: true, messageId: await redriveMessage(sqs, queue, message, token) };
}

/**
 * The send of redriveCopy: a DLQ message back to the queue it came from, with the `redrive`
 * attribute (the token the redrive recorded) and a fresh dedup id. A crash between this send and the delete makes a second
 * redrive of the same message: its dedup id is the same (within 5 minutes), and after that the
 * ledger finds the job SUCCEEDED (or the token spent) and acknowledges the copy.
 */
export async function redriveMessage(
  sqs: SQSClient,
  queue: QueueEndpoint,
  message: DlqMessage,
  token: string,
): Promise<string> {
  const { jobId, type } = messageJob(message);
  const attributes = Object.fromEntries(
    JOB_ATTRIBUTES.flatMap((k) => (message.attributes[k] ? [[k, message.attributes[k]]] : [])),
  );
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queue.url,
      MessageBody: message.body,
      MessageAttributes: stringAttributes({ ...attributes, [REDRIVE_ATTRIBUTE]: token }),
      ...groupFields(queue, message, () => redriveDeduplicationId(jobId, type, message.messageId)),
    }),
  );
  return out.MessageId ?? '';
}

/**
 * Puts a copy of a DLQ message at the back of the DLQ (its group's tail): a walk that must reach
 * the messages behind it keeps it for the operator instead of deleting it.
 */
export async function requeueAtTail(sqs: SQSClient, queue: QueueEndpoint, message: DlqMessage): Promise<string> {
  const { jobId, type } = messageJob(message);
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queue.dlqUrl,
      MessageBody: message.body,
      MessageAttributes: stringAttributes(message.attributes),
      ...groupFields(queue, message, () => copyDeduplicationId('requeue', jobId, type, message.messageId)),
    }),
  );
  return out.MessageId ?? '';
}
