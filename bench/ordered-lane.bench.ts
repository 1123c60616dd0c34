/**
 * The ordered lane end to end on the local platform, at 1, 10 and 100 workspaces: apply_patch jobs
 * from the producer through the FIFO queue and the sequencer (ledger, workspace cursor, git commit
 * and push over the loopback server) to SUCCEEDED.
 *
 * Each scenario sends every job at once, in order per workspace, then times each job from the
 * start of its send to its AgentJobSucceeded event. Order is asserted afterwards: every job
 * SUCCEEDED, and each workspace branch holds its jobs' commits in the order they were sent (read
 * with the git CLI). `handoff` is the time from a job's predecessor in its workspace finishing to
 * the job finishing: the per-job cost of the lane, plumbing included, without the queueing.
 *
 * Every AWS request the platform makes is counted by SDK middleware (and events by the event log),
 * which gives the requests per job the cost section prices.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReceiveMessageCommandOutput } from '@aws-sdk/client-sqs';
import { DynamoDbLedger } from '../src/adapters/dynamodb-ledger';
import { enqueueAgentJob, type JobRequest } from '../src/client';
import type { EventType } from '../contract/runtime-env';
import { startPlatform, type LocalPlatform } from '../tools/local/platform';
import { PRICES_AS_OF, PRICES_USD, RequestCounter, perMillionJobs, usd } from './aws-bill';
import { fmt, quantile, type Benchmark, type BenchRow } from './harness';

export interface ScenarioResult {
  readonly workspaces: number;
  readonly jobs: number;
  readonly seconds: number;
  /** Send start to success event, per job (ms). */
  readonly latencies: number[];
  /** Predecessor's (or its own send's) end to success event, per job (ms). */
  readonly handoffs: number[];
  readonly perJob: RequestsPerJob;
  readonly cpu: CpuUse;
}

/** Where the CPU went during a scenario, as a share of its wall time. */
export interface CpuUse {
  /** Event loop utilisation of the one Node thread that runs emulators, pollers and handlers (0..1). */
  readonly eventLoop: number;
  /** CPU of this process in cores (its JavaScript thread plus libuv and GC threads). */
  readonly processCores: number;
  /** CPU of child processes in cores: the git http-backend of each fetch and push. */
  readonly childCores: number;
  /** 1-minute load average at the end: other work on the machine competes for the same cores. */
  readonly load: number;
}

/** AWS requests per job, by what they would be billed as. */
export interface RequestsPerJob {
  readonly dynamoWrites: number;
  readonly dynamoReads: number;
  readonly sqsFifo: number;
  /** Receives that returned nothing (long polls that timed out): idle cost, not per job. */
  readonly sqsEmptyReceives: number;
  readonly events: number;
  /** Handler invocations of the sequencer (one per non-empty receive). */
  readonly invocations: number;
}

const SCENARIOS = [
  { workspaces: 1, jobsPerWorkspace: 40 },
  { workspaces: 10, jobsPerWorkspace: 10 },
  { workspaces: 100, jobsPerWorkspace: 3 },
] as const;

/** A diff that adds one new file: it applies on any tree that lacks the file. */
function addFileDiff(path: string, line: string): string {
  return [
    `diff --git a/${path} b/${path}`,
    'new file mode 100644',
    '--- /dev/null',
    `+++ b/${path}`,
    '@@ -0,0 +1 @@',
    `+${line}`,
    '',
  ].join('\n');
}

const gitEnv = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' };
const runGit = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@example.com', ...args], {
    cwd,
    env: gitEnv,
    encoding: 'utf8',
  }).trim();

async function newRemote(platform: LocalPlatform, root: string, name: string): Promise<string> {
  const src = await mkdtemp(join(root, `src-${name}-`));
  await writeFile(join(src, 'README.md'), `# ${name}\n`);
  runGit(src, 'init', '-q', '-b', 'main');
  runGit(src, 'add', '.');
  runGit(src, 'commit', '-q', '-m', 'initial');
  await platform.git.createBareRepo(name, { fromDir: src });
  return platform.git.repoUrl(name);
}

