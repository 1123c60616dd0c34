/** `dlq list|show|redrive`: triage and recovery of the dead-letter queues. */
import { messageGroupId } from '../../core/envelope';
import type { JobRecord } from '../../core/ports';
import type { QueueEndpoint, Target } from '../targets';
import { stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { approximateDepth, messageJob, peekDlq, redriveMessage, walkDlq, type DlqMessage } from '../dlq';
import { OutcomeError, UsageError } from '../errors';
import { fields, table } from '../output';
import { DLQ_ATTRIBUTES } from '../../../contract/messages';

const queueOption = {
  queue: { type: 'string', valueName: 'name', description: 'only this queue\'s DLQ (agent-jobs, run-tests, open-pr, ...)' },
} as const;

function selectQueues(target: Target, name: string | undefined, path: readonly string[]): readonly QueueEndpoint[] {
  if (name === undefined) return target.queues;
  const queue = target.queues.find((q) => q.name === name || `${q.name}.fifo` === name);
  if (!queue) throw new UsageError(`unknown queue ${name}: one of ${target.queues.map((q) => q.name).join(', ')}`, path);
  return [queue];
}

/** Why the message is on the DLQ: the attributes the pipeline sets when it moves a job there (SqsQueueOps). */
export function dlqReason(message: Pick<DlqMessage, 'attributes'>): string | undefined {
  const reason = message.attributes[DLQ_ATTRIBUTES.reason];
  const errorMessage = message.attributes[DLQ_ATTRIBUTES.errorMessage];
  return reason && errorMessage && errorMessage !== reason ? `${reason}: ${errorMessage}` : reason;
}

interface QueueListing {
  readonly queue: string;
  readonly approximateCount: number;
  readonly messages: readonly PublicDlqMessage[];
  /** FIFO only: SKIPPED jobs the ledger knows of that wait behind a group's head. */
  readonly waitingBehind: readonly { readonly jobId: string; readonly type: string; readonly workspaceId: string; readonly blockedBy?: string }[];
}

/** What is shown of a message: never its body (a diff can hold secrets) nor its receipt handle. */
type PublicDlqMessage = Omit<DlqMessage, 'receiptHandle' | 'body'>;

function publicMessage({ receiptHandle: _handle, body: _body, ...rest }: DlqMessage): PublicDlqMessage {
  return rest;
}

async function listQueue(ctx: CliContext, queue: QueueEndpoint): Promise<QueueListing> {
  const { sqs } = await ctx.clients();
  const messages = await peekDlq(sqs, queue);
  const approximateCount = await approximateDepth(sqs, queue);
  const shown = new Set(messages.map((m) => messageJob(m).jobId));
  const workspaces = queue.fifo ? [...new Set(messages.flatMap((m) => messageJob(m).workspaceId ?? []))] : [];
  const ledger = await ctx.ledger();
  const behind = (await Promise.all(workspaces.map((ws) => ledger.listWorkspaceJobs(ws))))
    .flat()
    .filter((j: JobRecord) => j.status === 'SKIPPED' && !shown.has(j.jobId))
    .map((j) => ({ jobId: j.jobId, type: j.type, workspaceId: j.workspaceId, blockedBy: j.blockedBy }));
  return { queue: queue.name, approximateCount, messages: messages.map(publicMessage), waitingBehind: behind };
}

export const dlqList: CommandSpec<CliContext> = {
  path: ['dlq', 'list'],
  summary: 'list the messages on the dead-letter queues, with their job ids and reasons',
  options: queueOption,
  notes: ['A FIFO DLQ shows the head of each workspace group; SKIPPED jobs behind it are listed from the ledger.'],
  async run(ctx, { values }) {
    const queues = selectQueues(await ctx.target(), stringOption(values, 'queue'), this.path);
    const listings: QueueListing[] = [];
    for (const queue of queues) listings.push(await listQueue(ctx, queue));
    const text = listings
      .map((l) => {
        const rows = [
          ...l.messages.map((m) => [m.messageId, m.attributes.jobId, m.attributes.type, m.attributes.workspaceId, dlqReason(m) ?? '', m.sentAt] as const),
          ...l.waitingBehind.map((j) => ['(behind head)', j.jobId, j.type, j.workspaceId, `SKIPPED, blocked by ${j.blockedBy ?? '?'}`, ''] as const),
        ];
        const hidden = l.approximateCount - l.messages.length - l.waitingBehind.length;
        const heading = `${l.queue} DLQ: ${l.approximateCount} message(s)${hidden > 0 ? `, ${hidden} more behind the group heads shown` : ''}`;
        return rows.length ? `${heading}\n${table(['MESSAGE', 'JOB', 'TYPE', 'WORKSPACE', 'REASON', 'SENT'], rows)}` : heading;
      })
      .join('\n\n');
    return { data: listings, text };
  },
};

export const dlqShow: CommandSpec<CliContext> = {
  path: ['dlq', 'show'],
  summary: 'show one DLQ message: ids, attributes, reason and the ledger record of its job',
  positionals: [{ name: 'messageId', description: 'the SQS message id (from dlq list)' }],
  options: queueOption,
  async run(ctx, { positionals, values }) {
    const messageId = positionals[0] ?? '';
    const { sqs } = await ctx.clients();
    for (const queue of selectQueues(await ctx.target(), stringOption(values, 'queue'), this.path)) {
      const message = (await peekDlq(sqs, queue)).find((m) => m.messageId === messageId);
      if (!message) continue;
      const job = await (await ctx.ledger()).getJob(messageJob(message).jobId);
      const shown = { ...publicMessage(message), reason: dlqReason(message), bodyBytes: Buffer.byteLength(message.body), job };
      const text = fields([
        ['queue', `${queue.name} DLQ`],
        ['messageId', message.messageId],
        ['group', message.groupId],
        ['sent', message.sentAt],
        ['receives', message.receiveCount],
        ['reason', dlqReason(message)],
        ['attributes', message.attributes],
        ['ledger', job ? `${job.status}${job.error ? ` ${job.error.reason}: ${job.error.message}` : ''}` : 'no record'],
      ]);
      return { data: shown, text };
    }
    throw new OutcomeError(`message ${messageId} is not visible on any DLQ (a FIFO DLQ shows only the head of each group: see dlq list)`);
  },
};

export const dlqRedrive: CommandSpec<CliContext> = {
  path: ['dlq', 'redrive'],
  summary: 'send DLQ messages back to their queue (order kept per workspace) to run them again',
  options: queueOption,
  notes: ['Groups of BLOCKED workspaces are left on the DLQ: use "workspace unblock <id> --replay" for them.'],
  async run(ctx, { values }) {
    const { sqs } = await ctx.clients();
    const ledger = await ctx.ledger();
    const redriven: { queue: string; jobId: string; messageId: string }[] = [];
    const left: { queue: string; jobId: string; why: string }[] = [];
    for (const queue of selectQueues(await ctx.target(), stringOption(values, 'queue'), this.path)) {
      const blocked = new Map<string, boolean>();
      await walkDlq(sqs, queue, async (message) => {
        const { jobId, workspaceId } = messageJob(message);
        if (queue.fifo && workspaceId !== undefined) {
          if (!blocked.has(workspaceId)) blocked.set(workspaceId, (await ledger.getWorkspace(workspaceId))?.state === 'BLOCKED');
          if (blocked.get(workspaceId)) {
            left.push({ queue: queue.name, jobId, why: `workspace ${workspaceId} is BLOCKED (group ${messageGroupId(workspaceId)})` });
            return 'hold';
          }
        }
        redriven.push({ queue: queue.name, jobId, messageId: await redriveMessage(sqs, queue, message) });
        return 'delete';
      });
    }
    const lines = [
      `redriven: ${redriven.length}`,
      ...redriven.map((r) => `  ${r.queue}: ${r.jobId}`),
      ...left.map((l) => `  left on ${l.queue} DLQ: ${l.jobId} (${l.why})`),
    ];
    return { data: { redriven, left }, text: lines.join('\n') };
  },
};
