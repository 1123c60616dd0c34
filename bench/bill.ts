/**
 * `npx tsx bench/bill.ts`: the whole AWS bill in SCALE.md ("The bill"), per million jobs of a stated
 * mix and per month idle, computed rather than typed in, from three sources:
 *
 * - prices: bench/prices.json, each with its source page and the date it was read;
 * - figures measured here: BENCHMARKS.md (the ordered lane's AWS requests per job, apply_patch's
 *   warm duration, each function's module load with every first use), read by row name;
 * - what the stack holds: the shipped prod configuration's synthesized template (alarms,
 *   dashboards, KMS keys, secrets, log groups, memory sizes).
 *
 * What no benchmark measures is an assumption named in ASSUMPTIONS and printed with the table.
 * test/unit/bill.test.ts fails when SCALE.md is not what this writes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { BUILD_EVENTS, JOB_TYPES, SEQUENCER } from '../contract/job-types';
import { AgentJobsStack } from '../lib/agent-jobs-stack';
import { loadConfig } from '../lib/config';
import { ROOT, newApp } from '../test/infra/helpers';

interface Price {
  readonly usd: number;
  readonly per: string;
  readonly source: string;
  readonly asOf: string;
  readonly note?: string;
}
type PriceName =
  | 'sqsStandardRequest'
  | 'sqsFifoRequest'
  | 'dynamoWriteUnit'
  | 'dynamoReadUnit'
  | 'eventBridgeEvent'
  | 'lambdaRequest'
  | 'lambdaArmGbSecond'
  | 'codebuildArmSmallMinute'
  | 'codebuildLinuxSmallMinute'
  | 's3Put'
  | 's3Get'
  | 'secretMonth'
  | 'secretsApiCall'
  | 'kmsKeyMonth'
  | 'alarmMonth'
  | 'dashboardMonth'
  | 'logsIngestGb'
  | 'logsStoreGbMonth';

export const BILL_MARKERS = {
  begin: '<!-- bill:begin (npx tsx bench/bill.ts writes this section) -->',
  end: '<!-- bill:end -->',
} as const;

/** The job mix a million jobs are made of (SCALE.md's assumptions: 6 / 3 / 1 an hour per workspace). */
export const MIX = { apply_patch: 0.6, run_tests: 0.3, open_pr: 0.1 } as const;
/** Minutes a run_tests build takes (SCALE.md's assumption). */
export const BUILD_MINUTES = 5;

/** What no benchmark here measures, said with the table. */
const ASSUMPTIONS = {
  stageSqsRequests: 3, // a stage job: the sequencer's send, the stage's receive and delete (standard queue)
  stageLedgerWrites: 2, // its claim and its completion
  buildEventRequests: 3, // the build's end: EventBridge's delivery to the build-events queue, receive, delete
  checkoutSecretCalls: 2, // the stage's checkout-secret read or write, the build's read
  logBytesPerInvocation: 2048,
  logRetentionMonths: 1,
  secretsIdle: 'the three platform secrets; a checkout secret per repository adds $0.40 a month each',
} as const;

function readPrices(): { region: string; prices: Record<PriceName, Price> } {
  return JSON.parse(readFileSync(join(ROOT, 'bench', 'prices.json'), 'utf8')) as {
    region: string;
    prices: Record<PriceName, Price>;
  };
}

/** A BENCHMARKS.md table row's value column, by the row's name. */
function benchmarkRow(benchmarks: string, name: string): string {
  const row = benchmarks.split('\n').find((line) => line.startsWith(`| ${name} |`));
  if (!row) throw new Error(`BENCHMARKS.md has no row "${name}"`);
  return row.split('|')[2]!.trim();
}

const firstNumber = (text: string, pattern: RegExp): number => {
  const match = pattern.exec(text);
  if (!match?.[1]) throw new Error(`no ${pattern} in "${text}"`);
  return Number(match[1]);
};

