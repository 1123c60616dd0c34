/**
 * Fair stage queues on the local platform: a quiet tenant's dwell time (sent to started) on a
 * stage queue, alone and beside a noisy tenant's burst, with the stage poller serving tenants in
 * turn (what the local platform runs) and in arrival order, in the same run, on the same fauxqs.
 * Both receive ahead the same way (`order: 'tenant'`); arrival order takes every record as one
 * tenant's, so only the order differs. (The poller's `order: 'arrival'`, one receive per batch,
 * is receive-bound at batch size 1 and would measure its throughput, not its order.)
 *
 * Messages are sent as the sequencer forwards them (SqsQueueOps.send: the job's attributes, group =
 * tenant). The stage's work is a quick command: a fixed SERVICE_MS wait per job, so the figures
 * measure scheduling, not test runs. The poller runs with run_tests' batch size and concurrency
 * from the catalog. On AWS the fairness is SQS's (a fair queue), which this does not exercise.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CreateQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPES } from '../contract/job-types';
import { SqsQueueOps } from '../src/adapters/sqs-queue-ops';
import { jobAttributes, tenantGroupId } from '../src/core/envelope';
import { LOCAL_REGION, startEmulators, type LocalEmulators } from '../tools/local/emulators';
import { startQueuePoller } from '../tools/local/poller';
import { fmt, quantile, quick, type Benchmark, type BenchRow } from './harness';

/** The stage's work per job: a quick command. */
const SERVICE_MS = 50;
const NOISY_BURST = 600;
const QUIET_JOBS = 30;
/** The quiet tenant sends one job this often, starting as the burst lands. */
const QUIET_EVERY_MS = 100;
/** Scenario runs whose samples are pooled. */
const runs = () => (quick() ? 1 : 2);
const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const STAGE = JOB_TYPES.run_tests.stage;

type Order = 'arrival' | 'tenant';

interface Dwell {
  readonly quiet: number[];
  readonly noisy: number[];
}

interface Sent {
  readonly jobId: string;
  readonly tenantId: string;
  readonly sentAt: number;
}

let queues = 0;

/** One scenario on a fresh standard queue (an abandoned receive of an earlier poller cannot take its messages). */
async function scenario(emulators: LocalEmulators, order: Order, withNoisy: boolean): Promise<Dwell> {
  const { sqs } = emulators.clients;
  const { QueueUrl: queueUrl } = await sqs.send(
    new CreateQueueCommand({ QueueName: `bench-fair-stage-${++queues}`, Attributes: { VisibilityTimeout: '360' } }),
  );
  if (!queueUrl) throw new Error('no queue url');
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const dwell: Dwell = { quiet: [], noisy: [] };
  const total = QUIET_JOBS + (withNoisy ? NOISY_BURST : 0);
  let started = 0;
  const handler = async (event: SQSEvent): Promise<SQSBatchResponse> => {
    const now = Date.now();
    for (const record of event.Records) {
      const sent = JSON.parse(record.body) as Sent;
      (sent.tenantId === 'quiet' ? dwell.quiet : dwell.noisy).push(now - sent.sentAt);
      started++;
    }
    await sleep(SERVICE_MS);
    return { batchItemFailures: [] };
  };
  const poller = startQueuePoller({
    name: 'run_tests',
    sqs,
    queueUrl,
    queueArn: Attributes?.QueueArn ?? '',
    region: LOCAL_REGION,
    batchSize: STAGE.batchSize,
    maxConcurrency: STAGE.maxConcurrency,
    timeoutSeconds: STAGE.timeoutSeconds,
    order: 'tenant',
    // Arrival order: everything received is one tenant's, served first come first served.
    ...(order === 'arrival' ? { tenantOf: () => 'everyone' } : {}),
    handler,
    logger: quiet,
  });
  const ops = new SqsQueueOps({ client: sqs });
  const send = (tenantId: string, n: number) => {
    const jobId = `${tenantId}-${n}`;
    const body: Sent = { jobId, tenantId, sentAt: Date.now() };
    return ops.send(
      queueUrl,
      JSON.stringify(body),
      jobAttributes({ jobId, workspaceId: `ws-${tenantId}`, tenantId, type: 'run_tests' }),
      tenantGroupId(tenantId),
    );
  };
  try {
    if (withNoisy) {
      // The burst: sent 50 at a time, as fast as the queue takes them.
      for (let i = 0; i < NOISY_BURST; i += 50)
        await Promise.all(Array.from({ length: Math.min(50, NOISY_BURST - i) }, (_, j) => send('noisy', i + j)));
    }
    for (let i = 0; i < QUIET_JOBS; i++) {
      await send('quiet', i);
      await sleep(QUIET_EVERY_MS);
    }
    const deadline = Date.now() + 120_000;
    while (started < total) {
      if (Date.now() > deadline)
        throw new Error(`${order}${withNoisy ? ' with noisy' : ''}: ${started} of ${total} jobs started after 120 s`);
      await sleep(50);
    }
  } finally {
    await poller.stop();
  }
  return dwell;
}