/** Resolves when `publish` reports the success of each job, with its time; rejects on a failure event. */
function watchOutcomes(platform: LocalPlatform): { done: (jobId: string) => Promise<number>; events: () => number } {
  const waiting = new Map<string, { resolve: (at: number) => void; reject: (error: Error) => void }>();
  const finished = new Map<string, number>();
  let published = 0;
  const events = platform.events;
  const publish = events.publish.bind(events);
  // The benchmark listens where the workers publish (the platform's one event log), timing each
  // outcome when it is published rather than when a poll would notice it.
  events.publish = (type: EventType, detail: Record<string, unknown>) => {
    published++;
    const jobId = String(detail['jobId']);
    const at = performance.now();
    if (type === 'AgentJobSucceeded') {
      finished.set(jobId, at);
      waiting.get(jobId)?.resolve(at);
    } else if (type !== 'WorkspaceBlocked') {
      waiting.get(jobId)?.reject(new Error(`job ${jobId}: ${type} ${JSON.stringify(detail)}`));
    }
    return publish(type, detail);
  };
  return {
    done: (jobId) => {
      const at = finished.get(jobId);
      if (at !== undefined) return Promise.resolve(at);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`job ${jobId} not finished after 10 minutes`)), 10 * 60_000);
        waiting.set(jobId, {
          resolve: (t) => (clearTimeout(timer), resolve(t)),
          reject: (e) => (clearTimeout(timer), reject(e)),
        });
      });
    },
    events: () => published,
  };
}

/** Counts SQS receives that returned messages apart from empty ones. */
function countReceives(platform: LocalPlatform, queueUrl: string): { nonEmpty: number; empty: number } {
  const counts = { nonEmpty: 0, empty: 0 };
  platform.emulators.clients.sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (
        context.commandName === 'ReceiveMessageCommand' &&
        (args.input as { QueueUrl?: string }).QueueUrl === queueUrl
      ) {
        if ((result.output as ReceiveMessageCommandOutput).Messages?.length) counts.nonEmpty++;
        else counts.empty++;
      }
      return result;
    },
    { step: 'initialize', name: 'benchReceiveCounter' },
  );
  return counts;
}

