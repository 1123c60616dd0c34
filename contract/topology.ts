/**
 * The queue topology, derived from the catalog: one description used by the stack (lib/) and by the
 * local platform (fauxqs), so the local queues have the same names, redrive and visibility settings
 * as the deployed ones.
 */
import { allWorkers, type WorkerSettings } from './job-types';

/** Visibility timeout = this many times the consumer's timeout (AWS guidance for SQS event sources). */
export const VISIBILITY_TIMEOUT_FACTOR = 6;
/** DLQ retention: the longest SQS allows, so an operator has two weeks to triage. */
export const DLQ_RETENTION_DAYS = 14;
export const QUEUE_RETENTION_DAYS = 4;
/** Ledger records outlive anything that can still be replayed from a DLQ. */
export const LEDGER_RETENTION_DAYS = 30;

export interface QueueSpec {
  /** Base name: the construct id on AWS, the queue name locally (`.fifo` added for FIFO). */
  readonly name: string;
  readonly fifo: boolean;
  readonly visibilityTimeoutSeconds: number;
  readonly maxReceiveCount: number;
  readonly dlqName: string;
  readonly consumer: 'sequencer' | string;
  readonly worker: WorkerSettings;
}

/** Queue name as created locally and as the physical-name suffix convention on AWS. */
export function queueName(base: string, fifo: boolean): string {
  return fifo ? `${base}.fifo` : base;
}

export function queueTopology(overrides: Partial<Record<string, WorkerSettings>> = {}): QueueSpec[] {
  return allWorkers().map(({ name, settings: declared }) => {
    const worker = overrides[name] ?? declared;
    const fifo = name === 'sequencer';
    return {
      name: worker.queue,
      fifo,
      visibilityTimeoutSeconds: worker.timeoutSeconds * VISIBILITY_TIMEOUT_FACTOR,
      maxReceiveCount: worker.maxReceiveCount,
      dlqName: `${worker.queue}-dlq`,
      consumer: name,
      worker,
    };
  });
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
  listIndex: { name: 'byList', partitionKey: 'listKey', sortKey: 'listSort', projected: ['jobId', 'workspaceId', 'type'] },
} as const;
