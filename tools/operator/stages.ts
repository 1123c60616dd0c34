/**
 * The stage queues (run-tests, open-pr, ...) by tenant: what SQS says of each queue (its depth,
 * read without receiving) and, from the ledger, each tenant's jobs there: pinned and waiting for
 * their stage (FORWARDED), or taken by it, and since when the oldest has waited. SQS does not count
 * a fair queue's messages by group, and locally the stage poller holds messages it received
 * ahead, so the ledger is the one place that knows tenants, on either target.
 */
import type { GetQueueAttributesCommandOutput } from '@aws-sdk/client-sqs';
import { dlqQueueOf } from '../../src/core/ledger';
import type { JobRecord } from '../../src/core/ports';
import type { Connection } from './connection';

const loadSqs = (): typeof import('@aws-sdk/client-sqs') => require('@aws-sdk/client-sqs');

export interface TenantOnStage {
  readonly tenantId: string;
  /** Pinned and forwarded, not taken by the stage yet. */
  readonly waiting: number;
  /** Taken by the stage: running, or a command stage's build under way. */
  readonly running: number;
  /** When the job waiting longest was forwarded (ISO-8601). */
  readonly oldestWaitingSince?: string;
}

export interface StageQueueView {
  /** The queue's base name (`run-tests`, ...) and the job type it feeds. */
  readonly queue: string;
  readonly consumer: string;
  /** SQS's approximate counts: messages visible, and received but not deleted (in flight). */
  readonly visible: number;
  readonly inFlight: number;
  readonly dlqDepth: number;
  readonly tenants: readonly TenantOnStage[];
}

/** Each stage queue with its tenants, busiest first. */
export async function readStageQueues(connection: Connection): Promise<StageQueueView[]> {
  const target = await connection.target();
  const ledger = await connection.ledger();
  const { sqs } = await connection.clients();
  const { GetQueueAttributesCommand } = loadSqs();
  const depth = (url: string): Promise<GetQueueAttributesCommandOutput> =>
    sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
  // Jobs the stages hold are on their workspaces' open lists: one small read per workspace.
  const workspaces = await ledger.listWorkspaces();
  const open = (await Promise.all(workspaces.map((w) => ledger.listOpenJobs(w.workspaceId)))).flat();
  const staged = open.filter(
    (job) =>
      job.pin !== undefined && (job.status === 'FORWARDED' || job.status === 'IN_FLIGHT' || job.status === 'RUNNING'),
  );
  return Promise.all(
    target.queues
      .filter((queue) => !queue.fifo)
      .map(async (queue): Promise<StageQueueView> => {
        const [main, dlq] = await Promise.all([depth(queue.url), depth(queue.dlqUrl)]);
        const count = (
          out: GetQueueAttributesCommandOutput,
          name: 'ApproximateNumberOfMessages' | 'ApproximateNumberOfMessagesNotVisible',
        ) => Number(out.Attributes?.[name] ?? 0);
        return {
          queue: queue.name,
          consumer: queue.consumer,
          visible: count(main, 'ApproximateNumberOfMessages'),
          inFlight: count(main, 'ApproximateNumberOfMessagesNotVisible'),
          dlqDepth: count(dlq, 'ApproximateNumberOfMessages') + count(dlq, 'ApproximateNumberOfMessagesNotVisible'),
          tenants: byTenant(staged.filter((job) => dlqQueueOf(job) === queue.name)),
        };
      }),
  );
}

/** Jobs of one stage by tenant, the tenant with the most waiting first (then by id). */
export function byTenant(jobs: readonly JobRecord[]): TenantOnStage[] {
  const tenants = new Map<string, { waiting: number; running: number; oldestWaitingSince?: string }>();
  for (const job of jobs) {
    const entry = tenants.get(job.tenantId) ?? { waiting: 0, running: 0 };
    if (job.status === 'FORWARDED') {
      entry.waiting += 1;
      if (entry.oldestWaitingSince === undefined || job.updatedAt < entry.oldestWaitingSince)
        entry.oldestWaitingSince = job.updatedAt;
    } else {
      entry.running += 1;
    }
    tenants.set(job.tenantId, entry);
  }
  return [...tenants]
    .map(([tenantId, entry]) => ({ tenantId, ...entry }))
    .sort((a, b) => b.waiting - a.waiting || a.tenantId.localeCompare(b.tenantId));
}