export async function runScenario(workspaces: number, jobsPerWorkspace: number): Promise<ScenarioResult> {
  const root = await mkdtemp(join(tmpdir(), 'bench-ordered-'));
  const platform = await startPlatform({
    stateDir: join(root, 'state'),
    output: null,
    persist: false,
    logLevel: 'ERROR',
  });
  try {
    const { clients, queueUrls, tableName } = platform.emulators;
    const fifoUrl = queueUrls['agent-jobs'] as string;
    const label = `w${workspaces}`;
    const urls = await Promise.all(
      Array.from({ length: workspaces }, (_, w) => newRemote(platform, root, `${label}-ws${w}`)),
    );
    const outcomes = watchOutcomes(platform);
    const dynamo = new RequestCounter().attach(clients.dynamodb);
    const sqs = new RequestCounter().attach(clients.sqs);
    const receives = countReceives(platform, fifoUrl);
    const eventsBefore = outcomes.events();

    const cpuBefore = cpuSnapshot();
    const started = performance.now();
    const latencies: number[] = [];
    const handoffs: number[] = [];
    await Promise.all(
      urls.map(async (url, w) => {
        const jobs: JobRequest[] = Array.from({ length: jobsPerWorkspace }, (_, i) => ({
          jobId: `${label}-ws${w}-job${i}`,
          workspaceId: `${label}-ws${w}`,
          tenantId: 'bench',
          type: 'apply_patch',
          payload: {
            repo: { url, branch: 'main' },
            diff: addFileDiff(`notes/job-${i}.txt`, `job ${i}`),
            message: `job ${i}`,
          },
        }));
        // Sent one after the other, so the FIFO queue holds them in this order.
        const sent: { jobId: string; at: number; sentAt: number }[] = [];
        for (const job of jobs) {
          const at = performance.now();
          await enqueueAgentJob(job, { sqs: clients.sqs, queueUrl: fifoUrl });
          sent.push({ jobId: job.jobId as string, at, sentAt: performance.now() });
        }
        let previous: number | undefined;
        for (const { jobId, at, sentAt } of sent) {
          const finished = await outcomes.done(jobId);
          latencies.push(finished - at);
          handoffs.push(finished - Math.max(previous ?? sentAt, sentAt));
          previous = finished;
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const cpu = cpuSince(cpuBefore, seconds);
    const jobs = workspaces * jobsPerWorkspace;
    const perJob: RequestsPerJob = {
      dynamoWrites: dynamo.writes / jobs,
      dynamoReads: dynamo.readUnits / jobs,
      sqsFifo:
        (sqs.count('SendMessage', 'DeleteMessageBatch', 'DeleteMessage', 'ChangeMessageVisibility') +
          receives.nonEmpty) /
        jobs,
      sqsEmptyReceives: receives.empty / jobs,
      events: (outcomes.events() - eventsBefore) / jobs,
      invocations: receives.nonEmpty / jobs,
    };
    await assertOrder(
      platform,
      new DynamoDbLedger({ client: clients.dynamodb, tableName, retentionDays: 30 }),
      label,
      workspaces,
      jobsPerWorkspace,
    );
    return { workspaces, jobs, seconds, latencies, handoffs, perJob, cpu };
  } finally {
    await platform.stop();
    await rm(root, { recursive: true, force: true });
  }
}

interface CpuSnapshot {
  readonly eventLoop: ReturnType<typeof performance.eventLoopUtilization>;
  readonly process: NodeJS.CpuUsage;
  readonly childSeconds: number;
}

function cpuSnapshot(): CpuSnapshot {
  return {
    eventLoop: performance.eventLoopUtilization(),
    process: process.cpuUsage(),
    childSeconds: childCpuSeconds(),
  };
}

function cpuSince(before: CpuSnapshot, seconds: number): CpuUse {
  const used = process.cpuUsage(before.process);
  return {
    eventLoop: performance.eventLoopUtilization(before.eventLoop).utilization,
    processCores: (used.user + used.system) / 1e6 / seconds,
    childCores: (childCpuSeconds() - before.childSeconds) / seconds,
    load: loadavg()[0] ?? 0,
  };
}

/**
 * CPU seconds of this process's finished children (cutime + cstime of /proc/self/stat, in clock
 * ticks of 1/100 s on Linux); 0 where /proc is missing. Node exposes no getrusage(RUSAGE_CHILDREN).
 */
function childCpuSeconds(): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8')
      .replace(/^.*\) /, '')
      .split(' ');
    // After "pid (comm) ", state is field 3; cutime and cstime are fields 16 and 17.
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return 0;
  }
}

/**
 * Which resource bounds a scenario, read from its CPU use. Event loop utilisation counts the time
 * the thread was not waiting for I/O, including time it was runnable but preempted: a busy loop on
 * little CPU is a thread starved by other processes, not a thread doing work.
 */
function limitOf(cpu: CpuUse): string {
  const cores = cpus().length;
  const total = cpu.processCores + cpu.childCores;
  if (cpu.eventLoop >= 0.9 && cpu.processCores < 0.6 * cpu.eventLoop) {
    return `the shared machine: the Node thread had work ${pct(cpu.eventLoop)} of the time but ran on ${cpu.processCores.toFixed(2)} cores (load ${cpu.load.toFixed(1)} on ${cores} cores)`;
  }
  if (cpu.eventLoop >= 0.9)
    return `the Node thread (event loop ${pct(cpu.eventLoop)} busy, ${cpu.processCores.toFixed(2)} cores): CPU-bound on one core`;
  if (total >= 0.9 * cores) return `the machine's ${cores} cores (${total.toFixed(2)} cores used)`;
  if (cpu.load >= cores)
    return `not this process (${total.toFixed(2)} of ${cores} cores) but a shared machine: load ${cpu.load.toFixed(1)} on ${cores} cores`;
  return `not the CPU (${total.toFixed(2)} of ${cores} cores): waiting on I/O and the queue`;
}

/** USD per million jobs for the requests counted per job, by service. */
function billPerMillion(perJob: RequestsPerJob): { total: number; parts: string } {
  const parts = {
    DynamoDB:
      perMillionJobs(perJob.dynamoWrites, PRICES_USD.dynamoWriteUnit) +
      perMillionJobs(perJob.dynamoReads, PRICES_USD.dynamoReadUnit),
    'SQS FIFO': perMillionJobs(perJob.sqsFifo, PRICES_USD.sqsFifoRequest),
    EventBridge: perMillionJobs(perJob.events, PRICES_USD.eventBridgeEvent),
    'Lambda requests': perMillionJobs(perJob.invocations, PRICES_USD.lambdaRequest),
  };
  const total = Object.values(parts).reduce((a, b) => a + b, 0);
  return {
    total,
    parts: Object.entries(parts)
      .map(([name, v]) => `${name} ${usd(v)}`)
      .join(', '),
  };
}

/** The naive ledger reads a job's item before claiming it (get-then-put): one consistent read more per job, the same writes. */
const naive = (perJob: RequestsPerJob): RequestsPerJob => ({ ...perJob, dynamoReads: perJob.dynamoReads + 1 });

const pct = (share: number) => `${Math.round(share * 100)}%`;

/** Every job SUCCEEDED and each branch holds its workspace's commits in the order they were sent. */
async function assertOrder(
  platform: LocalPlatform,
  ledger: DynamoDbLedger,
  label: string,
  workspaces: number,
  jobsPerWorkspace: number,
): Promise<void> {
  for (let w = 0; w < workspaces; w++) {
    for (let i = 0; i < jobsPerWorkspace; i++) {
      const record = await ledger.getJob(`${label}-ws${w}-job${i}`);
      if (record?.status !== 'SUCCEEDED') throw new Error(`${label}-ws${w}-job${i} is ${record?.status ?? 'missing'}`);
    }
    const subjects = runGit(platform.git.gitDir(`${label}-ws${w}`), 'log', '--reverse', '--format=%s', 'main').split(
      '\n',
    );
    const expected = ['initial', ...Array.from({ length: jobsPerWorkspace }, (_, i) => `job ${i}`)];
    if (JSON.stringify(subjects) !== JSON.stringify(expected))
      throw new Error(`${label}-ws${w}: commits out of order: ${subjects.join(', ')}`);
  }
}

export const bench: Benchmark = {
  name: 'ordered-lane',
  async run() {
    const rows: BenchRow[] = [];
    const results: ScenarioResult[] = [];
    let single: ScenarioResult | undefined;
    for (const { workspaces, jobsPerWorkspace } of SCENARIOS) {
      const result = await runScenario(workspaces, jobsPerWorkspace);
      single ??= result;
      results.push(result);
      const speedup = single
        ? ` (${fmt.ratio(result.jobs / result.seconds / (single.jobs / single.seconds))} of 1 workspace)`
        : '';
      rows.push(
        {
          label: `${workspaces} workspace(s) x ${jobsPerWorkspace} jobs: throughput`,
          value: `${fmt.perSecond(result.jobs / result.seconds)}${speedup}, ${result.jobs} jobs in ${fmt.ms(result.seconds * 1000)}`,
        },
        {
          label: `${workspaces} workspace(s): send to done, p50 / p99`,
          value: `${fmt.ms(quantile(result.latencies, 0.5))} / ${fmt.ms(quantile(result.latencies, 0.99))}`,
        },
        {
          label: `${workspaces} workspace(s): handoff per job, p50 / p99`,
          value: `${fmt.ms(quantile(result.handoffs, 0.5))} / ${fmt.ms(quantile(result.handoffs, 0.99))}`,
        },
        {
          label: `${workspaces} workspace(s): CPU`,
          value: `event loop ${pct(result.cpu.eventLoop)} busy, process ${result.cpu.processCores.toFixed(2)} cores, git children ${result.cpu.childCores.toFixed(2)} cores; limit: ${limitOf(result.cpu)}`,
        },
        {
          label: `${workspaces} workspace(s): AWS requests per job`,
          value: [
            `DynamoDB ${result.perJob.dynamoWrites.toFixed(2)} writes + ${result.perJob.dynamoReads.toFixed(2)} reads`,
            `SQS FIFO ${result.perJob.sqsFifo.toFixed(2)} (+${result.perJob.sqsEmptyReceives.toFixed(2)} empty receives)`,
            `EventBridge ${result.perJob.events.toFixed(2)}`,
            `Lambda invocations ${result.perJob.invocations.toFixed(2)}`,
          ].join(', '),
        },
        {
          label: `${workspaces} workspace(s): AWS cost per million jobs, requests only`,
          value: `${usd(billPerMillion(result.perJob).total)} (${billPerMillion(result.perJob).parts}); naive get-then-put ledger ${usd(billPerMillion(naive(result.perJob)).total)}`,
        },
      );
    }
    return {
      title: 'Ordered lane on the local platform: 1, 10 and 100 workspaces',
      description: [
        "apply_patch jobs (each adds a file) on small repositories over the loopback git server; each workspace's first job starts with an empty repository cache.",
        'All jobs of a scenario are sent at once, in order per workspace; order is asserted afterwards with the git CLI and the ledger.',
        'The sequencer runs with its catalog settings (batch 10, MaximumConcurrency 10). One run per scenario (the 100-workspace run alone sends 300 jobs).',
        'Everything (fauxqs, dynalite, the pollers and handlers) runs on one Node thread; the git server runs `git http-backend` per request.',
        "CPU is measured over each scenario: event loop utilisation of that thread, process CPU, and the git children's CPU (from /proc/self/stat).",
        '',
        `Cost: every AWS request the platform made was counted (SDK middleware, the event log) and priced at US East on-demand rates of ${PRICES_AS_OF}:`,
        'DynamoDB $0.625 / $0.125 per million write / read units, SQS FIFO $0.50 per million requests, EventBridge $1.00 per million events,',
        'Lambda $0.20 per million requests (aws.amazon.com/{dynamodb,sqs,eventbridge,lambda}/pricing). Empty receives are idle cost (the event source',
        "mapping's long polls) and are left out, as is Lambda compute: local durations say nothing about Lambda's (see the lambda-cost section for",
        'run_tests). The naive design is the get-then-put ledger of the ledger section: one consistent read more per job, the same writes.',
        '',
        'Command: `npm run bench ordered-lane`',
      ].join('\n'),
      rows,
      summary: [
        {
          measure: `ordered lane, ${results.map((r) => r.workspaces).join(' / ')} workspaces (order asserted)`,
          value: [
            `${results.map((r) => (r.jobs / r.seconds).toFixed(1)).join(' / ')} jobs/s`,
            `p50 ${results.map((r) => fmt.ms(quantile(r.latencies, 0.5))).join(' / ')}`,
            `p99 ${results.map((r) => fmt.ms(quantile(r.latencies, 0.99))).join(' / ')} send to done`,
            ...results.slice(1).map((r) => `limit at ${r.workspaces}: ${limitOf(r.cpu)}`),
          ].join('; '),
          goal: 'near-linear growth until the CPU is the limit (say where); p50 / p99 send to done',
        },
        {
          measure: 'AWS cost per million ordered jobs, requests only',
          value:
            results.map((r) => `${usd(billPerMillion(r.perJob).total)} at ${r.workspaces}`).join(', ') +
            ` (naive get-then-put ledger +${usd(PRICES_USD.dynamoReadUnit * 1e6)})`,
          goal: 'against the naive one-read-two-writes design',
        },
      ],
    };
  },
};
