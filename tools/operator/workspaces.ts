/** Workspaces: their records, their jobs, and the operator's way out of the fence (unblock). */
import { messageGroupId } from '../../src/core/envelope';
import type { SQSClient } from '@aws-sdk/client-sqs';
import {
  TERMINAL_STATUSES,
  type JobRecord,
  type Ledger,
  type WorkspaceRecord,
  type WorkspaceState,
} from '../../src/core/ports';
import type { Connection } from './connection';
import { isSkippedAwaitingReplay, settledCopy } from './dlq';
import { NotFoundError, OutcomeError } from './errors';
import { requireValidId } from './ids';
import { workspaceJobs } from './overview';
import { jobsQueue, type QueueEndpoint } from './targets';

// The SQS operations load with the SQS SDK, only when an unblock runs (require: see targets.ts).
const dlqMessages = (): typeof import('./dlq-messages') => require('./dlq-messages');

export async function requireWorkspace(connection: Connection, workspaceId: string): Promise<WorkspaceRecord> {
  requireValidId('workspaceId', workspaceId);
  const workspace = await (await connection.ledger()).getWorkspace(workspaceId);
  if (!workspace)
    throw new NotFoundError(`workspace ${workspaceId} is not in the ledger of ${(await connection.target()).label}`);
  return workspace;
}

/**
 * Every job of a workspace, in the order the sequencer took them, then those still queued; a
 * workspace the ledger knows neither by its record nor by a job is NotFoundError.
 */
export async function listJobsOfWorkspace(connection: Connection, workspaceId: string): Promise<JobRecord[]> {
  requireValidId('workspaceId', workspaceId);
  const ledger = await connection.ledger();
  const [list, workspace] = await Promise.all([workspaceJobs(ledger, workspaceId), ledger.getWorkspace(workspaceId)]);
  if (list.length === 0 && !workspace)
    throw new NotFoundError(`workspace ${workspaceId} is not in the ledger of ${(await connection.target()).label}`);
  return list;
}

export interface WorkspaceStanding {
  /** Absent while none of its jobs has had its turn yet (a workspace is known from its first job's turn). */
  readonly workspace?: WorkspaceRecord;
  /** Its jobs without an outcome yet (queued, waiting for their stage, running), oldest first. */
  readonly unfinished: readonly JobRecord[];
}

/**
 * Where a workspace stands: its record and its jobs not finished yet, two small reads whatever the
 * workspace's size. NotFoundError when the ledger knows neither.
 */
export async function readWorkspaceStanding(connection: Connection, workspaceId: string): Promise<WorkspaceStanding> {
  requireValidId('workspaceId', workspaceId);
  const ledger = await connection.ledger();
  const [workspace, open] = await Promise.all([ledger.getWorkspace(workspaceId), ledger.listOpenJobs(workspaceId)]);
  if (!workspace && open.length === 0)
    throw new NotFoundError(`workspace ${workspaceId} is not in the ledger of ${(await connection.target()).label}`);
  // The open list also keeps jobs cancelled before their turn (they never get one).
  return { workspace, unfinished: open.filter((job) => !TERMINAL_STATUSES.includes(job.status)) };
}

/** `replay`: the skipped jobs go back to the queue in their order; `drop`: they are recorded CANCELLED. */
export type UnblockMode = 'replay' | 'drop';

export interface UnblockedJob {
  readonly jobId: string;
  /**
   * `kept`: not a skipped job (the one that failed, a refused request): left on the DLQ, behind the
   * others. `removed`: the copy of a job cancelled or dismissed already, which an interrupted
   * command left: deleted (nobody acts on it).
   */
  readonly action: 'replayed' | 'dropped' | 'kept' | 'removed';
  readonly status?: string;
}

export interface Unblocked {
  readonly workspace: WorkspaceRecord;
  readonly previousState: WorkspaceState;
  readonly mode: UnblockMode;
  readonly jobs: readonly UnblockedJob[];
}

/**
 * Lifts a workspace's fence, then replays (in order) or drops its skipped jobs from the FIFO DLQ.
 * The other messages of the workspace there (the job that failed) stay, moved behind the skipped
 * ones. Running it again after an interruption is safe.
 */
