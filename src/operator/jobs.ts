/** One job: its record and the refused requests that reused its id, several at once, and cancel. */
import type { CancelOutcome, ConflictAttempt, JobRecord, JobStatus } from '../core/ports';
import type { Connection } from './connection';
import { NotFoundError, OutcomeError } from './errors';
import { statusLabel } from './views';

/** Where an unknown id comes from, for the error message. */
export const UNKNOWN_JOB_HINT = 'never enqueued, or sent without the ledger (e.g. by the producer library without `ledger`) and not taken yet';

export async function requireJob(connection: Connection, jobId: string): Promise<JobRecord> {
  const job = await (await connection.ledger()).getJob(jobId);
  if (!job) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await connection.target()).label} (${UNKNOWN_JOB_HINT})`);
  return job;
}

export interface JobState {
  readonly job: JobRecord;
  /** Requests refused because they reused this job id (the job itself is unchanged by them). */
  readonly conflicts: readonly ConflictAttempt[];
}

/** A job and the refused requests that reused its id; NotFoundError when the ledger does not know it. */
export async function readJob(connection: Connection, jobId: string): Promise<JobState> {
  const ledger = await connection.ledger();
  const [job, conflicts] = await Promise.all([requireJob(connection, jobId), ledger.getConflicts(jobId)]);
  return { job, conflicts };
}

/** Several jobs at once, in the order asked; the ids the ledger does not know are returned apart. */
export async function readJobs(connection: Connection, jobIds: readonly string[]): Promise<{ states: (JobState & { jobId: string })[]; unknown: string[] }> {
  const ledger = await connection.ledger();
  const read = await Promise.all(jobIds.map(async (jobId) => ({ jobId, job: await ledger.getJob(jobId), conflicts: await ledger.getConflicts(jobId) })));
  const states = read.flatMap((s) => (s.job ? [{ ...s, job: s.job }] : []));
  return { states, unknown: read.filter((s) => !s.job).map((s) => s.jobId) };
}

/** Jobs sent but without an outcome (QUEUED, IN_FLIGHT, FORWARDED), oldest first: the ones to send again after a crash. */
export async function listUnfinished(connection: Connection, workspaceId?: string): Promise<JobRecord[]> {
  const list = await (await connection.ledger()).listUnfinished();
  return list.filter((j) => workspaceId === undefined || j.workspaceId === workspaceId);
}

/** What a cancel means for a job in each status it applies to. */
const CANCEL_EFFECT: Partial<Record<JobStatus, string>> = {
  QUEUED: 'acknowledged without running when its turn comes',
  FORWARDED: 'its stage acknowledges it without running',
  SKIPPED: 'a replay acknowledges it without running; "workspace unblock --drop" removes it from the DLQ',
};

export interface Cancelled {
  readonly job: JobRecord;
  readonly previous: JobStatus;
  /** What the cancel means for it, in words. */
  readonly effect: string;
}

/**
 * Cancels a job that has not started (QUEUED, waiting for its stage, or SKIPPED): it never runs.
 * A running or finished job is refused (OutcomeError), an unknown one is NotFoundError.
 */
export async function cancelJob(connection: Connection, jobId: string, now = Date.now()): Promise<Cancelled> {
  const outcome: CancelOutcome = await (await connection.ledger()).cancel(jobId, now);
  if (outcome.cancelled) return { job: outcome.record, previous: outcome.previous, effect: CANCEL_EFFECT[outcome.previous] ?? 'it will not run' };
  if (!outcome.record) throw new NotFoundError(`job ${jobId} is not in the ledger of ${(await connection.target()).label}: nothing to cancel (${UNKNOWN_JOB_HINT})`);
  const { record } = outcome;
  const label = statusLabel(record);
  const why = record.status === 'IN_FLIGHT' ? `running (attempt ${record.attempt}): a started job cannot be cancelled` : `${record.status} already${label === record.status ? '' : ` (${label})`}`;
  throw new OutcomeError(`job ${jobId} is ${why}`);
}
