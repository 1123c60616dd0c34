/** Commands that read or change one job: status, wait, jobs, cancel. */
import { setTimeout as sleep } from 'node:timers/promises';
import { TERMINAL_STATUSES, type JobRecord } from '../../core/ports';
import { numberOption, requireString, type CommandSpec } from '../command';
import type { CliContext } from '../context';
import { OutcomeError } from '../errors';
import { fields, shortSha, table } from '../output';

/** Status shown for a job the ledger has not seen yet (still on the queue). */
export const PENDING = 'PENDING';
const WAIT_POLL_MS = 500;
const DEFAULT_WAIT_SECONDS = 600;

const SUMMARY_CHARS = 100;

/** One line about a job's outcome; `status --json` has the whole record. */
export function jobSummary(job: JobRecord): string {
  if (job.error) return `${job.error.reason}: ${job.error.message}`;
  if (job.blockedBy) return `blocked by ${job.blockedBy}`;
  if (job.result) return resultSummary(job.result);
  if (job.pin) return `pinned to ${shortSha(job.pin.sha)}`;
  return '';
}

/** The results the built-in job types record; any other result as compact JSON. */
function resultSummary(result: Record<string, unknown>): string {
  const text = (key: string) => (typeof result[key] === 'string' || typeof result[key] === 'number' ? String(result[key]) : undefined);
  const verdict = text('verdict');
  if (verdict) return `tests ${verdict} (exit ${text('exitCode') ?? '?'}) at ${shortSha(text('sha')) ?? '?'}`;
  const commit = text('commitSha');
  if (commit) return `commit ${shortSha(commit)}${result.alreadyApplied === true ? ' (already on the branch)' : ''}`;
  const url = text('url');
  if (url) return `pull request #${text('number') ?? '?'} ${url}`;
  const json = JSON.stringify(result);
  return json.length > SUMMARY_CHARS ? `${json.slice(0, SUMMARY_CHARS - 1)}…` : json;
}

export function jobFields(job: JobRecord): string {
  return fields([
    ['jobId', job.jobId],
    ['type', job.type],
    ['status', job.status],
    ['workspace', job.workspaceId],
    ['tenant', job.tenantId],
    ['seq', job.wsSeq],
    ['attempt', job.attempt],
    ['pin', job.pin?.sha],
    ['blockedBy', job.blockedBy],
    ['error', job.error ? `${job.error.reason}: ${job.error.message}` : undefined],
    ['result', job.result],
    ['created', job.createdAt],
    ['updated', job.updatedAt],
  ]);
}

async function requireJob(ctx: CliContext, jobId: string): Promise<JobRecord> {
  const job = await (await ctx.ledger()).getJob(jobId);
  if (!job) throw new OutcomeError(`job ${jobId} is not in the ledger of ${(await ctx.target()).label} (not delivered yet, or unknown)`);
  return job;
}

export const status: CommandSpec<CliContext> = {
  path: ['status'],
  summary: 'show the ledger record of a job',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  async run(ctx, { positionals }) {
    const job = await requireJob(ctx, positionals[0] ?? '');
    return { data: job, text: jobFields(job) };
  },
};

type WaitState = { jobId: string; status: string; job?: JobRecord };

const allFinished = (states: readonly WaitState[]) => states.every((s) => s.job && TERMINAL_STATUSES.includes(s.job.status));

/** SUCCEEDED, and for a test run also green: `wait` answers "did the work succeed", not "did it run". */
export function jobSucceeded(job: JobRecord): boolean {
  return job.status === 'SUCCEEDED' && job.result?.verdict !== 'failed';
}

export const wait: CommandSpec<CliContext> = {
  path: ['wait'],
  summary: 'wait until every job is finished; exit code 0 only when all succeeded',
  notes: [
    'A run_tests job whose tests failed counts as not succeeded (its job status is SUCCEEDED, verdict failed).',
    'SKIPPED and FAILED are final here: after "workspace unblock --replay" or "dlq redrive", follow the jobs with "status".',
  ],
  positionals: [{ name: 'jobId', description: 'job ids to wait for', variadic: true }],
  options: { timeout: { type: 'string', valueName: 'seconds', description: `give up after this long (default ${DEFAULT_WAIT_SECONDS})` } },
  async run(ctx, { positionals, values }) {
    const timeoutSeconds = numberOption(values, 'timeout', this.path) ?? DEFAULT_WAIT_SECONDS;
    const ledger = await ctx.ledger();
    const deadline = Date.now() + timeoutSeconds * 1000;
    let states: WaitState[] = [];
    let lastLine = '';
    for (;;) {
      states = await Promise.all(
        positionals.map(async (jobId) => {
          const job = await ledger.getJob(jobId);
          return { jobId, status: job?.status ?? PENDING, job };
        }),
      );
      const line = states.map((s) => `${s.jobId}=${s.status}`).join(' ');
      if (line !== lastLine) ctx.note(`waiting: ${line}`);
      lastLine = line;
      if (allFinished(states) || Date.now() >= deadline) break;
      await sleep(WAIT_POLL_MS);
    }
    const done = allFinished(states);
    const succeeded = done && states.every((s) => s.job !== undefined && jobSucceeded(s.job));
    const rows = states.map((s) => [s.jobId, s.job?.type, s.status, s.job ? jobSummary(s.job) : ''] as const);
    const text = [table(['JOB', 'TYPE', 'STATUS', 'DETAIL'], rows), done ? '' : `timed out after ${timeoutSeconds}s`].filter(Boolean).join('\n');
    return {
      data: { succeeded, timedOut: !done, jobs: states.map((s) => s.job ?? { jobId: s.jobId, status: s.status }) },
      text,
      exitCode: succeeded ? 0 : 1,
    };
  },
};

export const jobs: CommandSpec<CliContext> = {
  path: ['jobs'],
  summary: "list a workspace's jobs in the order the sequencer took them",
  options: { workspace: { type: 'string', valueName: 'id', description: 'the workspace id (required)' } },
  async run(ctx, { values }) {
    const workspaceId = requireString(values, 'workspace', this.path);
    const list = await (await ctx.ledger()).listWorkspaceJobs(workspaceId);
    const rows = list.map((j) => [j.wsSeq, j.jobId, j.type, j.status, jobSummary(j)] as const);
    return { data: list, text: list.length ? table(['SEQ', 'JOB', 'TYPE', 'STATUS', 'DETAIL'], rows) : `no jobs for workspace ${workspaceId}` };
  },
};

export const cancel: CommandSpec<CliContext> = {
  path: ['cancel'],
  summary: 'cancel a job that has not started: it becomes CANCELLED and is a no-op when delivered',
  positionals: [{ name: 'jobId', description: 'the job id' }],
  async run(ctx, { positionals }) {
    const jobId = positionals[0] ?? '';
    const outcome = await (await ctx.ledger()).cancel(jobId, Date.now());
    if (!outcome.cancelled) {
      throw new OutcomeError(`job ${jobId} is ${outcome.record.status}: only a job that has not started (or a SKIPPED one) can be cancelled`);
    }
    return { data: { jobId, status: 'CANCELLED' }, text: `${jobId} CANCELLED` };
  },
};

