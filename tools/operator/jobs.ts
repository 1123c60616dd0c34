/** One job: its record and the refused requests that reused its id, several at once, and cancel. */
import * as path from 'node:path';
import { BUILD_RECONCILER } from '../../contract/job-types';
import { byCreation, cancelRule } from '../../src/core/ledger';
import type { CancelOutcome, ConflictAttempt, JobRecord, JobStatus } from '../../src/core/ports';
import { TEST_RUNS_DIR } from '../local/state-dir';
import type { Connection } from './connection';
import { isSkippedAwaitingReplay, pastDlqRetention, removeDlqCopies } from './dlq';
import { NotFoundError, OutcomeError } from './errors';
import { requireValidId } from './ids';
import { statusLabel } from './views';

/** Where an unknown id comes from, for the error message. */
export const UNKNOWN_JOB_HINT =
  'never enqueued, or sent without the ledger (e.g. by the producer library without `ledger`) and not taken yet';

export async function requireJob(connection: Connection, jobId: string): Promise<JobRecord> {
  requireValidId('jobId', jobId);
  const job = await (await connection.ledger()).getJob(jobId);
  if (!job)
    throw new NotFoundError(
      `job ${jobId} is not in the ledger of ${(await connection.target()).label} (${UNKNOWN_JOB_HINT})`,
    );
  return job;
}

export interface JobState {
  readonly job: JobRecord;
  /** Requests refused because they reused this job id (the job itself is unchanged by them). */
  readonly conflicts: readonly ConflictAttempt[];
}

/** A job and the refused requests that reused its id; NotFoundError when the ledger does not know it. */
export async function readJob(connection: Connection, jobId: string): Promise<JobState> {
  requireValidId('jobId', jobId);
  const ledger = await connection.ledger();
  const [job, conflicts] = await Promise.all([requireJob(connection, jobId), ledger.getConflicts(jobId)]);
  return { job, conflicts };
}

/** Several jobs at once, in the order asked; the ids the ledger does not know are returned apart. */
export async function readJobs(
  connection: Connection,
  jobIds: readonly string[],
): Promise<{ states: (JobState & { jobId: string })[]; unknown: string[] }> {
  for (const jobId of jobIds) requireValidId('jobId', jobId);
  const ledger = await connection.ledger();
  const read = await Promise.all(
    jobIds.map(async (jobId) => ({
      jobId,
      job: await ledger.getJob(jobId),
      conflicts: await ledger.getConflicts(jobId),
    })),
  );
  const states = read.flatMap((s) => (s.job ? [{ ...s, job: s.job }] : []));
  return { states, unknown: read.filter((s) => !s.job).map((s) => s.jobId) };
}

// The saved DLQ copies of the local platform load only for `unfinished` (require: see targets.ts).
const dlqCopies = (): typeof import('../local/dlq-copies') => require('../local/dlq-copies');

/**
 * Jobs sent but without an outcome (QUEUED, IN_FLIGHT, FORWARDED), the ones to send again after a
 * crash, and SKIPPED jobs with no message left on the DLQ to replay (strandedSkipped), oldest first.
 */
export async function listUnfinished(connection: Connection, workspaceId?: string): Promise<JobRecord[]> {
  const ledger = await connection.ledger();
  const [unfinished, stranded] = await Promise.all([ledger.listUnfinished(), strandedSkipped(connection)]);
  return [...unfinished, ...stranded]
    .sort(byCreation)
    .filter((j) => workspaceId === undefined || j.workspaceId === workspaceId);
}

/**
 * SKIPPED jobs nothing can replay, because their DLQ message is gone: on the local platform, those
 * with no saved copy (tools/local/dlq-copies.ts puts every saved one back at start); on AWS, those
 * skipped longer ago than the DLQ keeps messages. A replay on its way (redriveToken) is not stranded.
 */
