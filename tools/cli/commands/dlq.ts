/**
 * `dlq list|show|redrive|peek`: triage and recovery of the dead-letter queues. Listing and showing
 * read the ledger, which knows every job it moved to a DLQ (FAILED, SKIPPED, a refused conflicting
 * request) and why, so they never receive a message: a receive raises the message's receive count,
 * and a FIFO DLQ only hands out the head of each group. Only `redrive` (and `peek`, on request)
 * receive. tools/operator/dlq.ts does the reading and the redriving.
 */
import { DLQ_RETENTION_DAYS } from '../../../contract/topology';
import { DLQ_ATTRIBUTES, EVENTBRIDGE_DLQ_ATTRIBUTES } from '../../../contract/messages';
import { userInfo } from 'node:os';
import { dismissalWords, dismissJob, listDlq, peekDlq, redrive, showDlqJob, type DlqRow } from '../../operator/dlq';
import { publicJob } from '../../operator/views';
import { requireString, stringOption, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { EXIT } from '../errors';
import { table } from '../output';
import { jobFields } from '../views';

const queueOption = {
  queue: {
    type: 'string',
    valueName: 'name',
    description: "only this queue's DLQ (agent-jobs, run-tests, open-pr, ..., build-events)",
  },
} as const;

export const dlqList: CommandSpec<CliContext> = {
  path: ['dlq', 'list'],
  summary: 'list every job waiting on a dead-letter queue, with its ids and reason (from the ledger: receives nothing)',
  options: queueOption,
  notes: [
    'A message the ledger cannot know (a body that is not a job) is counted, not listed: "dlq peek" shows it.',
    'The build-events DLQ holds build events, not jobs (EventBridge deliveries that failed): it is counted, and "dlq peek --queue build-events" shows them.',
    `SQS deletes a DLQ message after ${DLQ_RETENTION_DAYS} days; such jobs are listed as expired (the ledger keeps them longer).`,
  ],
  async run(ctx, { values }) {
    const { queues, rows } = await listDlq(ctx, { queue: stringOption(values, 'queue'), withBuildEvents: true });
    const headings = queues.map(({ queue, depth, listed, carries }) => {
      if (carries === 'buildEvents') {
        if (depth > 0)
          ctx.note(
            `${queue} DLQ: build events EventBridge could not deliver (or the consumer could not read): no verdict is lost, the build reconciler records it from the command runner once the job is past its due time; "dlq peek --queue ${queue}" shows each event and what to do`,
          );
        return `${queue} DLQ: about ${depth} message(s) (build events, not jobs: "dlq peek --queue ${queue}" shows them)`;
      }
      if (depth > listed) {
        ctx.note(
          `${queue} DLQ: about ${depth - listed} message(s) the ledger does not list (a body that is not a job, a job that failed before its claim, or the copy of a cancelled or dismissed job that an interrupted command left: run it again): "dlq peek --queue ${queue}" shows them (it receives them)`,
        );
      }
      return `${queue} DLQ: about ${depth} message(s), ${listed} listed`;
    });
    const tableRows = rows.map(
      (r) =>
        [
          r.queue,
          r.jobId,
          r.type,
          r.workspaceId,
          r.expired ? `${r.status} (expired)` : r.status,
          rowReason(r),
          r.since,
        ] as const,
    );
    const text = [
      ...headings,
      ...(rows.length
        ? ['', table(['QUEUE', 'JOB', 'TYPE', 'WORKSPACE', 'STATUS', 'REASON', 'SINCE'], tableRows)]
        : []),
    ].join('\n');
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
    const { job, conflicts, rows, next } = await showDlqJob(ctx, positionals[0] ?? '');
    const lines = [
      jobFields(job, conflicts),
      '',
      ...rows.map(
        (r) =>
          `on the ${r.queue} DLQ since ${r.since}${r.expired ? ' (expired: SQS deleted the message)' : ''}: ${r.status === 'CONFLICT' ? 'a refused conflicting request' : r.status}`,
      ),
      `next: ${next}`,
    ];
    return { data: { ...publicJob(job, conflicts), dlq: rows }, text: lines.join('\n') };
  },
};

export const dlqRedrive: CommandSpec<CliContext> = {
  path: ['dlq', 'redrive'],
  summary:
    'send jobs on the DLQs back to their queue to run them again: the ones named, or all (order kept per workspace)',
  positionals: [
    { name: 'jobId', description: 'only these jobs (default: every job on the DLQs)', optional: true, variadic: true },
  ],
  options: queueOption,
  notes: [
    'Groups of BLOCKED workspaces are left on the DLQ: use "workspace unblock <id> --replay" for them.',
    'A named job is reached behind other messages of its workspace, which keep their order.',
    'Refused conflicting requests are never redriven: they would be refused again.',
    "The build-events DLQ's events go back to the build-events queue (with --queue build-events, or without ids): a verdict",
    'already recorded is not changed; an event its consumer could not read is left.',
    'Without job ids it also deletes the copy an interrupted "cancel" or "dlq dismiss" left of a job that is',
    'CANCELLED or dismissed (reported as removed, never run), as "workspace unblock" does.',
  ],
  async run(ctx, { positionals, values }) {
    const result = await redrive(ctx, { jobIds: positionals, queue: stringOption(values, 'queue') });
    const lines = [
      `redriven: ${result.redriven.length}`,
      ...result.redriven.map((r) => `  ${r.queue}: ${r.jobId}`),
      ...result.left.map((l) => `  left on ${l.queue} DLQ: ${l.jobId} (${l.why})`),
      ...result.removed.map(
        (r) => `  removed from ${r.queue} DLQ: ${r.jobId} (${r.status}, ${r.why}; a copy an interrupted command left)`,
      ),
    ];
    const missed = positionals.filter((id) => !result.redriven.some((r) => r.jobId === id));
    return { data: result, text: lines.join('\n'), exitCode: missed.length ? EXIT.failed : EXIT.ok };
  },
};

export const dlqPeek: CommandSpec<CliContext> = {
  path: ['dlq', 'peek'],
  summary: 'receive the DLQ messages a receive can see now and show them (raises their receive counts)',
  options: queueOption,
  notes: [
    'Prefer "dlq list": it reads the ledger and receives nothing. A FIFO DLQ hands out only the head of each',
    'group (peek says how many wait behind); peek is for messages the ledger cannot know (a body that is not a job).',
    'On the build-events DLQ it shows each build event with its job, why it is there (ERROR_CODE, from EventBridge) and what to do.',
  ],
  async run(ctx, { values }) {
    const { shown, behind } = await peekDlq(ctx, { queue: stringOption(values, 'queue') });
    for (const { queue, count } of behind) {
      ctx.note(
        `${queue} DLQ: about ${count} more message(s) wait behind the head of their group (a FIFO DLQ hands out only the head of each group): "dlq list --queue ${queue}" lists them from the ledger`,
      );
    }
    for (const m of shown) if (m.advice !== undefined) ctx.note(`${m.queue} DLQ, message ${m.messageId}: ${m.advice}`);
    const rows = shown.map(
      (m) =>
        [
          m.queue,
          m.messageId,
          m.attributes.jobId ?? m.buildEvent?.jobId,
          m.attributes.type ?? m.buildEvent?.jobType,
          m.attributes[DLQ_ATTRIBUTES.reason] ?? m.attributes[EVENTBRIDGE_DLQ_ATTRIBUTES.errorCode],
          m.receiveCount,
        ] as const,
    );
    return {
      data: shown,
      text: shown.length
        ? table(['QUEUE', 'MESSAGE', 'JOB', 'TYPE', 'REASON', 'RECEIVES'], rows)
        : 'no message visible on the DLQs',
    };
  },
};

/** Who dismisses, when --by does not say: the user running the CLI. */
function whoRuns(): string {
  try {
    return userInfo().username;
  } catch {
    return process.env['USER'] ?? 'unknown';
  }
}

export const dlqDismiss: CommandSpec<CliContext> = {
  path: ['dlq', 'dismiss'],
  summary: 'record a failed job as dealt with (who, why, when) and remove its DLQ copy: it never runs again',
  positionals: [{ name: 'jobId', description: 'the FAILED job (from dlq list)' }],
  options: {
    reason: {
      type: 'string',
      valueName: 'text',
      description: 'why it needs no redrive (required; kept in the ledger)',
    },
    by: { type: 'string', valueName: 'name', description: 'who dealt with it (default: the user running the command)' },
  },
  notes: [
    'The DLQ alarm counts the messages on the DLQ: removing the copy is what clears it.',
    'A workspace the job blocked stays BLOCKED: "workspace unblock <id> --replay" or "--drop" decides about its skipped jobs.',
    'Running it again is safe: the first dismissal is kept. A skipped job is cancelled instead ("cancel <jobId>").',
    `Exit codes: 0 dismissed (now or before); 1 the job is not FAILED; ${EXIT.notFound} the ledger does not know the job id.`,
  ],
  async run(ctx, { positionals, values }) {
    const reason = requireString(values, 'reason', this.path);
    const jobId = positionals[0] ?? '';
    const result = await dismissJob(ctx, jobId, { by: stringOption(values, 'by') ?? whoRuns(), reason });
    const { job, blockedWorkspace: blocked } = result;
    const lines = [
      `${jobId}: FAILED, ${job.dismissed ? dismissalWords(job.dismissed) : 'dismissed'}${result.alreadyDismissed ? ' (already)' : ''}`,
      `  ${result.queue} DLQ: ${result.removed} copy removed`,
      ...result.left.map((l) => `  left on ${l.queue} DLQ: ${l.why}`),
      ...(blocked
        ? [
            `  workspace ${blocked.workspaceId} stays BLOCKED: "workspace unblock ${blocked.workspaceId} --replay" (or --drop) decides about its skipped jobs`,
          ]
        : []),
    ];
    return {
      data: {
        ...publicJob(job),
        alreadyDismissed: result.alreadyDismissed,
        queue: result.queue,
        removed: result.removed,
        left: result.left,
        ...(blocked && { workspace: { workspaceId: blocked.workspaceId, state: blocked.state } }),
      },
      text: lines.join('\n'),
    };
  },
};
