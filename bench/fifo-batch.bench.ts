/**
 * FIFO partial batch responses: the project's processFifoBatch (src/core/fifo-batch.ts: groups
 * side by side, each group in order, a failure cuts the rest of its group) against Powertools'
 * SqsFifoPartialProcessorAsync with skipGroupOnError (the same failure rule, groups walked one
 * after the other), on the same batches in the same run.
 *
 * A record's work is an asynchronous wait (an apply_patch is I/O: fetch, push, ledger writes), so
 * the figures show how the batch is scheduled, not CPU. Before timing, each scenario asserts that
 * both report the identical batchItemFailures; a mismatch stops the benchmark.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { SqsFifoPartialProcessorAsync, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { processFifoBatch } from '../src/core/fifo-batch';
import { sqsRecordFactory } from '../test/support/sqs-records';
import { fmt, median, repeat, type Benchmark, type BenchRow } from './harness';

const RECORD_MS = 50;
const RUNS = 5;

interface Scenario {
  readonly label: string;
  readonly groups: number;
  readonly records: number;
  /** Bodies of the records whose processing fails. */
  readonly failing: readonly string[];
}

const SCENARIOS: readonly Scenario[] = [
  { label: '10 records, 1 group', groups: 1, records: 10, failing: [] },
  { label: '10 records, 10 groups', groups: 10, records: 10, failing: [] },
  { label: '10 records, 2 groups, 2nd record of group 0 fails', groups: 2, records: 10, failing: ['g0-r1'] },
];

/** Records dealt round-robin over the groups; the body names group and position (`g<group>-r<n>`). */
function batch(scenario: Scenario): SQSRecord[] {
  const seen = new Map<number, number>();
  return Array.from({ length: scenario.records }, (_, i) => {
    const group = i % scenario.groups;
    const n = seen.get(group) ?? 0;
    seen.set(group, n + 1);
    return sqsRecordFactory(`g${group}-r${n}`, { messageGroupId: `ws#g${group}`, messageId: `m${i}` });
  });
}

async function work(record: SQSRecord, failing: readonly string[]): Promise<void> {
  await sleep(RECORD_MS);
  if (failing.includes(record.body)) throw new Error(`record ${record.body} fails`);
}

function ours(records: SQSRecord[], failing: readonly string[]): Promise<SQSBatchResponse> {
  return processFifoBatch(records, async (record) => {
    await work(record, failing);
    return true;
  });
}

function powertools(records: SQSRecord[], failing: readonly string[]): Promise<SQSBatchResponse> {
  const event: SQSEvent = { Records: records };
  return processPartialResponse(
    event,
    (record: SQSRecord) => work(record, failing),
    new SqsFifoPartialProcessorAsync(),
    {
      context: {} as Context,
      skipGroupOnError: true,
    },
  );
}

const failures = (response: SQSBatchResponse) => response.batchItemFailures.map((f) => f.itemIdentifier);

export const bench: Benchmark = {
  name: 'fifo-batch',
  async run() {
    const rows: BenchRow[] = [];
    const speedups: string[] = [];
    for (const scenario of SCENARIOS) {
      const records = batch(scenario);
      const [a, b] = [
        failures(await ours(records, scenario.failing)),
        failures(await powertools(records, scenario.failing)),
      ];
      if (JSON.stringify(a) !== JSON.stringify(b))
        throw new Error(
          `${scenario.label}: batchItemFailures differ: ours ${JSON.stringify(a)}, Powertools ${JSON.stringify(b)}`,
        );
      const oursMs = await repeat(RUNS, () => ours(records, scenario.failing));
      const powertoolsMs = await repeat(RUNS, () => powertools(records, scenario.failing));
      speedups.push(`${fmt.ratio(median(powertoolsMs) / median(oursMs))} at ${scenario.label}`);
      rows.push(
        { label: `${scenario.label}: processFifoBatch`, value: fmt.msSpread(oursMs) },
        { label: `${scenario.label}: Powertools SqsFifoPartialProcessorAsync`, value: fmt.msSpread(powertoolsMs) },
        {
          label: `${scenario.label}: speed-up, Powertools / ours`,
          value: `${fmt.ratio(median(powertoolsMs) / median(oursMs))}; identical batchItemFailures ${JSON.stringify(a)}`,
        },
      );
    }
    return {
      title: 'FIFO batches: processFifoBatch vs Powertools SqsFifoPartialProcessorAsync',
      description: [
        `Each record waits ${RECORD_MS} ms (I/O, not CPU); ${RUNS} runs per system and scenario, median (min-max).`,
        'Powertools runs with `skipGroupOnError: true`, the rule this project applies (a failure cuts the rest of its group only).',
        'Both systems run in the same process on the same records; the failure sets were compared before timing.',
        '',
        'Command: `npm run bench fifo-batch`',
      ].join('\n'),
      rows,
      summary: [
        {
          measure: 'FIFO batch vs Powertools SqsFifoPartialProcessorAsync',
          value: `${speedups.join('; ')}; identical batchItemFailures`,
          goal: '>= 5x at 10 groups, 1.0x at 1 group, identical batchItemFailures',
        },
      ],
    };
  },
};