async function strandedSkipped(connection: Connection, now = Date.now()): Promise<JobRecord[]> {
  const [ledger, target] = await Promise.all([connection.ledger(), connection.target()]);
  const skipped = (await ledger.listDlq()).flatMap((entry) =>
    entry.kind === 'job' && isSkippedAwaitingReplay(entry.record) ? [entry.record] : [],
  );
  if (target.local === undefined) return skipped.filter((job) => pastDlqRetention(job.updatedAt, now));
  const store = new (dlqCopies().DlqCopyStore)(target.local.stateDir);
  const saved = await Promise.all(skipped.map(async (job) => (await store.matching(job)) !== undefined));
  return skipped.filter((_, i) => !saved[i]);
}

// The local test runner's module loads only for a cancel that stops a local build (require: see targets.ts).
const loadTestRunner = (): typeof import('../local/test-runner') => require('../local/test-runner');

/** What a cancel means for a job in each status it applies to. */
const CANCEL_EFFECT: Partial<Record<JobStatus, string>> = {
  QUEUED: 'acknowledged without running when its turn comes',
  FORWARDED: 'its stage acknowledges it without running',
  SKIPPED: 'its DLQ copy is removed: it never runs',
};

export interface Cancelled {
  readonly job: JobRecord;
  readonly previous: JobStatus;
  /** What the cancel means for it, in words. */
  readonly effect: string;
}

/**
 * Cancels a job that has not started (QUEUED, waiting for its stage, or SKIPPED): it never runs;
 * a skipped job's DLQ copy is removed with it, so the DLQ holds only what still waits for a
 * decision. Or a command stage's job its stage has taken (decisions §33): it is CANCELLED at once
 * and its build is stopped, by the build reconciler (it alone may stop builds: on AWS within its
 * schedule) and, on the local platform, at once as well. A job that cannot be cancelled now
 * (finished, an apply_patch or open_pr that runs, a build being started) is refused
 * (OutcomeError), an unknown one is NotFoundError; a cancel of a skipped job run again removes a
 * copy its interrupted first run left.
 */
export async function cancelJob(connection: Connection, jobId: string, now = Date.now()): Promise<Cancelled> {
  requireValidId('jobId', jobId);
  const outcome: CancelOutcome = await (await connection.ledger()).cancel(jobId, now);
  if (outcome.cancelled) {
    if (outcome.previous === 'SKIPPED') await removeDlqCopies(connection, outcome.record);
    const effect = CANCEL_EFFECT[outcome.previous] ?? (await stopBuildOf(connection, outcome.record));
    return { job: outcome.record, previous: outcome.previous, effect };
  }
  if (!outcome.record)
    throw new NotFoundError(
      `job ${jobId} is not in the ledger of ${(await connection.target()).label}: nothing to cancel (${UNKNOWN_JOB_HINT})`,
    );
  const { record } = outcome;
  const leftover =
    record.status === 'CANCELLED' && record.blockedBy !== undefined
      ? (await removeDlqCopies(connection, record)).removed
      : 0;
  const label = statusLabel(record);
  const rule = cancelRule(record, now);
  const why =
    rule.kind === 'refused' && record.status === 'IN_FLIGHT'
      ? rule.why
      : `${record.status} already${label === record.status ? '' : ` (${label})`}`;
  throw new OutcomeError(
    `job ${jobId} is ${why}${leftover ? `; the DLQ copy an interrupted cancel left is removed now` : ''}`,
  );
}

/**
 * The stop of a cancelled job's build, in words. On the local platform the run is asked to end now
 * (the platform's runner ends it within a moment); the reconciler stops it too, which is all there
 * is on AWS, where the operator's own credentials need no CodeBuild permission.
 */
async function stopBuildOf(connection: Connection, job: JobRecord): Promise<string> {
  const buildId = job.progress?.['buildId'];
  const after = 'a completion that comes after it changes nothing';
  if (buildId === undefined) return `no build was recorded for it: none starts now; ${after}`;
  const { local } = await connection.target();
  if (local === undefined)
    return `its build ${buildId} is stopped by the build reconciler within ${BUILD_RECONCILER.everyMinutes} minutes (CodeBuild StopBuild); ${after}`;
  await loadTestRunner().requestStop(path.join(local.stateDir, TEST_RUNS_DIR), buildId);
  return `its build ${buildId} is stopped; ${after}`;
}