interface Figures {
  readonly ordered: { dynamoWrites: number; dynamoReads: number; sqsFifo: number; events: number; invocations: number };
  /** Seconds an invocation takes, by function. */
  readonly seconds: { sequencer: number; run_tests: number; open_pr: number; build_events: number };
}

function measuredFigures(benchmarks: string): Figures {
  const requests = benchmarkRow(benchmarks, '10 workspace(s): AWS requests per job');
  const loadAndFirstUse = (fn: string) =>
    firstNumber(benchmarkRow(benchmarks, `${fn}: module load + all of the above`), /^(\d+) ms/) / 1000;
  return {
    ordered: {
      dynamoWrites: firstNumber(requests, /DynamoDB ([\d.]+) writes/),
      dynamoReads: firstNumber(requests, /\+ ([\d.]+) reads/),
      sqsFifo: firstNumber(requests, /SQS FIFO ([\d.]+)/) + firstNumber(requests, /\(\+([\d.]+) empty receives\)/),
      events: firstNumber(requests, /EventBridge ([\d.]+)/),
      invocations: firstNumber(requests, /Lambda invocations ([\d.]+)/),
    },
    seconds: {
      // A warm patch in other directories of a 20,000-file repository: the slower of the two warm figures.
      sequencer:
        firstNumber(
          benchmarkRow(
            benchmarks,
            'apply_patch warm, 20,000 files: second patch (other directories) / third (same directories)',
          ),
          /^(\d+) ms/,
        ) / 1000,
      // Each stage function at its cold bound (module load and every first use): no warm figure is measured.
      run_tests: loadAndFirstUse('run_tests'),
      open_pr: loadAndFirstUse('open_pr'),
      build_events: loadAndFirstUse('build_events'),
    },
  };
}

interface StackCounts {
  alarms: number;
  dashboards: number;
  kmsKeys: number;
  secrets: number;
  logGroups: number;
}

/** What the shipped prod configuration deploys, counted in its synthesized template. */
function stackCounts(): StackCounts {
  const app = newApp();
  app.node.setContext('env', 'prod');
  const stack = new AgentJobsStack(app, 'AgentJobs-prod', {
    config: loadConfig(app, join(ROOT, 'config')),
    projectRoot: ROOT,
  });
  const resources = Template.fromStack(stack).toJSON()['Resources'] as Record<string, { Type: string }>;
  const count = (type: string) => Object.values(resources).filter((r) => r.Type === type).length;
  return {
    alarms: count('AWS::CloudWatch::Alarm'),
    dashboards: count('AWS::CloudWatch::Dashboard'),
    kmsKeys: count('AWS::KMS::Key'),
    secrets: count('AWS::SecretsManager::Secret'),
    logGroups: count('AWS::Logs::LogGroup'),
  };
}

interface Line {
  readonly item: string;
  readonly usd: number;
  readonly how: string;
  readonly prices: readonly PriceName[];
}

