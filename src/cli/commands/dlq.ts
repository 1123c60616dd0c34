/**
 * `dlq list|show|redrive|peek`: triage and recovery of the dead-letter queues. Listing and showing
 * read the ledger, which knows every job it moved to a DLQ (FAILED, SKIPPED, a refused conflicting
 * request) and why, so they never receive a message: a receive raises the message's receive count,
 * and a FIFO DLQ only hands out the head of each group. Only `redrive` (and `peek`, on request)
 * receive.
 */
import { DLQ_RETENTION_DAYS } from '../../../contract/topology';
import { DLQ_ATTRIBUTES } from '../../../contract/messages';
import { messageGroupId } from '../../core/envelope';
import { conflictQueueOf, dlqQueueOf } from '../../core/ledger';
import type { DlqEntry, JobRecord } from '../../core/ports';
import type { QueueEndpoint, Target } from '../../operator/targets';
import { stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import type { DlqMessage } from '../../operator/dlq-messages';
import { EXIT, UsageError } from '../errors';
import { NotFoundError, OutcomeError } from '../../operator/errors';
import { table } from '../output';
import { publicJob } from '../../operator/views';
import { jobFields } from '../views';

// The SQS operations load with the SQS SDK, only when a command here runs (require: see targets.ts).
const dlqOps = (): typeof import('../../operator/dlq-messages') => require('../../operator/dlq-messages');

const DAY_MS = 86_400_000;

const queueOption = {
  queue: { type: 'string', valueName: 'name', description: "only this queue's DLQ (agent-jobs, run-tests, open-pr, ...)" },
} as const;

function selectQueues(target: Target, name: string | undefined, path: readonly string[]): readonly QueueEndpoint[] {
  if (name === undefined) return target.queues;
  const queue = target.queues.find((q) => q.name === name || `${q.name}.fifo` === name);
  if (!queue) throw new UsageError(`unknown queue ${name}: one of ${target.queues.map((q) => q.name).join(', ')}`, path);
  return [queue];
}

/** One job (or refused request) waiting on a DLQ, as the ledger knows it. */
export interface DlqRow {
  readonly queue: string;
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: string;
  /** FAILED, SKIPPED, or CONFLICT for a refused request that reused the job id. */
  readonly status: string;
  readonly reason?: string;
  readonly message?: string;
  readonly blockedBy?: string;
  readonly attempt?: number;
  /** When it went to the DLQ. */
  readonly since: string;
  /** SQS deleted it at the end of the DLQ's retention: the ledger still has the job. */
  readonly expired: boolean;
}

/** The ledger's DLQ list as rows (pure: `now` decides what the retention has expired). */
export function dlqRows(entries: readonly DlqEntry[], now: number): DlqRow[] {
  const expired = (since: string) => Date.parse(since) + DLQ_RETENTION_DAYS * DAY_MS < now;
  return entries.map((entry): DlqRow => {
    if (entry.kind === 'job') return jobRow(entry.record, expired(entry.record.updatedAt));
    const { attempt } = entry;
    return {
      queue: conflictQueueOf(attempt.type, attempt.seenBy) ?? '',
      jobId: attempt.jobId,
      workspaceId: attempt.workspaceId,
      tenantId: attempt.tenantId,
      type: attempt.type,
      status: 'CONFLICT',
      reason: 'CONFLICT',
      message: `a different request reused job id ${attempt.jobId} and was refused; the original job is kept`,
      since: attempt.at,
      expired: expired(attempt.at),
    };
  });
}

function jobRow(job: JobRecord, expired: boolean): DlqRow {
  return {
    queue: dlqQueueOf(job),
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    status: job.status,
    reason: job.error?.reason,
    message: job.error?.message,
    blockedBy: job.blockedBy,
    attempt: job.attempt,
    since: job.updatedAt,
    expired,
  };
}

export const dlqList: CommandSpec<CliContext> = {
  path: ['dlq', 'list'],
  summary: 'list every job waiting on a dead-letter queue, with its ids and reason (from the ledger: receives nothing)',
  options: queueOption,
  notes: [
    'A message the ledger cannot know (a body that is not a job) is counted, not listed: "dlq peek" shows it.',
    `SQS deletes a DLQ message after ${DLQ_RETENTION_DAYS} days; such jobs are listed as expired (the ledger keeps them longer).`,
  ],
  async run(ctx, { values }) {
    const queues = selectQueues(await ctx.target(), stringOption(values, 'queue'), this.path);
    const names = new Set(queues.map((q) => q.name));
    const rows = dlqRows(await (await ctx.ledger()).listDlq(), Date.now()).filter((r) => names.has(r.queue));
    const { sqs } = await ctx.clients();
    const headings: string[] = [];
    for (const queue of queues) {
      const listed = rows.filter((r) => r.queue === queue.name && !r.expired).length;
      // GetQueueAttributes, not a receive: counting leaves the messages as they are.
      const depth = await dlqOps().approximateDepth(sqs, queue);
      headings.push(`${queue.name} DLQ: about ${depth} message(s), ${listed} listed`);
      if (depth > listed) {
        ctx.note(`${queue.name} DLQ: about ${depth - listed} message(s) the ledger does not list (a body that is not a job, or a job that failed before its claim): "dlq peek --queue ${queue.name}" shows them (it receives them)`);
      }
    }
    const tableRows = rows.map((r) => [r.queue, r.jobId, r.type, r.workspaceId, r.expired ? `${r.status} (expired)` : r.status, rowReason(r), r.since] as const);
    const text = [...headings, ...(rows.length ? ['', table(['QUEUE', 'JOB', 'TYPE', 'WORKSPACE', 'STATUS', 'REASON', 'SINCE'], tableRows)] : [])].join('\n');
    return { data: rows, text };
  },
};

function rowReason(row: DlqRow): string {
  if (row.status === 'SKIPPED') return `blocked by ${row.blockedBy ?? '?'}`;
  return [row.reason, row.message].filter(Boolean).join(': ');
}

export const dlqShow: CommandSpec<CliContext> = {
  path: ['dlq', 'show'],
  summary: 'show one job on a DLQ by job id: its ledger record, why it is there and what to do (receives nothing)',
  positionals: [{ name: 'jobId', description: 'the job id (from dlq list)' }],
  async run(ctx, { positionals }) {
    const jobId = positionals[0] ?? '';
    const ledger = await ctx.ledger();
    const [job, conflicts] = await Promise.all([ledger.getJob(jobId), ledger.getConflicts(jobId)]);
    if (!job) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await ctx.target()).label}`);
    const entries: DlqEntry[] = [
      ...(job.status === 'FAILED' || job.status === 'SKIPPED' ? [{ kind: 'job' as const, record: job }] : []),
      ...conflicts.filter((c) => c.seenBy !== 'enqueue').map((attempt) => ({ kind: 'conflict' as const, attempt })),
    ];
    if (entries.length === 0) throw new OutcomeError(`job ${jobId} is ${job.status}: nothing of it waits on a DLQ`);
    const rows = dlqRows(entries, Date.now());
    const lines = [
      jobFields(job, conflicts),
      '',
      ...rows.map((r) => `on the ${r.queue} DLQ since ${r.since}${r.expired ? ' (expired: SQS deleted the message)' : ''}: ${r.status === 'CONFLICT' ? 'a refused conflicting request' : r.status}`),
      `next: ${nextStep(job)}`,
    ];
    return { data: { ...publicJob(job, conflicts), dlq: rows }, text: lines.join('\n') };
  },
};

/** What an operator does with a job on a DLQ. */
function nextStep(job: JobRecord): string {
  if (job.status === 'SKIPPED') return `"workspace unblock ${job.workspaceId} --replay" runs it in order (or --drop cancels it)`;
  if (job.status === 'FAILED') return `fix the cause, then "dlq redrive ${job.jobId}" runs it again`;
  return 'nothing: a refused conflicting request never runs (it leaves the DLQ at the end of its retention)';
}

/** Whether a DLQ message is a refused request that reused a job id: a redrive would be refused again. */
function isConflict(message: DlqMessage): boolean {
  return message.attributes[DLQ_ATTRIBUTES.reason] === 'CONFLICT';
}

interface Redriven {
  readonly queue: string;
  readonly jobId: string;
  readonly messageId: string;
}

interface Left {
  readonly queue: string;
  readonly jobId: string;
  readonly why: string;
}

export const dlqRedrive: CommandSpec<CliContext> = {
  path: ['dlq', 'redrive'],
  summary: 'send jobs on the DLQs back to their queue to run them again: the ones named, or all (order kept per workspace)',
  positionals: [{ name: 'jobId', description: 'only these jobs (default: every job on the DLQs)', optional: true, variadic: true }],
  options: queueOption,
  notes: [
    'Groups of BLOCKED workspaces are left on the DLQ: use "workspace unblock <id> --replay" for them.',
    'A named job is reached behind other messages of its workspace, which keep their order.',
    'Refused conflicting requests are never redriven: they would be refused again.',
  ],
  async run(ctx, { positionals, values }) {
    const target = await ctx.target();
    const queues = selectQueues(target, stringOption(values, 'queue'), this.path);
    const result = positionals.length ? await redriveNamed(ctx, queues, positionals) : await redriveAll(ctx, queues);
    const lines = [
      `redriven: ${result.redriven.length}`,
      ...result.redriven.map((r) => `  ${r.queue}: ${r.jobId}`),
      ...result.left.map((l) => `  left on ${l.queue} DLQ: ${l.jobId} (${l.why})`),
    ];
    const missed = positionals.filter((id) => !result.redriven.some((r) => r.jobId === id));
    return { data: result, text: lines.join('\n'), exitCode: missed.length ? EXIT.failed : EXIT.ok };
  },
};

async function redriveAll(ctx: CliContext, queues: readonly QueueEndpoint[]): Promise<{ redriven: Redriven[]; left: Left[] }> {
  const { sqs } = await ctx.clients();
  const ledger = await ctx.ledger();
  const redriven: Redriven[] = [];
  const left: Left[] = [];
  for (const queue of queues) {
    const blocked = new Map<string, boolean>();
    await dlqOps().walkDlq(sqs, queue, async (message) => {
      const { jobId, workspaceId } = dlqOps().messageJob(message);
      if (isConflict(message)) {
        left.push({ queue: queue.name, jobId, why: 'a refused conflicting request: it would be refused again' });
        return 'hold';
      }
      if (queue.fifo && workspaceId !== undefined) {
        if (!blocked.has(workspaceId)) blocked.set(workspaceId, (await ledger.getWorkspace(workspaceId))?.state === 'BLOCKED');
        if (blocked.get(workspaceId)) {
          left.push({ queue: queue.name, jobId, why: `workspace ${workspaceId} is BLOCKED (group ${messageGroupId(workspaceId)})` });
          return 'hold';
        }
      }
      redriven.push({ queue: queue.name, jobId, messageId: await dlqOps().redriveMessage(sqs, queue, message) });
      return 'delete';
    });
  }
  return { redriven, left };
}

/**
 * The named jobs: each is checked in the ledger first (on a DLQ, its workspace not BLOCKED), then
 * its DLQ is swept for it. On the FIFO DLQ the messages ahead of it in its group are copied to
 * the group's tail, in order, so it is reached without reordering the others.
 */
async function redriveNamed(ctx: CliContext, queues: readonly QueueEndpoint[], jobIds: readonly string[]): Promise<{ redriven: Redriven[]; left: Left[] }> {
  const ledger = await ctx.ledger();
  const { sqs } = await ctx.clients();
  const left: Left[] = [];
  const wanted = new Map<string, JobRecord>();
  for (const jobId of jobIds) {
    const job = await ledger.getJob(jobId);
    if (!job) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await ctx.target()).label}`);
    const queue = dlqQueueOf(job);
    const why = await redriveRefusal(ctx, job);
    if (why) left.push({ queue, jobId, why });
    else wanted.set(jobId, job);
  }
  const redriven: Redriven[] = [];
  for (const queue of queues) {
    const here = [...wanted.values()].filter((j) => dlqQueueOf(j) === queue.name);
    if (here.length === 0) continue;
    const ids = new Set(here.map((j) => j.jobId));
    const groups = new Set(here.map((j) => messageGroupId(j.workspaceId)));
    await dlqOps().sweepDlq(sqs, queue, {
      inScope: (m) => (queue.fifo ? m.groupId !== undefined && groups.has(m.groupId) : ids.has(dlqOps().messageJob(m).jobId)),
      take: async (m) => {
        const { jobId } = dlqOps().messageJob(m);
        if (!ids.has(jobId) || isConflict(m)) return false;
        redriven.push({ queue: queue.name, jobId, messageId: await dlqOps().redriveMessage(sqs, queue, m) });
        ids.delete(jobId);
        return true;
      },
    });
    for (const jobId of ids) left.push({ queue: queue.name, jobId, why: 'no message of it on the DLQ (redriven already, or deleted at the end of its retention)' });
  }
  return { redriven, left };
}