export async function unblockWorkspace(
  connection: Connection,
  workspaceId: string,
  mode: UnblockMode,
): Promise<Unblocked> {
  const before = await requireWorkspace(connection, workspaceId);
  const ledger = await connection.ledger();
  const { sqs } = await connection.clients();
  const queue = jobsQueue(await connection.target());
  const group = messageGroupId(workspaceId);
  const ops = dlqMessages();
  // A replay that cannot replay every skipped job would leave the rest behind an open fence.
  if (mode === 'replay' && before.state === 'BLOCKED') await requireReplayableCopies(ledger, sqs, queue, workspaceId);
  // Unblock first: a replayed job that arrived while the fence was still up would be skipped again.
  const after = before.state === 'BLOCKED' ? await ledger.unblockWorkspace(workspaceId, Date.now()) : before;
  const handled: UnblockedJob[] = [];
  /** Drop mode: the skipped job cancelled (it never runs), recorded as dropped. */
  const drop = async (jobId: string) => {
    const outcome = await ledger.cancel(jobId, Date.now());
    handled.push({ jobId, action: 'dropped', status: outcome.cancelled ? 'CANCELLED' : outcome.record?.status });
  };
  await ops.sweepDlq(sqs, queue, {
    inScope: (message) => message.groupId === group,
    take: async (message) => {
      const { jobId } = ops.messageJob(message);
      const job = await ledger.getJob(jobId);
      const settled = settledCopy(queue, message, job);
      if (settled !== undefined) {
        handled.push({ jobId, action: 'removed', status: settled.status });
        return true;
      }
      if (job?.status !== 'SKIPPED') {
        // The job that failed (or a refused request) stays on the DLQ, behind the skipped ones.
        handled.push({ jobId, action: 'kept', status: job?.status });
        return false;
      }
      // A copy that is not the skipped job (a forged jobId attribute) is neither replayed nor
      // taken for it: it stays, and the job's own copy is acted on.
      const mismatch = ops.copyMismatch(queue, message, job);
      if (mismatch !== undefined) {
        handled.push({ jobId, action: 'kept', status: `not this job's copy: ${mismatch}` });
        return false;
      }
      if (mode === 'drop') {
        await drop(jobId);
        return true;
      }
      const outcome = await ops.redriveCopy(sqs, ledger, queue, message, job);
      handled.push(outcome.redriven ? { jobId, action: 'replayed' } : { jobId, action: 'kept', status: outcome.why });
      return outcome.redriven;
    },
  });
  if (mode === 'drop') {
    // Skipped jobs whose copy is gone (lost with the local platform's queues, past the DLQ's retention) end too.
    const acted = new Set(handled.filter((h) => h.action === 'dropped').map((h) => h.jobId));
    for (const job of await skippedJobs(ledger, workspaceId)) {
      if (!acted.has(job.jobId)) await drop(job.jobId);
    }
  }
  return { workspace: after, previousState: before.state, mode, jobs: handled };
}

/** The workspace's SKIPPED jobs in its order, but those whose replay is on its way (its message left the DLQ). */
async function skippedJobs(ledger: Ledger, workspaceId: string): Promise<JobRecord[]> {
  return (await ledger.listWorkspaceJobs(workspaceId)).filter(isSkippedAwaitingReplay);
}

/**
 * Refuses (OutcomeError, the fence left up) a replay that would leave a skipped job behind: one
 * whose message is not on the DLQ. A FIFO DLQ shows only the head of each group, so the group is
 * walked, every message kept in its order (sweepDlq).
 */
async function requireReplayableCopies(
  ledger: Ledger,
  sqs: SQSClient,
  queue: QueueEndpoint,
  workspaceId: string,
): Promise<void> {
  const skipped = await skippedJobs(ledger, workspaceId);
  if (skipped.length === 0) return;
  const byId = new Map(skipped.map((job) => [job.jobId, job]));
  const onDlq = new Set<string>();
  const ops = dlqMessages();
  const group = messageGroupId(workspaceId);
  await ops.sweepDlq(sqs, queue, {
    inScope: (message) => message.groupId === group,
    take: async (message) => {
      const job = byId.get(ops.messageJob(message).jobId);
      if (job !== undefined && ops.copyMismatch(queue, message, job) === undefined) onDlq.add(job.jobId);
      return false;
    },
  });
  const lost = skipped.filter((job) => !onDlq.has(job.jobId)).map((job) => job.jobId);
  if (lost.length === 0) return;
  throw new OutcomeError(
    `workspace ${workspaceId} stays BLOCKED: skipped job(s) ${lost.join(', ')} have no message on the DLQ to replay (lost with the local platform's queues, or past the DLQ's retention): ` +
      `"workspace unblock ${workspaceId} --drop" cancels its skipped jobs; then send their work again under new job ids`,
  );
}
