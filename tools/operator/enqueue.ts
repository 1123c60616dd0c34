/** Sends one job to the FIFO queue, as an agent's producer does, with the ledger recording it first. */
import { JOB_TYPES, JOB_TYPE_NAMES } from '../../contract/job-types';
import type { JobRequest } from '../../src/client/producer';
import type { JobRecord, JobStatus } from '../../src/core/ports';
import type { Connection } from './connection';
import { OutcomeError } from './errors';
import { aJobOfType } from './views';
import { jobsQueue, requireServed } from './targets';

// The producer and the diff store load with the SQS and S3 SDKs, only when a job is sent (require: see targets.ts).
const loadProducer = (): typeof import('../../src/client/producer') => require('../../src/client/producer');
const loadDiffStore = (): typeof import('../../src/adapters/diff-store') => require('../../src/adapters/diff-store');

/** The tenant of a job whose sender names none. */
export const DEFAULT_TENANT = 'default';

/** Job types that change a workspace's tree (they bind it to its repository). */
const ORDERED_TYPES = JOB_TYPE_NAMES.filter((t) => JOB_TYPES[t].lane === 'ordered');

/** Whether one of a workspace's open jobs will give it a repository: an ordered job not cancelled before its turn. */
export function repositoryOnItsWay(open: readonly JobRecord[]): boolean {
  return open.some((j) => ORDERED_TYPES.includes(j.type) && j.status !== 'CANCELLED');
}

/**
 * A staged job (run_tests, open_pr) runs at its workspace's head commit: a workspace with no
 * repository yet, and no job on its way that gives it one, would fail it as WORKSPACE_UNKNOWN at
 * its turn. Refused here instead, where the sender is.
 */
async function refuseWithoutRepository(connection: Connection, job: JobRequest): Promise<void> {
  if (JOB_TYPES[job.type].lane !== 'staged') return;
  const ledger = await connection.ledger();
  if ((await ledger.getWorkspace(job.workspaceId))?.repo) return;
  if (repositoryOnItsWay(await ledger.listOpenJobs(job.workspaceId))) return;
  throw new OutcomeError(
    `WORKSPACE_UNKNOWN: workspace ${job.workspaceId} has no repository yet: send an ${ORDERED_TYPES.join(' or ')} first (${aJobOfType(job.type)} runs at the workspace's head commit)`,
  );
}

export interface Enqueued {
  readonly jobId: string;
  /** Absent when it was not sent again: the ledger has the same request already (`existing`). */
  readonly messageId?: string;
  /** The job's status before this send, when the ledger knew it: a resend of the same request runs at most once. */
  readonly existing?: JobStatus;
}

/**
 * Sends a job. A job that does not validate throws the producer's InvalidJobError (its issues name
 * each bad field, for the caller to word); a reused job id (CONFLICT) or a cancelled one is
 * refused with OutcomeError, and nothing is sent.
 */
export async function enqueueJob(connection: Connection, job: JobRequest): Promise<Enqueued> {
  const { enqueueAgentJob, validateJob, EnqueueError } = loadProducer();
  // What the sender gave is checked before anything is looked up: an id that can never be valid
  // is the sender's mistake (InvalidJobError, naming it), not a question for the ledger.
  validateJob(job);
  const target = await connection.target();
  // Before the ledger records it: a platform without the type's queue could not run it.
  requireServed(target, job.type);
  await refuseWithoutRepository(connection, job);
  const { sqs, s3 } = await connection.clients();
  const diffStore = target.diffBucket ? new (loadDiffStore().S3DiffStore)(s3, target.diffBucket) : undefined;
  try {
    const sent = await enqueueAgentJob(job, {
      sqs,
      queueUrl: jobsQueue(target).url,
      diffStore,
      ledger: await connection.ledger(),
    });
    return { jobId: sent.jobId, messageId: sent.messageId, existing: sent.existing };
  } catch (error) {
    // CONFLICT (recorded: the job's status shows it) or CANCELLED: nothing was sent.
    if (error instanceof EnqueueError && (error.reason === 'CONFLICT' || error.reason === 'CANCELLED'))
      throw new OutcomeError(`${error.reason}: ${error.message}`);
    throw error;
  }
}
