/**
 * `unfinished` on a deployed stack: besides the jobs without an outcome, the SKIPPED jobs whose DLQ
 * message has outlived the DLQ's retention (nothing can replay them). The local platform's side
 * (no saved copy) runs through the CLI in test/e2e/restart-dlq.test.ts. The ledger here answers
 * only the two lists `unfinished` reads.
 */
import { JOB_TYPE_NAMES } from '../../contract/job-types';
import { DLQ_RETENTION_DAYS } from '../../contract/topology';
import type { DlqEntry, JobRecord, JobStatus, Ledger } from '../../src/core/ports';
import type { Connection } from '../../tools/operator/connection';
import { listUnfinished } from '../../tools/operator/jobs';
import type { Target } from '../../tools/operator/targets';

const DAY_MS = 86_400_000;
const now = Date.now();

function job(jobId: string, status: JobStatus, daysAgo: number, extra: Partial<JobRecord> = {}): JobRecord {
  const at = new Date(now - daysAgo * DAY_MS).toISOString();
  return {
    jobId,
    workspaceId: 'ws-1',
    tenantId: 't',
    type: JOB_TYPE_NAMES[0] ?? 'apply_patch',
    status,
    digest: 'd',
    attempt: 1,
    createdAt: at,
    updatedAt: at,
    ttl: 0,
    ...extra,
  };
}

function stackConnection(unfinished: JobRecord[], dlq: JobRecord[]): Connection {
  const ledger: Pick<Ledger, 'listUnfinished' | 'listDlq'> = {
    listUnfinished: async () => unfinished,
    listDlq: async () => dlq.map((record): DlqEntry => ({ kind: 'job', record })),
  };
  const target = {
    kind: 'stack',
    label: 'stack dev (eu-west-1)',
    region: 'eu-west-1',
    endpoints: {},
    queues: [],
    tableName: 'ledger',
  } satisfies Target;
  return {
    target: async () => target,
    ledger: async () => ledger as Ledger,
    clients: () => Promise.reject(new Error('unfinished sends nothing')),
  };
}

it('lists the skipped jobs past the DLQ retention with the unfinished ones, oldest first; not those still on the DLQ or on their way back', async () => {
  const past = DLQ_RETENTION_DAYS + 1;
  const queued = job('queued', 'QUEUED', 2);
  const stranded = job('stranded', 'SKIPPED', past);
  const dlq = [
    stranded,
    job('recent', 'SKIPPED', 1),
    job('failed', 'FAILED', past),
    job('replaying', 'SKIPPED', past, { redriveToken: 'token' }),
  ];

  const listed = await listUnfinished(stackConnection([queued], dlq));

  expect(listed.map((j) => j.jobId)).toEqual(['stranded', 'queued']);
  expect(await listUnfinished(stackConnection([queued], dlq), 'ws-2')).toEqual([]);
});
