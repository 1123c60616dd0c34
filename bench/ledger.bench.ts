/**
 * The ledger on dynalite: claim + complete pairs per second, one at a time and eight at a time,
 * and the duplicate path (a redelivery of a finished job: one failed conditional write and one
 * consistent read). dynalite is an emulator: the figures compare paths of this code, not DynamoDB.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDbLedger } from '../src/adapters/dynamodb-ledger';
import { jobDigest, type JobEnvelope } from '../src/core/envelope';
import { startEmulators } from '../src/local/emulators';
import { fmt, type Benchmark } from './harness';

const JOBS = 400;

function job(i: number, prefix: string): JobEnvelope {
  return {
    jobId: `${prefix}-${i}`,
    workspaceId: `ws-${i % 16}`,
    tenantId: 'bench',
    type: 'run_tests',
    createdAt: new Date().toISOString(),
    payload: { command: 'npm test' },
  };
}

async function claimAndComplete(ledger: DynamoDbLedger, envelope: JobEnvelope): Promise<void> {
  const owner = randomUUID();
  const now = Date.now();
  const claim = await ledger.claim({ job: envelope, digest: jobDigest(envelope), owner, now, leaseMs: 60_000, consumer: 'sequencer', redrive: false });
  if (claim.kind !== 'claimed') throw new Error(`expected a claim, got ${claim.kind}`);
  await ledger.complete({ jobId: envelope.jobId, owner, now, verdict: { status: 'SUCCEEDED', result: { ok: true } } });
}

async function timed(jobs: readonly JobEnvelope[], concurrency: number, step: (j: JobEnvelope) => Promise<void>): Promise<number> {
  const queue = [...jobs];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) await step(next);
    }),
  );
  return (performance.now() - started) / 1000;
}

export const bench: Benchmark = {
  name: 'ledger',
  async run() {
    const emulators = await startEmulators();
    try {
      const ledger = new DynamoDbLedger({ client: emulators.clients.dynamodb, tableName: emulators.tableName, retentionDays: 30 });
      const serialJobs = Array.from({ length: JOBS }, (_, i) => job(i, 'serial'));
      const serial = await timed(serialJobs, 1, (j) => claimAndComplete(ledger, j));
      const concurrent = await timed(
        Array.from({ length: JOBS }, (_, i) => job(i, 'concurrent')),
        8,
        (j) => claimAndComplete(ledger, j),
      );
      const duplicates = await timed(serialJobs, 1, async (j) => {
        const claim = await ledger.claim({ job: j, digest: jobDigest(j), owner: randomUUID(), now: Date.now(), leaseMs: 60_000, consumer: 'sequencer', redrive: false });
        if (claim.kind !== 'duplicate') throw new Error(`expected a duplicate, got ${claim.kind}`);
      });
      return {
        title: 'Ledger: claim and complete on dynalite',
        description: [
          `${JOBS} jobs, each claimed (one conditional write) and completed (one conditional write fenced on the lease owner).`,
          'The duplicate path is a redelivery of a SUCCEEDED job: the conditional claim fails and one consistent read returns the stored result.',
          '',
          'Command: `npm run bench ledger`',
        ].join('\n'),
        rows: [
          { label: 'claim + complete, 1 at a time', value: fmt.perSecond(JOBS / serial) },
          { label: 'claim + complete, 8 at a time', value: fmt.perSecond(JOBS / concurrent) },
          { label: 'concurrency speed-up, 8 / 1', value: fmt.ratio(serial / concurrent) },
          { label: 'duplicate redelivery answered, 1 at a time', value: fmt.perSecond(JOBS / duplicates) },
          { label: 'duplicate cost relative to a first delivery', value: fmt.ratio(duplicates / serial) },
        ],
      };
    } finally {
      await emulators.stop();
    }
  },
};