async function redriveRefusal(ctx: CliContext, job: JobRecord): Promise<string | undefined> {
  if (job.status !== 'FAILED' && job.status !== 'SKIPPED') return `it is ${job.status}, not on a DLQ`;
  if (job.pin !== undefined) return undefined; // on its stage's DLQ: no workspace order to keep
  const workspace = await (await ctx.ledger()).getWorkspace(job.workspaceId);
  if (workspace?.state === 'BLOCKED') return `workspace ${job.workspaceId} is BLOCKED: "workspace unblock ${job.workspaceId} --replay" runs its jobs in order`;
  return undefined;
}

export const dlqPeek: CommandSpec<CliContext> = {
  path: ['dlq', 'peek'],
  summary: 'receive the DLQ messages a receive can see now and show them (raises their receive counts)',
  options: queueOption,
  notes: [
    'Prefer "dlq list": it reads the ledger and receives nothing. A FIFO DLQ hands out only the head of each',
    'group; peek is for messages the ledger cannot know (a body that is not a job).',
  ],
  async run(ctx, { values }) {
    const { sqs } = await ctx.clients();
    const shown: (Omit<DlqMessage, 'receiptHandle' | 'body'> & { bodyBytes: number })[] = [];
    for (const queue of selectQueues(await ctx.target(), stringOption(values, 'queue'), this.path)) {
      for (const { receiptHandle: _handle, body, ...rest } of await dlqOps().peekDlq(sqs, queue)) shown.push({ ...rest, bodyBytes: Buffer.byteLength(body) });
    }
    const rows = shown.map((m) => [m.queue, m.messageId, m.attributes.jobId, m.attributes.type, m.attributes[DLQ_ATTRIBUTES.reason], m.receiveCount] as const);
    return { data: shown, text: shown.length ? table(['QUEUE', 'MESSAGE', 'JOB', 'TYPE', 'REASON', 'RECEIVES'], rows) : 'no message visible on the DLQs' };
  },
};
