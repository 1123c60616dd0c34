/** Commands that read or change jobs: status, wait, jobs, cancel (tools/operator does the reading and the changing). */
import { numberOption, requireString, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { EXIT } from '../errors';
import { cancelJob, readJob } from '../../operator/jobs';
import { progressLine, stateSucceeded, waitForJobs, type WaitState } from '../../operator/wait';
import { listJobsOfWorkspace } from '../../operator/workspaces';
import { table } from '../output';
import { conflictSummary, jobSummary, publicJob, seqWords, statusLabel } from '../../operator/views';
import { jobFields } from '../views';

const DEFAULT_WAIT_SECONDS = 600;

export const status: CommandSpec<CliContext> = {
  path: ['status'],
  summary: 'show the ledger record of a job, and any refused request that reused its id',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  notes: [
    'attempt: deliveries of the job to the worker that runs it (1 = succeeded on its first; a retry, a takeover or a redrive adds one).',
  ],
  async run(ctx, { positionals }) {
    const { job, conflicts } = await readJob(ctx, positionals[0] ?? '');
    return { data: publicJob(job, conflicts), text: jobFields(job, conflicts) };
  },
};

export const wait: CommandSpec<CliContext> = {
  path: ['wait'],
  summary: 'wait until every job is finished; exit code 0 only when all succeeded',
  notes: [
    `Exit codes: 0 all succeeded; 1 one failed, was skipped or cancelled, its tests failed, or its id was reused`,
    `by a refused request (CONFLICT); ${EXIT.notFound} a job id the ledger does not know (at once); ${EXIT.timedOut} timed out.`,
    'SKIPPED and FAILED are final here: after "workspace unblock --replay" or "dlq redrive", follow the jobs with "status".',
  ],
  positionals: [{ name: 'jobId', description: 'job ids to wait for', variadic: true }],
  options: {
    timeout: {
      type: 'string',
      valueName: 'seconds',
      description: `give up after this long (default ${DEFAULT_WAIT_SECONDS})`,
    },
  },
  async run(ctx, { positionals, values }) {
    const timeoutSeconds = numberOption(values, 'timeout', this.path) ?? DEFAULT_WAIT_SECONDS;
    const onChange = (states: readonly WaitState[]) => ctx.note(`waiting: ${progressLine(states)}`);
    const { states, finished, succeeded } = await waitForJobs(ctx, positionals, {
      timeoutMs: timeoutSeconds * 1000,
      onChange,
    });
    const rows = states.map(
      (s) =>
        [
          s.jobId,
          s.job.type,
          statusLabel(s.job),
          [jobSummary(s.job), conflictSummary(s.conflicts)].filter(Boolean).join('; '),
        ] as const,
    );
    const text = [
      table(['JOB', 'TYPE', 'STATUS', 'DETAIL'], rows),
      finished ? '' : `timed out after ${timeoutSeconds}s`,
    ]
      .filter(Boolean)
      .join('\n');
    return {
      data: states.map((s) => ({ ...publicJob(s.job, s.conflicts), succeeded: stateSucceeded(s) })),
      text,
      exitCode: succeeded ? EXIT.ok : finished ? EXIT.failed : EXIT.timedOut,
    };
  },
};

export const jobs: CommandSpec<CliContext> = {
  path: ['jobs'],
  summary: "list a workspace's jobs in the order the sequencer took them, then those still queued",
  options: { workspace: { type: 'string', valueName: 'id', description: 'the workspace id (required)' } },
  async run(ctx, { values }) {
    const workspaceId = requireString(values, 'workspace', this.path);
    const list = await listJobsOfWorkspace(ctx, workspaceId);
    const rows = list.map((j) => [seqWords(j), j.jobId, j.type, statusLabel(j), jobSummary(j)] as const);
    return {
      data: list.map((j) => publicJob(j)),
      text: list.length
        ? table(['SEQ', 'JOB', 'TYPE', 'STATUS', 'DETAIL'], rows)
        : `no jobs for workspace ${workspaceId}`,
    };
  },
};

export const cancel: CommandSpec<CliContext> = {
  path: ['cancel'],
  summary:
    'cancel a job that has not started (it never runs), or a running command stage such as run_tests (its build is stopped)',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  notes: [
    'A running apply_patch or open_pr runs to its end (its push or pull request is one request); a finished job stays as it is.',
    `Exit codes: 0 cancelled; 1 refused (finished, or running and not a command stage); ${EXIT.notFound} the ledger does not know the job id.`,
  ],
  async run(ctx, { positionals }) {
    const jobId = positionals[0] ?? '';
    const cancelled = await cancelJob(ctx, jobId);
    return {
      data: { ...publicJob(cancelled.job), previousStatus: cancelled.previous },
      text: `${jobId}: ${cancelled.previous} -> CANCELLED (${cancelled.effect})`,
    };
  },
};
