/** `workspaces`, `workspace show|unblock`: the workspace records and the operator's way out of the fence. */
import type { CommandSpec } from '../command';
import type { CliContext } from '../context';
import { UsageError } from '../errors';
import { table } from '../output';
import { countByStatus, countsText, readOverview, workspaceState } from '../../operator/overview';
import { publicWorkspace, shortSha } from '../../operator/views';
import { requireWorkspace, unblockWorkspace } from '../../operator/workspaces';
import { workspaceFields } from '../views';

export const workspaces: CommandSpec<CliContext> = {
  path: ['workspaces'],
  summary: 'list every workspace: state, head commit and its jobs by current status',
  notes: ['A workspace is listed from its first job\'s turn; "jobs --workspace <id>" lists its jobs.'],
  async run(ctx) {
    const overview = await readOverview(await ctx.ledger());
    const rows = overview.map(
      ({ workspace, jobs }) =>
        [
          workspace.workspaceId,
          workspaceState(workspace),
          shortSha(workspace.head),
          countsText(countByStatus(jobs)),
        ] as const,
    );
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
    '--replay refuses, leaving the workspace BLOCKED, while a skipped job has no message left on the',
    'DLQ to replay ("unfinished" lists such jobs); --drop ends those too.',
  ],
  async run(ctx, { positionals, values }) {
    if ((values.replay === true) === (values.drop === true))
      throw new UsageError('exactly one of --replay or --drop is required', this.path);
    const workspaceId = positionals[0] ?? '';
    const result = await unblockWorkspace(ctx, workspaceId, values.replay === true ? 'replay' : 'drop');
    const lines = [
      `workspace ${workspaceId}: ${result.previousState} -> ${result.workspace.state}`,
      ...result.jobs.map((h) => `  ${h.action.padEnd(8)} ${h.jobId}${h.status ? ` (${h.status})` : ''}`),
    ];
    if (result.jobs.length === 0) lines.push('  no messages of this workspace on the DLQ');
    return { data: { ...result, workspace: publicWorkspace(result.workspace) }, text: lines.join('\n') };
  },
};
