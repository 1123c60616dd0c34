/**
 * DLQ operations on SQS, the same locally (fauxqs) and on AWS. A FIFO DLQ only hands out the next
 * message of a group after the previous one is deleted, so every walk receives in order, holds
 * what it does not act on (visibility timeout) until it is done, then releases it.
 *
 * StartMessageMoveTask is not used, even on AWS: it cannot filter by group and cannot set the
 * `redrive` attribute that lets a claim take over a FAILED or SKIPPED record (decisions §2), so a
 * job moved by it would be a no-op. fauxqs lacks it as well.
 */
import { createHash } from 'node:crypto';
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
import { REDRIVE_ATTRIBUTE, stringAttributes } from '../../contract/messages';
import { tenantGroupId } from '../core/envelope';

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
function copyDeduplicationId(purpose: 'redrive' | 'requeue', jobId: string, type: string, dlqMessageId: string): string {
  return createHash('sha256').update(`${jobId}:${type}:${purpose}:${dlqMessageId}`).digest('hex');
}

function toDlqMessage(queue: string, m: Message): DlqMessage {
  const attributes = Object.fromEntries(
    Object.entries(m.MessageAttributes ?? {}).flatMap(([k, v]) => (v.StringValue === undefined ? [] : [[k, v.StringValue]])),
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
    for (let batch = await receive(sqs, queue); batch.length > 0; batch = await receive(sqs, queue)) seen.push(...batch);
  } finally {
    await release(sqs, queue, seen);
  }
  return seen;
}

export async function approximateDepth(sqs: SQSClient, queue: QueueEndpoint): Promise<number> {
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queue.dlqUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
  );
  return Number(Attributes?.ApproximateNumberOfMessages ?? 0) + Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
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
  return { jobId: message.attributes.jobId ?? '', type: message.attributes.type ?? '', workspaceId: message.attributes.workspaceId };
}

/**
 * The group fields of a copy of a DLQ message: on FIFO its workspace group and a dedup id; on a
 * stage queue (a fair queue) its tenant's group, from the `tenantId` attribute (a message without
 * one goes without a group: SQS treats it as a tenant of its own).
 */
function groupFields(queue: QueueEndpoint, message: DlqMessage, deduplicationId: () => string): { MessageGroupId?: string; MessageDeduplicationId?: string } {
  if (queue.fifo) return { MessageGroupId: message.groupId, MessageDeduplicationId: deduplicationId() };
  const tenantId = message.attributes.tenantId;
  return tenantId ? { MessageGroupId: tenantGroupId(tenantId) } : {};
}

/**
 * Sends a DLQ message back to the queue it came from, with the `redrive` attribute (the DLQ
 * message id) and a fresh dedup id. A crash between this send and the delete makes a second
 * redrive of the same message: its dedup id is the same (within 5 minutes), and after that the
 * ledger finds the job SUCCEEDED and acknowledges the copy.
 */
export async function redriveMessage(sqs: SQSClient, queue: QueueEndpoint, message: DlqMessage): Promise<string> {
  const { jobId, type } = messageJob(message);
  const attributes = Object.fromEntries(JOB_ATTRIBUTES.flatMap((k) => (message.attributes[k] ? [[k, message.attributes[k]]] : [])));
  const out = await sqs.send(
    new SendMessageCommand({
      QueueUrl: queue.url,
      MessageBody: message.body,
      MessageAttributes: stringAttributes({ ...attributes, [REDRIVE_ATTRIBUTE]: message.messageId }),
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