const dwellOf = (values: readonly number[]) =>
  `p50 ${fmt.ms(quantile(values, 0.5))}, p99 ${fmt.ms(quantile(values, 0.99))} (n=${values.length})`;

export const bench: Benchmark = {
  name: 'fair-stages',
  async run() {
    const emulators = await startEmulators();
    const pooled = new Map<string, Dwell>();
    const key = (order: Order, withNoisy: boolean) => `${order}:${withNoisy}`;
    try {
      for (let run = 0; run < runs(); run++) {
        for (const withNoisy of [false, true]) {
          for (const order of ['arrival', 'tenant'] as const) {
            const dwell = await scenario(emulators, order, withNoisy);
            const into = pooled.get(key(order, withNoisy)) ?? { quiet: [], noisy: [] };
            into.quiet.push(...dwell.quiet);
            into.noisy.push(...dwell.noisy);
            pooled.set(key(order, withNoisy), into);
          }
        }
      }
    } finally {
      await emulators.stop();
    }
    const get = (order: Order, withNoisy: boolean) => pooled.get(key(order, withNoisy)) as Dwell;
    const name = { arrival: 'arrival order', tenant: 'tenants in turn (the local platform)' } as const;
    const rows: BenchRow[] = [];
    for (const order of ['arrival', 'tenant'] as const) {
      rows.push({ label: `quiet tenant alone, ${name[order]}`, value: dwellOf(get(order, false).quiet) });
      rows.push({
        label: `quiet tenant beside the noisy burst, ${name[order]}`,
        value: dwellOf(get(order, true).quiet),
      });
      rows.push({ label: `noisy tenant's own jobs, ${name[order]}`, value: dwellOf(get(order, true).noisy) });
    }
    const p99 = (order: Order, withNoisy: boolean) => quantile(get(order, withNoisy).quiet, 0.99);
    rows.push({
      label: "quiet tenant's p99 beside the burst: arrival order / tenants in turn",
      value: fmt.ratio(p99('arrival', true) / Math.max(1, p99('tenant', true))),
    });
    return {
      title: 'Fair stage queues: a quiet tenant beside a noisy one',
      description: [
        `Dwell time (sent to started) of a quiet tenant's jobs on a stage queue: ${QUIET_JOBS} jobs, one every ${QUIET_EVERY_MS} ms, alone and right after a noisy`,
        `tenant's burst of ${NOISY_BURST}; ${runs()} run(s) of each scenario pooled. The stage poller runs with run_tests' batch size (${STAGE.batchSize}) and`,
        `concurrency (${STAGE.maxConcurrency}); each job's work is a quick command (a fixed ${SERVICE_MS} ms), so the burst takes about`,
        `${((NOISY_BURST * SERVICE_MS) / STAGE.maxConcurrency / 1000).toFixed(0)} s to drain and the figures measure scheduling. Tenants in turn is how the local platform polls`,
        'every stage queue (tools/local/tenant-turns.ts); arrival order is the same poller, receiving ahead the same way, serving what it',
        'received first come first served (as fauxqs hands messages out), so only the order differs. Both run in the same process on the',
        "same fauxqs. On AWS a stage queue is an SQS fair queue and the fairness is SQS's:",
        'not exercised here (docs/decisions.md §19). In turn, the slowest quiet jobs are the first ones: they wait until the poller',
        `has received the burst queued ahead of them (${NOISY_BURST} messages, 10 per receive), then one turn. With n=${QUIET_JOBS * runs()} the p99 is the slowest job.`,
        '',
        'Command: `npm run bench fair-stages`',
      ].join('\n'),
      rows,
      summary: [
        {
          measure: "quiet tenant's p99 dwell beside a noisy burst (local stage poller)",
          value: `${fmt.ms(p99('tenant', true))} in turn vs ${fmt.ms(p99('arrival', true))} in arrival order (alone: ${fmt.ms(p99('tenant', false))})`,
          goal: 'close to its dwell alone',
        },
      ],
    };
  },
};
