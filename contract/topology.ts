/**
 * The queue topology, derived from the catalog: one description used by the stack (lib/) and by the
 * local platform (fauxqs), so the local queues have the same names, redrive and visibility settings
 * as the deployed ones.
 */
import { allWorkers, type WorkerName, type WorkerSettings } from './job-types';

/** Visibility timeout = this many times the consumer's timeout (AWS guidance for SQS event sources). */
export const VISIBILITY_TIMEOUT_FACTOR = 6;
/** DLQ retention: the longest SQS allows, so an operator has two weeks to triage. */
export const DLQ_RETENTION_DAYS = 14;
export const QUEUE_RETENTION_DAYS = 4;
/** Ledger records outlive anything that can still be replayed from a DLQ. */
export const LEDGER_RETENTION_DAYS = 30;

/** What a queue carries. */
export type QueueRole =
  /** The FIFO ingress: every job, in its workspace's message group. */
  | 'ordered'
  /** A stage queue (a fair queue: message group = tenant): pinned jobs of one staged type. */
  | 'stage'
  /** Build completion events (CodeBuild's on AWS, the local runner's exits locally). */
  | 'buildEvents';

export interface QueueSpec {
  /** Base name: the construct id on AWS, the queue name locally (`.fifo` added for FIFO). */
  readonly name: string;
  readonly role: QueueRole;
  readonly fifo: boolean;
  readonly visibilityTimeoutSeconds: number;
  readonly maxReceiveCount: number;
  readonly dlqName: string;
  readonly consumer: WorkerName;
  readonly worker: WorkerSettings;
}

/** Queue name as created locally and as the physical-name suffix convention on AWS. */
export function queueName(base: string, fifo: boolean): string {
  return fifo ? `${base}.fifo` : base;
}

function roleOf(worker: WorkerName): QueueRole {
  if (worker === 'sequencer') return 'ordered';
  return worker === 'build_events' ? 'buildEvents' : 'stage';
}

/**
 * Every queue of the platform with its consumer: the FIFO ingress, one stage queue per staged job
 * type and, when the catalog has command stages, the build-events queue.
 */
export function platformQueues(overrides: Partial<Record<string, WorkerSettings>> = {}): QueueSpec[] {
  return allWorkers().map(({ name, settings: declared }) => {
    const worker = overrides[name] ?? declared;
    const role = roleOf(name);
    const fifo = role === 'ordered';
    return {
      name: worker.queue,
      role,
      fifo,
      visibilityTimeoutSeconds: worker.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR,
      maxReceiveCount: worker.maxReceiveCount,
      dlqName: `${worker.queue}-dlq`,
      consumer: name,
      worker,
    };
  });
}

/** The queues that carry jobs (ingress and stages): what the CLI lists, sends to and redrives. */
export function queueTopology(overrides: Partial<Record<string, WorkerSettings>> = {}): QueueSpec[] {
  return platformQueues(overrides).filter((spec) => spec.role !== 'buildEvents');
}

/** The ledger table's key and TTL attribute names (the table itself is defined in lib/ and locally). */
export const LEDGER_TABLE = {
  partitionKey: 'pk',
  ttlAttribute: 'ttl',
  /** Index listing a workspace's jobs in the order the sequencer took them. */
  workspaceIndex: { name: 'byWorkspace', partitionKey: 'wsKey', sortKey: 'wsSeq' },
  /**
   * Sparse index of the ledger's lists (every workspace, a workspace's unfinished jobs, what waits
   * on a DLQ). It projects only attributes that never change after a record is written, so writes
   * that do not move a record between lists do not write the index.
   */
  listIndex: {
    name: 'byList',
    partitionKey: 'listKey',
    sortKey: 'listSort',
    projected: ['jobId', 'workspaceId', 'type'],
  },
  /**
   * Sparse index of command-stage jobs the reconciler must look at, by due time: a running build
   * past its timeout, or a verdict not yet reported. Only such records carry `dueKey`.
   */
  dueIndex: { name: 'byDueTime', partitionKey: 'dueKey', sortKey: 'dueAt' },
} as const;