/** USD per million jobs of the mix, line by line. */
function perMillion(f: Figures, p: Record<PriceName, Price>): Line[] {
  const M = 1e6;
  const stageShare = MIX.run_tests + MIX.open_pr;
  const gb = (mb: number) => mb / 1024;
  const invocations = f.ordered.invocations + stageShare + MIX.run_tests; // sequencer batches + a stage invocation + a build end
  const gbSeconds =
    MIX.apply_patch * f.seconds.sequencer * gb(SEQUENCER.memoryMb) +
    MIX.run_tests * f.seconds.run_tests * gb(JOB_TYPES.run_tests.stage.memoryMb) +
    MIX.open_pr * f.seconds.open_pr * gb(JOB_TYPES.open_pr.stage.memoryMb) +
    MIX.run_tests * f.seconds.build_events * gb(BUILD_EVENTS.memoryMb);
  const logGb = (invocations * ASSUMPTIONS.logBytesPerInvocation * M) / 1024 ** 3;
  return [
    {
      item: 'SQS',
      prices: ['sqsFifoRequest', 'sqsStandardRequest'],
      how: `${f.ordered.sqsFifo.toFixed(2)} FIFO requests a job (measured); ${ASSUMPTIONS.stageSqsRequests} standard a stage job, ${ASSUMPTIONS.buildEventRequests} more a build`,
      usd:
        M *
        (f.ordered.sqsFifo * p.sqsFifoRequest.usd +
          (stageShare * ASSUMPTIONS.stageSqsRequests + MIX.run_tests * ASSUMPTIONS.buildEventRequests) *
            p.sqsStandardRequest.usd),
    },
    {
      item: 'DynamoDB',
      prices: ['dynamoWriteUnit', 'dynamoReadUnit'],
      how: `${f.ordered.dynamoWrites.toFixed(2)} writes + ${f.ordered.dynamoReads.toFixed(2)} reads a job (measured); ${ASSUMPTIONS.stageLedgerWrites} writes a stage job`,
      usd:
        M *
        ((f.ordered.dynamoWrites + stageShare * ASSUMPTIONS.stageLedgerWrites) * p.dynamoWriteUnit.usd +
          f.ordered.dynamoReads * p.dynamoReadUnit.usd),
    },
    {
      item: 'Lambda requests',
      prices: ['lambdaRequest'],
      how: `${invocations.toFixed(2)} invocations a job (the sequencer's ${f.ordered.invocations.toFixed(2)} measured, batched)`,
      usd: M * invocations * p.lambdaRequest.usd,
    },
    {
      item: 'Lambda duration (arm64)',
      prices: ['lambdaArmGbSecond'],
      how: `apply_patch ${f.seconds.sequencer} s at ${SEQUENCER.memoryMb} MB; stage and build-end invocations ${f.seconds.run_tests} / ${f.seconds.open_pr} / ${f.seconds.build_events} s at 256 MB (measured: BENCHMARKS.md)`,
      usd: M * gbSeconds * p.lambdaArmGbSecond.usd,
    },
    {
      item: `CodeBuild, ARM small (${BUILD_MINUTES}-minute builds)`,
      prices: ['codebuildArmSmallMinute'],
      how: `${MIX.run_tests * BUILD_MINUTES} build minutes a job`,
      usd: M * MIX.run_tests * BUILD_MINUTES * p.codebuildArmSmallMinute.usd,
    },
    {
      item: `CodeBuild, x86 small instead (regions without ARM)`,
      prices: ['codebuildLinuxSmallMinute'],
      how: 'the same minutes; not in the total',
      usd: M * MIX.run_tests * BUILD_MINUTES * p.codebuildLinuxSmallMinute.usd,
    },
    {
      item: 'EventBridge',
      prices: ['eventBridgeEvent'],
      how: `${f.ordered.events.toFixed(2)} outcome events a job (measured); CodeBuild's own state-change events are free`,
      usd: M * f.ordered.events * p.eventBridgeEvent.usd,
    },
    {
      item: 'S3',
      prices: ['s3Put', 's3Get'],
      how: 'one PUT and one GET per diff too large for a message (claim-check): none in this mix',
      usd: 0,
    },
    {
      item: 'Secrets Manager API',
      prices: ['secretsApiCall'],
      how: `${ASSUMPTIONS.checkoutSecretCalls} calls a build`,
      usd: M * MIX.run_tests * ASSUMPTIONS.checkoutSecretCalls * p.secretsApiCall.usd,
    },
    {
      item: 'CloudWatch Logs',
      prices: ['logsIngestGb', 'logsStoreGbMonth'],
      how: `${ASSUMPTIONS.logBytesPerInvocation} bytes an invocation, kept ${ASSUMPTIONS.logRetentionMonths} month`,
      usd: logGb * (p.logsIngestGb.usd + ASSUMPTIONS.logRetentionMonths * p.logsStoreGbMonth.usd),
    },
  ];
}

