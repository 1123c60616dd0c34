/** `workspaces`, `workspace show|unblock`: the workspace records and the operator's way out of the fence. */
import { messageGroupId } from '../../core/envelope';
import type { WorkspaceRecord } from '../../core/ports';
import { jobsQueue } from '../../operator/targets';
import type { CommandSpec } from '../command';
import type { CliContext } from '../context';
import { UsageError } from '../errors';
import { NotFoundError } from '../../operator/errors';
import { table } from '../output';
import { countByStatus, countsText, readOverview, workspaceState } from '../../operator/overview';
import { publicWorkspace, shortSha } from '../../operator/views';
import { workspaceFields } from '../views';

// The SQS operations load with the SQS SDK, only when a command here runs (require: see targets.ts).
const dlqOps = (): typeof import('../../operator/dlq-messages') => require('../../operator/dlq-messages');

async function requireWorkspace(ctx: CliContext, workspaceId: string): Promise<WorkspaceRecord> {
  const workspace = await (await ctx.ledger()).getWorkspace(workspaceId);
  if (!workspace) throw new NotFoundError(`workspace ${workspaceId} is not in the ledger of ${(await ctx.target()).label}`);
  return workspace;
}

export const workspaces: CommandSpec<CliContext> = {
  path: ['workspaces'],
  summary: 'list every workspace: state, head commit and its jobs by current status',
  notes: ['A workspace is listed from its first job\'s turn; "jobs --workspace <id>" lists its jobs.'],
  async run(ctx) {
    const overview = await readOverview(await ctx.ledger());
    const rows = overview.map(({ workspace, jobs }) => [workspace.workspaceId, workspaceState(workspace), shortSha(workspace.head), countsText(countByStatus(jobs))] as const);
    return {
      data: overview.map(({ workspace, jobs }) => ({ ...publicWorkspace(workspace), jobs: countByStatus(jobs) })),
      text: overview.length ? table(['WORKSPACE', 'STATE', 'HEAD', 'JOBS'], rows) : 'no workspaces yet',
    };
  },
};

export const workspaceShow: CommandSpec<CliContext> = {
  path: ['workspace', 'show'],
  summary: 'show a workspace: head commit, state and the job that blocked it',
  positionals: [{ name: 'workspaceId', description: 'the workspace id' }],
  async run(ctx, { positionals }) {
    const workspace = await requireWorkspace(ctx, positionals[0] ?? '');
    return { data: publicWorkspace(workspace), text: workspaceFields(workspace) };
  },
};

type Action = 'replayed' | 'dropped' | 'kept';

export const workspaceUnblock: CommandSpec<CliContext> = {
  path: ['workspace', 'unblock'],
  summary: "lift a workspace's fence and replay (in order) or drop its skipped jobs",
  positionals: [{ name: 'workspaceId', description: 'the workspace id' }],
  options: {
    replay: { type: 'boolean', description: 'send the skipped jobs back to the queue, in their original order' },
    drop: { type: 'boolean', description: 'delete the skipped jobs from the DLQ and record them CANCELLED' },
  },
  notes: [
    'Other messages of the workspace on the DLQ (the job that failed) stay there, moved behind the',
    'skipped ones, for "dlq show" and "dlq redrive". Running it again after an interruption is safe.',
  ],
  async run(ctx, { positionals, values }) {
    if ((values.replay === true) === (values.drop === true)) throw new UsageError('exactly one of --replay or --drop is required', this.path);
    const mode = values.replay === true ? 'replay' : 'drop';
    const workspaceId = positionals[0] ?? '';
    const before = await requireWorkspace(ctx, workspaceId);
    const ledger = await ctx.ledger();
    // Unblock first: a replayed job that arrived while the fence was still up would be skipped again.
    const after = before.state === 'BLOCKED' ? await ledger.unblockWorkspace(workspaceId, Date.now()) : before;
    const { sqs } = await ctx.clients();
    const queue = jobsQueue(await ctx.target());
    const group = messageGroupId(workspaceId);
    const handled: { jobId: string; action: Action; status?: string }[] = [];
    await dlqOps().sweepDlq(sqs, queue, {
      inScope: (message) => message.groupId === group,
      take: async (message) => {
        const { jobId } = dlqOps().messageJob(message);
        const job = await ledger.getJob(jobId);
        if (job?.status !== 'SKIPPED') {
          // The job that failed (or a refused request) stays on the DLQ, behind the skipped ones.
          handled.push({ jobId, action: 'kept', status: job?.status });
          return false;
        }
        if (mode === 'replay') {
          await dlqOps().redriveMessage(sqs, queue, message);
          handled.push({ jobId, action: 'replayed' });
        } else {
          const outcome = await ledger.cancel(jobId, Date.now());
          handled.push({ jobId, action: 'dropped', status: outcome.cancelled ? 'CANCELLED' : outcome.record?.status });
        }
        return true;
      },
    });
    const lines = [
      `workspace ${workspaceId}: ${before.state} -> ${after.state}`,
      ...handled.map((h) => `  ${h.action.padEnd(8)} ${h.jobId}${h.status ? ` (${h.status})` : ''}`),
    ];
    if (handled.length === 0) lines.push('  no messages of this workspace on the DLQ');
    return { data: { workspace: publicWorkspace(after), previousState: before.state, mode, jobs: handled }, text: lines.join('\n') };
  },
};
