/**
 * Everything an operator triages a job by, in one read: its record and the refused requests that
 * reused its id, where it waits on a DLQ and what to do next, the runbook's advice for its error,
 * which actions apply to it now, its logs, and the commit it made with its diff.
 *
 * The ledger keeps no payload (it travels on the queue; a diff can hold secrets): the diff shown is
 * the commit's, read from the workspace's repository. Only the local platform's repositories are
 * readable here; on a stack the commit is named and the host shows it.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { cancelRule, dismissRefusal, dlqQueueOf, waitsOnDlq } from '../../src/core/ledger';
import type { JobRecord, WorkspaceRecord } from '../../src/core/ports';
import { platformRepositoryOf } from '../local/state-dir';
import type { Connection } from './connection';
import { dlqRows, jobDlqEntries, nextStep, type DlqRow } from './dlq';
import { readJobLogs, type JobLogs } from './job-logs';
import { readJob, type JobState } from './jobs';
import { adviceHolds, runbookAdvice, type FailureNow, type RunbookAdvice } from './runbook';
import type { Target } from './targets';

const execFileP = promisify(execFile);
/** The most of a commit's diff shown; the rest is in the repository. */
export const DIFF_SHOWN_BYTES = 256 * 1024;

export interface JobCommit {
  readonly sha: string;
  /** `made`: an apply_patch's commit; `pinned`: the commit a staged job ran at. */
  readonly kind: 'made' | 'pinned';
  readonly repoUrl?: string;
  readonly branch?: string;
  /** `git show` of the commit (message and diff), cut at DIFF_SHOWN_BYTES; absent when not readable from here. */
  readonly show?: string;
  readonly truncated?: boolean;
  /** Why the diff is not shown, when it is not. */
  readonly unavailable?: string;
}

export interface JobDetail extends JobState {
  /** Where it (and the refused requests that reused its id) waits on a DLQ; empty when nowhere. */
  readonly dlq: readonly DlqRow[];
  /** What to do next about it on a DLQ, in words. */
  readonly next?: string;
  /** The runbook's row for its error; `holds`: it describes the job as it stands (else it is what the failure meant when recorded). */
  readonly advice?: RunbookAdvice & { readonly holds: boolean };
  /** Where its failure stands now, in words (Markdown `code` spans), once the runbook's row no longer describes it. */
  readonly now?: string;
  /** The actions that apply to it as it is now. */
  readonly actions: {
    readonly cancel: boolean;
    readonly redrive: boolean;
    readonly unblock: boolean;
    readonly dismiss: boolean;
  };
  readonly commit?: JobCommit;
  readonly logs: JobLogs;
}

export async function readJobDetail(connection: Connection, jobId: string, now = Date.now()): Promise<JobDetail> {
  const { job, conflicts } = await readJob(connection, jobId);
  const target = await connection.target();
  const dlq = dlqRows(jobDlqEntries(job, conflicts), now);
  const workspace = await (await connection.ledger()).getWorkspace(job.workspaceId);
  const [logs, commit] = await Promise.all([readJobLogs(target, job), jobCommit(target, job, workspace?.repo)]);
  const failure = failureNow(job, workspace);
  const row = job.error ? runbookAdvice(job.error.reason) : undefined;
  const holds = row !== undefined && adviceHolds(row, failure);
  return {
    job,
    conflicts,
    dlq,
    next: dlq.length ? nextStep(job) : undefined,
    advice: row && { ...row, holds },
    now: job.error && !holds ? standingWords(job, workspace, failure) : undefined,
    actions: {
      cancel: cancelRule(job, now).kind !== 'refused',
      // A SKIPPED job, or a FAILED one of a blocked workspace, goes back with the unblock (in order).
      redrive: waitsOnDlq(job) && job.status === 'FAILED' && (job.pin !== undefined || workspace?.state !== 'BLOCKED'),
      // A failure dealt with otherwise: recorded with who and why, its DLQ copy removed (dismissJob).
      dismiss: dismissRefusal(job) === undefined && job.dismissed === undefined,
      unblock: workspace?.state === 'BLOCKED' && (job.status === 'SKIPPED' || workspace.blockedBy === job.jobId),
    },
    commit,
    logs,
  };
}

function failureNow(job: JobRecord, workspace: WorkspaceRecord | undefined): FailureNow {
  const blocked = workspace?.state === 'BLOCKED';
  return {
    open: waitsOnDlq(job),
    blocking: job.status === 'SKIPPED' ? blocked : blocked && workspace?.blockedBy === job.jobId,
  };
}

/** A failed, skipped or cancelled job as it stands now, and its workspace: what is left to do. */
function standingWords(job: JobRecord, workspace: WorkspaceRecord | undefined, failure: FailureNow): string {
  const ws = job.workspaceId;
  const self =
    job.dismissed !== undefined
      ? 'its failure was dismissed: it never runs again (to run its work, send it as a new job)'
      : job.status === 'CANCELLED'
        ? 'it was cancelled: it never runs'
        : job.redriveToken !== undefined
          ? 'it was sent back to its queue (a redrive or a replay): it runs again at its turn'
          : job.status === 'FAILED'
            ? `it waits on the ${dlqQueueOf(job)} DLQ: ${nextStep(job)}`
            : `it is ${job.status}`;
  const standing =
    workspace === undefined
      ? ''
      : failure.blocking
        ? `; it still blocks workspace ${ws}: repair the cause, then unblock it (\`workspace unblock ${ws} --replay\` or \`--drop\`)`
        : workspace.state === 'BLOCKED'
          ? `; its workspace ${ws} is BLOCKED by job ${workspace.blockedBy ?? '?'} (${workspace.blockedReason ?? '?'})`
          : `; its workspace ${ws} is ACTIVE`;
  return `${self}${standing}.`;
}

async function jobCommit(
  target: Target,
  job: JobRecord,
  repo: { url: string; branch: string } | undefined,
): Promise<JobCommit | undefined> {
  const made = typeof job.result?.['commitSha'] === 'string' ? (job.result['commitSha'] as string) : undefined;
  const commit = made
    ? { sha: made, kind: 'made' as const, repoUrl: repo?.url, branch: repo?.branch }
    : job.pin
      ? { sha: job.pin.sha, kind: 'pinned' as const, repoUrl: job.pin.repoUrl, branch: job.pin.branch }
      : undefined;
  if (commit === undefined) return undefined;
  if (!target.local)
    return {
      ...commit,
      unavailable: `the repository is on your git host: ${commit.repoUrl ?? 'its URL'} at ${commit.sha}`,
    };
  const gitDir = commit.repoUrl ? platformRepositoryOf(target.local.stateDir, commit.repoUrl) : undefined;
  if (gitDir === undefined) return { ...commit, unavailable: 'not a repository of this platform' };
  try {
    const { stdout } = await execFileP(
      'git',
      ['--git-dir', gitDir, 'show', '--no-color', '--format=fuller', '--patch', commit.sha],
      { maxBuffer: 64 * 1024 * 1024, encoding: 'buffer' },
    );
    const truncated = stdout.length > DIFF_SHOWN_BYTES;
    return { ...commit, show: stdout.subarray(0, DIFF_SHOWN_BYTES).toString('utf8'), truncated };
  } catch (error) {
    return { ...commit, unavailable: `git show failed: ${(error as Error).message.split('\n')[0] ?? ''}` };
  }
}