function idle(c: StackCounts, p: Record<PriceName, Price>): Line[] {
  return [
    {
      item: `CloudWatch alarms (${c.alarms} in the template)`,
      prices: ['alarmMonth'],
      how: 'standard resolution',
      usd: c.alarms * p.alarmMonth.usd,
    },
    {
      item: `dashboard (${c.dashboards})`,
      prices: ['dashboardMonth'],
      how: 'free if the account has fewer than 3',
      usd: c.dashboards * p.dashboardMonth.usd,
    },
    {
      item: `KMS keys (${c.kmsKeys})`,
      prices: ['kmsKeyMonth'],
      how: 'the alarm topic key',
      usd: c.kmsKeys * p.kmsKeyMonth.usd,
    },
    {
      item: `secrets (${c.secrets})`,
      prices: ['secretMonth'],
      how: ASSUMPTIONS.secretsIdle,
      usd: c.secrets * p.secretMonth.usd,
    },
    {
      item: `log groups (${c.logGroups}), SQS, DynamoDB on demand, Lambda, CodeBuild, EventBridge, S3`,
      prices: [],
      how: 'nothing without traffic (the reconciler runs every 5 minutes: about 8,640 invocations a month, under $0.01)',
      usd: 0,
    },
  ];
}

const priceText = (p: Price): string =>
  p.usd < 0.001 ? `$${Number((p.usd * 1e6).toPrecision(6))} per million (${p.per})` : `$${p.usd} per ${p.per}`;
const money = (usd: number): string => `$${usd.toFixed(usd < 10 ? 2 : 0)}`;

/** The SCALE.md section, markers included. */
export function billSection(): string {
  const { region, prices } = readPrices();
  const figures = measuredFigures(readFileSync(join(ROOT, 'BENCHMARKS.md'), 'utf8'));
  const lines = perMillion(figures, prices);
  const total = lines.filter((l) => !l.item.includes('instead')).reduce((sum, l) => sum + l.usd, 0);
  const idleLines = idle(stackCounts(), prices);
  const idleTotal = idleLines.reduce((sum, l) => sum + l.usd, 0);
  const row = (l: Line) => `| ${l.item} | ${money(l.usd)} | ${l.how} |`;
  const used = [...new Set([...lines, ...idleLines].flatMap((l) => l.prices))].sort();
  return [
    BILL_MARKERS.begin,
    `Per million jobs: ${MIX.apply_patch * 100}% apply_patch, ${MIX.run_tests * 100}% run_tests of ${BUILD_MINUTES} minutes, ${MIX.open_pr * 100}% open_pr (modelled on the measured figures; ${region} on-demand prices):`,
    '',
    '| per million jobs | USD | how |',
    '| --- | --- | --- |',
    ...lines.map(row),
    `| **total** | **${money(total)}** | CodeBuild is ${Math.round((100 * lines.find((l) => l.item.startsWith('CodeBuild, ARM'))!.usd) / total)}% of it |`,
    '',
    '| per month, idle | USD | how |',
    '| --- | --- | --- |',
    ...idleLines.map(row),
    `| **total** | **${money(idleTotal)}** | |`,
    '',
    'Prices (bench/prices.json):',
    '',
    ...used.map(
      (name) =>
        `- ${name}: ${priceText(prices[name])}, ${prices[name].source}, read ${prices[name].asOf}${prices[name].note ? ` (${prices[name].note})` : ''}`,
    ),
    BILL_MARKERS.end,
  ].join('\n');
}

/** SCALE.md with its bill section replaced by `section`. */
export function withBill(scale: string, section: string): string {
  const begin = scale.indexOf(BILL_MARKERS.begin);
  const end = scale.indexOf(BILL_MARKERS.end);
  if (begin < 0 || end < begin) throw new Error('SCALE.md has no bill markers');
  return scale.slice(0, begin) + section + scale.slice(end + BILL_MARKERS.end.length);
}

if (require.main === module) {
  const file = join(ROOT, 'SCALE.md');
  writeFileSync(file, withBill(readFileSync(file, 'utf8'), billSection()));
  process.stdout.write(`${billSection()}\n`);
}
