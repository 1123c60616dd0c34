/** Commands that read or change jobs: status, wait, jobs, cancel (src/operator does the reading and the changing). */
import { setTimeout as sleep } from 'node:timers/promises';
import { TERMINAL_STATUSES } from '../../core/ports';
import { numberOption, requireString, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { EXIT } from '../errors';
import { NotFoundError } from '../../operator/errors';
import { cancelJob, readJob, readJobs, UNKNOWN_JOB_HINT, type JobState } from '../../operator/jobs';
import { listJobsOfWorkspace } from '../../operator/workspaces';
import { table } from '../output';
import { conflictSummary, jobSucceeded, jobSummary, publicJob, statusLabel } from '../../operator/views';
import { jobFields } from '../views';

const WAIT_POLL_MS = 500;
const DEFAULT_WAIT_SECONDS = 600;

export const status: CommandSpec<CliContext> = {
  path: ['status'],
  summary: 'show the ledger record of a job, and any refused request that reused its id',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  notes: ["attempt: deliveries of the job to the worker that runs it (1 = succeeded on its first; a retry, a takeover or a redrive adds one)."],
  async run(ctx, { positionals }) {
    const { job, conflicts } = await readJob(ctx, positionals[0] ?? '');
    return { data: publicJob(job, conflicts), text: jobFields(job, conflicts) };
  },
};

type WaitState = JobState & { readonly jobId: string };

const finished = (s: WaitState) => TERMINAL_STATUSES.includes(s.job.status);
/** A conflict makes the id ambiguous: `wait` cannot say the work asked for under it succeeded. */
const succeeded = (s: WaitState) => jobSucceeded(s.job) && s.conflicts.length === 0;

export const wait: CommandSpec<CliContext> = {
  path: ['wait'],
  summary: 'wait until every job is finished; exit code 0 only when all succeeded',
  notes: [
    `Exit codes: 0 all succeeded; 1 one failed, was skipped or cancelled, its tests failed, or its id was reused`,
    `by a refused request (CONFLICT); ${EXIT.notFound} a job id the ledger does not know (at once); ${EXIT.timedOut} timed out.`,
    'SKIPPED and FAILED are final here: after "workspace unblock --replay" or "dlq redrive", follow the jobs with "status".',
  ],
  positionals: [{ name: 'jobId', description: 'job ids to wait for', variadic: true }],
  options: { timeout: { type: 'string', valueName: 'seconds', description: `give up after this long (default ${DEFAULT_WAIT_SECONDS})` } },
  async run(ctx, { positionals, values }) {
    const timeoutSeconds = numberOption(values, 'timeout', this.path) ?? DEFAULT_WAIT_SECONDS;
    const deadline = Date.now() + timeoutSeconds * 1000;
    let states: WaitState[];
    let lastLine = '';
    for (;;) {
      const read = await readJobs(ctx, positionals);
      // Known once means known for good: an unknown id fails at once instead of waiting out the timeout.
      if (read.unknown.length > 0) {
        throw new NotFoundError(`${read.unknown.map((id) => `job ${id}`).join(', ')} not in the ledger of ${(await ctx.target()).label} (${UNKNOWN_JOB_HINT})`);
      }
      states = read.states;
      const line = states.map((s) => `${s.jobId}=${s.job.status}`).join(' ');
      if (line !== lastLine) ctx.note(`waiting: ${line}`);
      lastLine = line;
      if (states.every(finished) || Date.now() >= deadline) break;
      await sleep(WAIT_POLL_MS);
    }
    const done = states.every(finished);
    const allSucceeded = done && states.every(succeeded);
    const rows = states.map((s) => [s.jobId, s.job.type, statusLabel(s.job), conflictSummary(s.conflicts) ?? jobSummary(s.job)] as const);
    const text = [table(['JOB', 'TYPE', 'STATUS', 'DETAIL'], rows), done ? '' : `timed out after ${timeoutSeconds}s`].filter(Boolean).join('\n');
    return {
      data: states.map((s) => ({ ...publicJob(s.job, s.conflicts), succeeded: finished(s) && succeeded(s) })),
      text,
      exitCode: allSucceeded ? EXIT.ok : done ? EXIT.failed : EXIT.timedOut,
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
    const rows = list.map((j) => [j.wsSeq, j.jobId, j.type, statusLabel(j), jobSummary(j)] as const);
    return {
      data: list.map((j) => publicJob(j)),
      text: list.length ? table(['SEQ', 'JOB', 'TYPE', 'STATUS', 'DETAIL'], rows) : `no jobs for workspace ${workspaceId}`,
    };
  },
};

export const cancel: CommandSpec<CliContext> = {
  path: ['cancel'],
  summary: 'cancel a job that has not started (QUEUED, waiting for its stage, or SKIPPED): it never runs',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  notes: [`Exit codes: 0 cancelled; 1 the job is running or finished; ${EXIT.notFound} the ledger does not know the job id.`],
  async run(ctx, { positionals }) {
    const jobId = positionals[0] ?? '';
    const cancelled = await cancelJob(ctx, jobId);
    return { data: { ...publicJob(cancelled.job), previousStatus: cancelled.previous }, text: `${jobId}: ${cancelled.previous} -> CANCELLED (${cancelled.effect})` };
  },
};
