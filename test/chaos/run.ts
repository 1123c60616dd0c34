/**
 * The chaos harness: drives the platform (a separate process, test/chaos/platform-process.ts)
 * with a seeded scenario (./scenario.ts) while faults are injected at its boundaries, kills it with
 * SIGKILL and starts it again from its state directory (the local platform's --persist) as often as
 * planned, re-sends, as an agent would, every job it has not seen finish, waits until the platform
 * is quiet and then checks the outcome from the outside (./invariants.ts).
 *
 * Faults on the harness side: the flaky git proxy (./git-proxy.ts), the GitHub stand-in's faults,
 * lost producer answers and producer retries, late duplicates, kill -9 from outside. The platform
 * process kills itself at planned points (./injectors.ts), one of them while a test command runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { stringAttributes } from '../../contract/messages';
import { JsonlEventLog } from '../../src/adapters/events';
import { enqueueAgentJob } from '../../src/client';
import { localLedger } from '../../src/compose/local';
import { jobAttributes, jobDigest, type JobEnvelope } from '../../src/core/envelope';
import { errorMessage } from '../../src/core/errors';
import { TERMINAL_STATUSES, type JobRecord, type Ledger } from '../../src/core/ports';
import { createLocalClients, type LocalClients } from '../../tools/local/emulators';
import type { PlatformInfo } from '../../tools/local/platform';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';
import { CONFIG_ENV, DEFAULT_RATES, type FaultRates, type PlatformProcessConfig, type SelfKill } from './config';
import { FaultLog } from './fault-log';
import { startGitProxy, type GitProxy } from './git-proxy';
import { checkInvariants, collect, gaveUpAfterPushIds, readLedger, type Observed, type Violations } from './invariants';
import { damagedLedgerStart, secondStartWithReset } from './state-faults';
import { Random } from './random';
import { makeScenario, mapLimit, type PlannedItem, type Scenario } from './scenario';

const ROOT = path.resolve(__dirname, '..', '..');
const PLATFORM_ENTRY = path.join(__dirname, 'platform-process.ts');
const MONITOR_MS = 2_000;
const SENDERS = 12;
/** Share of the jobs sent through the CLI's door: recorded QUEUED in the ledger before the send. */
const CLI_SHARE = 0.5;

export interface ChaosOptions {
  readonly jobs: number;
  readonly workspaces: number;
  readonly seed: string;
  /** Platform kills to plan: kill -9 from outside at some progress, or a self-kill after a push or before a delete. @default 2 */
  readonly kills?: number;
  /** More kills, each a self-kill while a test command runs (after the others). @default 0 */
  readonly killsDuringRuns?: number;
  readonly rates?: FaultRates;
  /** A run with no progress for this long is stuck: reported and stopped. @default 240_000 */
  readonly stallMs?: number;
  /** Keep the run's directory (state, logs) for reading afterwards. @default false */
  readonly keep?: boolean;
  readonly progress?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: string;
  readonly jobs: number;
  readonly workspaces: number;
  readonly durationMs: number;
  /** Starts of the platform (1 + restarts). */
  readonly lives: number;
  readonly items: Record<string, number>;
  readonly outcomes: Record<string, number>;
  /** What the checks read from the outside, counted. */
  readonly observed: Record<string, number>;
  readonly faults: Record<string, number>;
  readonly violations: Violations;
  readonly violationCount: number;
  /** The run's directory when kept. */
  readonly dir?: string;
  /** Why the run did not reach a quiet platform, if it did not. */
  readonly stuck?: string;
}

type KillPlan =
  { readonly kind: 'outside'; readonly atProgress: number } | { readonly kind: 'self'; readonly selfKill: SelfKill };

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const started = Date.now();
  const say = options.progress ?? (() => undefined);
  const rates = options.rates ?? DEFAULT_RATES;
  const root = new Random(options.seed);
  const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-chaos-'));
  const stateDir = path.join(dir, 'state');
  await mkdir(path.join(stateDir, 'repos'), { recursive: true });
  const log = new FaultLog(path.join(dir, 'faults.jsonl'));
  const proxy = await startGitProxy({ rng: root.fork('git-proxy'), rates, log });
  const githubRng = root.fork('github');
  const github = await startFakeGitHub({
    faults: (method) => {
      if (githubRng.chance(rates.github5xx)) return record(log, 'github.5xx', 'bad-gateway');
      if (method === 'POST' && githubRng.chance(rates.githubLostCreate))
        return record(log, 'github.lost-create', 'lost-create');
      if (method === 'GET' && githubRng.chance(rates.githubStaleList))
        return record(log, 'github.stale-list', 'stale-list');
      return undefined;
    },
  });
  let platform: PlatformProcess | undefined;
  try {
    say(
      `chaos: seed ${options.seed}, ${options.jobs} jobs, ${options.workspaces} workspaces; building repositories and patches in ${dir}`,
    );
    const scenario = await makeScenario({
      seed: options.seed,
      jobs: options.jobs,
      workspaces: options.workspaces,
      dir,
      reposDir: path.join(stateDir, 'repos'),
      repoUrl: proxy.repoUrl,
    });
    const kills = [
      ...planKills(root.fork('kills'), options.kills ?? 2, scenario),
      ...Array.from({ length: options.killsDuringRuns ?? 0 }, (): KillPlan => ({
        kind: 'self',
        selfKill: { at: 'during-run', nth: 1 },
      })),
    ];
    const driver = new Driver(scenario, {
      stateDir,
      log,
      rates,
      rng: root.fork('driver'),
      github,
      proxy,
      say,
      stallMs: options.stallMs ?? 240_000,
    });
    let life = 0;
    let stuck: string | undefined;
    const stateRng = root.fork('state');
    const stateProblems: string[] = [];
    const problem = (found: string | undefined) => found && stateProblems.push(found);
    for (;;) {
      const plan = kills.shift();
      // After a kill: a start on damaged ledger files is refused, then the files are put back.
      if (life > 0) problem(await damagedLedgerStart(stateDir, stateRng, log));
      platform = await PlatformProcess.start({
        stateDir,
        faultLog: log.file,
        seed: options.seed,
        life,
        rates,
        githubUrl: github.url,
        gitProxyUrl: proxy.url,
        runTag: scenario.runTag,
        ...(plan?.kind === 'self' ? { selfKill: plan.selfKill } : {}),
      });
      // Before any traffic, in a life the platform will not end by itself: a self-kill during the
      // second start would free the directory, and that start would then (rightly) empty it.
      if (plan?.kind !== 'self') problem(await secondStartWithReset(stateDir, platform.info.pid, log));
      proxy.setUpstream(platform.info.gitUrl);
      const ended = await driver.live(platform, life, plan?.kind === 'outside' ? plan.atProgress : undefined);
      if (ended.kind === 'quiet') break;
      if (ended.kind === 'stuck') {
        stuck = ended.why;
        break;
      }
      // The self-kill did not come in this life (too few pushes or deletes left): keep going without it.
      if (plan?.kind === 'self' && ended.kind !== 'died') kills.unshift(plan);
      say(`chaos: platform died (life ${life}); restarting from ${stateDir}`);
      life++;
    }
    say('chaos: platform quiet; checking invariants from the outside');
    const observed = await observe(scenario, platform, github);
    const violations = await checkInvariants(scenario, observed);
    if (stuck) violations.quiet = [stuck];
    if (stateProblems.length > 0) violations.state = stateProblems;
    const violationCount = Object.values(violations).reduce((n, list) => n + list.length, 0);
    return {
      seed: options.seed,
      jobs: options.jobs,
      workspaces: options.workspaces,
      durationMs: Date.now() - started,
      lives: life + 1,
      items: countBy(scenario.items, (i) => i.kind),
      outcomes: outcomes(scenario, observed),
      observed: counts(observed),
      faults: log.counts(),
      violations,
      violationCount,
      ...(options.keep ? { dir } : {}),
      ...(stuck ? { stuck } : {}),
    };
  } finally {
    await platform?.stop();
    await proxy.close();
    await github.close();
    if (!options.keep) await rm(dir, { recursive: true, force: true });
  }
}

function record<T>(log: FaultLog, kind: string, value: T): T {
  log.record(kind);
  return value;
}

/** Kills spread over the run: kill -9 from outside at a share of the jobs finished, or a self-kill. */
function planKills(rng: Random, count: number, scenario: Scenario): KillPlan[] {
  const patches = scenario.items.filter((i) => i.kind === 'apply_patch').length;
  return Array.from({ length: count }, (_, i): KillPlan => {
    const atProgress = (i + 1) / (count + 1);
    switch (rng.int(3)) {
      case 0:
        return { kind: 'outside', atProgress };
      case 1:
        return {
          kind: 'self',
          selfKill: { at: 'after-push', nth: 1 + rng.int(Math.max(1, Math.floor(patches / (count + 1)))) },
        };
      default:
        return {
          kind: 'self',
          selfKill: {
            at: 'before-delete',
            nth: 1 + rng.int(Math.max(1, Math.floor(scenario.items.length / (count + 1)))),
          },
        };
    }
  });
}

/** The platform process: started, told its faults, killed with SIGKILL or stopped with SIGINT. */
class PlatformProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly info: PlatformInfo,
    readonly exited: Promise<void>,
  ) {}

  static async start(config: PlatformProcessConfig): Promise<PlatformProcess> {
    const child = spawn(process.execPath, ['-r', 'tsx/cjs', PLATFORM_ENTRY], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, [CONFIG_ENV]: JSON.stringify(config), NODE_NO_WARNINGS: '1' },
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4_000)));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const info = await new Promise<PlatformInfo>((resolve, reject) => {
      let buffered = '';
      const onData = (chunk: Buffer) => {
        buffered += chunk.toString();
        const newline = buffered.indexOf('\n');
        if (newline < 0) return;
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve(JSON.parse(buffered.slice(0, newline)) as PlatformInfo);
      };
      child.stdout?.on('data', onData);
      void exited.then(() => reject(new Error(`the platform process exited before it was ready:\n${stderr}`)));
    });
    return new PlatformProcess(child, info, exited);
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async kill(): Promise<void> {
    if (this.alive) this.child.kill('SIGKILL');
    await this.exited;
  }

  async stop(): Promise<void> {
    if (this.alive) this.child.kill('SIGINT');
    await this.exited;
  }
}

type LifeEnd = { kind: 'quiet' } | { kind: 'died' } | { kind: 'stuck'; why: string };

interface DriverParts {
  readonly stateDir: string;
  readonly log: FaultLog;
  readonly rates: FaultRates;
  readonly rng: Random;
  readonly github: FakeGitHub;
  readonly proxy: GitProxy;
  readonly say: (line: string) => void;
  readonly stallMs: number;
}

/** Sends the scenario over the platform's lives and watches it settle. */
class Driver {
  /** Items sent (and acknowledged by SQS) at least once. */
  private readonly sent = new Set<PlannedItem>();
  private readonly events: JsonlEventLog;
  private eventOffset = 0;
  /** Job ids with at least one outcome event. */
  private readonly announced = new Set<string>();
  private readonly ledgerJobs: number;

  constructor(
    private readonly scenario: Scenario,
    private readonly parts: DriverParts,
  ) {
    this.events = new JsonlEventLog(path.join(parts.stateDir, 'events.jsonl'));
    this.ledgerJobs = scenario.items.filter(isLedgerJob).length;
  }

  /** One life of the platform: (re-)send, watch, kill it when planned. */
  async live(platform: PlatformProcess, life: number, killAtProgress: number | undefined): Promise<LifeEnd> {
    const clients = createLocalClients(platform.info.endpoints);
    injectProducerFaults(clients.sqs, this.parts);
    try {
      const queue = await this.toSend(clients, platform.info.tableName, life);
      this.parts.say(
        `chaos: life ${life}: sending ${queue.length} item(s) (${queue.filter((i) => this.sent.has(i)).length} again)`,
      );
      const sending = this.sendAll(queue, clients, platform);
      const ended = await this.watch(platform, clients, sending, killAtProgress);
      await sending;
      return ended;
    } finally {
      clients.destroy();
    }
  }

  /** What to send in this life: every item not sent yet, and every sent job without a known outcome, in order. */
  private async toSend(clients: LocalClients, tableName: string, life: number): Promise<PlannedItem[]> {
    if (life === 0) return this.scenario.items;
    const records = new Map((await readLedger(clients, tableName)).jobs.map((j) => [j.jobId, j]));
    await this.readEvents();
    return this.scenario.items.filter((item) => {
      if (!this.sent.has(item)) return true;
      if (!isLedgerJob(item)) return true; // poison and conflicts: their DLQ copies died with the queues
      const status = records.get(item.jobId)?.status;
      if (status === 'CANCELLED') return false;
      // An agent waits for the outcome event: a SUCCEEDED job whose event never came is sent again too.
      return status !== 'SUCCEEDED' || !this.announced.has(item.jobId);
    });
  }

  private async sendAll(
    queue: readonly PlannedItem[],
    clients: LocalClients,
    platform: PlatformProcess,
  ): Promise<void> {
    const byWorkspace = new Map<string, PlannedItem[]>();
    for (const item of queue) byWorkspace.set(item.workspaceId, [...(byWorkspace.get(item.workspaceId) ?? []), item]);
    const ledger = localLedger({ clients, tableName: platform.info.tableName });
    const queueUrl = platform.info.queueUrls['agent-jobs'] as string;
    await mapLimit([...byWorkspace.values()], SENDERS, async (items) => {
      const late: PlannedItem[] = [];
      for (const item of items) {
        if (!platform.alive) return;
        const first = !this.sent.has(item);
        if (
          first &&
          item.cancelled &&
          !(await whileAlive(platform, item.jobId, () => cancelBeforeItsTurn(item.job as JobEnvelope, ledger)))
        )
          return;
        if (!(await this.send(item, clients.sqs, queueUrl, platform, ledger))) return;
        for (const dup of late.splice(0)) await this.sendLateDuplicate(dup, clients.sqs, queueUrl, platform);
        if (first && item.lateDuplicate) late.push(item);
      }
      for (const dup of late) await this.sendLateDuplicate(dup, clients.sqs, queueUrl, platform);
    });
  }

  /**
   * Sends one item, retrying a lost answer as an agent would; false when the platform died meanwhile.
   * A share of the jobs goes through the CLI's door (recorded QUEUED in the ledger first); a
   * cancelled job goes without it, so its message still reaches the sequencer.
   */
  private async send(
    item: PlannedItem,
    sqs: SQSClient,
    queueUrl: string,
    platform: PlatformProcess,
    ledger: Ledger,
  ): Promise<boolean> {
    const viaCli = !item.cancelled && this.parts.rng.chance(CLI_SHARE);
    const sent = await whileAlive(platform, item.jobId, async () => {
      if (item.raw) {
        await sendRaw(sqs, queueUrl, item.raw.body, item.raw.groupId, `${item.jobId}:${item.position}`, {
          jobId: item.jobId,
          workspaceId: item.workspaceId,
        });
      } else if (item.kind === 'conflict' || item.kind === 'hostile_patch') {
        // A hostile patch goes around the producer (which refuses an unsafe one before sending), as a hostile agent would.
        const job = item.job as JobEnvelope;
        await sendRaw(
          sqs,
          queueUrl,
          JSON.stringify(job),
          `ws#${job.workspaceId}`,
          `${item.kind}:${item.jobId}:${item.position}`,
          jobAttributes(job),
        );
      } else {
        const options = { sqs, queueUrl, ...(viaCli ? { ledger } : {}) };
        await enqueueAgentJob(item.job as JobEnvelope, options);
        if (this.parts.rng.chance(this.parts.rates.producerRetry)) {
          this.parts.log.record('producer.retry', item.jobId);
          await enqueueAgentJob(item.job as JobEnvelope, options);
        }
      }
    });
    if (sent) this.sent.add(item);
    return sent;
  }

  /** The same job again, as SQS would deliver it after its deduplication window: a new deduplication id, a new timestamp. */
  private async sendLateDuplicate(
    item: PlannedItem,
    sqs: SQSClient,
    queueUrl: string,
    platform: PlatformProcess,
  ): Promise<void> {
    if (!platform.alive) return;
    const job = {
      ...(item.job as JobEnvelope),
      createdAt: new Date(Date.parse((item.job as JobEnvelope).createdAt) + 3_600_000).toISOString(),
    };
    this.parts.log.record('producer.late-duplicate', item.jobId);
    await sendRaw(
      sqs,
      queueUrl,
      JSON.stringify(job),
      `ws#${job.workspaceId}`,
      `late:${item.jobId}`,
      jobAttributes(job),
    ).catch(() => undefined);
  }

  /** Watches progress until the platform is quiet, dies, is killed as planned, or makes no progress. */
  private async watch(
    platform: PlatformProcess,
    clients: LocalClients,
    sending: Promise<void>,
    killAtProgress: number | undefined,
  ): Promise<LifeEnd> {
    let sendingDone = false;
    void sending.finally(() => (sendingDone = true)).catch(() => undefined);
    let lastChange = Date.now();
    let lastState = '';
    let quietChecks = 0;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, MONITOR_MS));
      if (!platform.alive) return { kind: 'died' };
      await this.readEvents();
      const progress = this.announced.size / Math.max(1, this.ledgerJobs);
      if (killAtProgress !== undefined && progress >= killAtProgress) {
        this.parts.log.record('kill.outside', `at ${Math.round(progress * 100)}% of outcomes`);
        await platform.kill();
        return { kind: 'died' };
      }
      const depth = await queueDepths(clients.sqs, platform.info).catch(() => undefined);
      // A RUNNING job's stage message is gone while its run goes on: its end is still to come.
      const builds = await runningBuilds(clients, platform.info).catch(() => undefined);
      if (depth === undefined || builds === undefined) continue;
      const state = `${this.announced.size} ${JSON.stringify(depth)} running builds ${builds}`;
      if (state !== lastState) {
        lastState = state;
        lastChange = Date.now();
        this.parts.say(
          `chaos: ${this.announced.size}/${this.ledgerJobs} jobs announced, queues ${JSON.stringify(depth)}`,
        );
      }
      const empty = builds === 0 && Object.values(depth).every((n) => n === 0);
      quietChecks = sendingDone && empty ? quietChecks + 1 : 0;
      if (quietChecks >= 2) return { kind: 'quiet' };
      if (Date.now() - lastChange > this.parts.stallMs)
        return { kind: 'stuck', why: `no progress for ${this.parts.stallMs / 1000}s: ${state}` };
    }
  }

  private async readEvents(): Promise<void> {
    const { events, nextOffset } = await this.events.readFrom(this.eventOffset);
    this.eventOffset = nextOffset;
    for (const event of events) {
      const jobId = event.detail['jobId'];
      if (event.type !== 'WorkspaceBlocked' && typeof jobId === 'string' && event.detail['reason'] !== 'CONFLICT')
        this.announced.add(jobId);
    }
  }
}

/**
 * An agent enqueues through the CLI (the job is recorded QUEUED) and cancels it before its turn:
 * the sequencer must acknowledge its message without running it.
 */
async function cancelBeforeItsTurn(job: JobEnvelope, ledger: Ledger): Promise<void> {
  await ledger.recordQueued({ job, digest: jobDigest(job), now: Date.now() });
  await ledger.cancel(job.jobId, Date.now());
}

/**
 * Runs `step` (a send, a ledger write), retrying a failure, as an agent would, while the platform
 * lives; false when it died meanwhile (its endpoints then refuse connections).
 */
async function whileAlive(platform: PlatformProcess, jobId: string, step: () => Promise<unknown>): Promise<boolean> {
  for (let attempt = 0; platform.alive; attempt++) {
    try {
      await step();
      return true;
    } catch (error) {
      if (!platform.alive) return false;
      if (attempt > 20) throw new Error(`could not send ${jobId}: ${errorMessage(error)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return false;
}

/** Items that are jobs of their own in the ledger (not poison, not a reused id). */
export function isLedgerJob(item: PlannedItem): boolean {
  return item.kind !== 'poison' && item.kind !== 'conflict';
}

async function sendRaw(
  sqs: SQSClient,
  queueUrl: string,
  body: string,
  groupId: string,
  dedupKey: string,
  attributes: Record<string, string>,
): Promise<void> {
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: queueUrl,
      MessageBody: body,
      MessageGroupId: groupId,
      MessageDeduplicationId: createHash('sha256').update(dedupKey).digest('hex'),
      MessageAttributes: stringAttributes(attributes),
    }),
  );
}

/** The producer's sends may apply and lose their answer: the agent sends again (deduplicated by SQS). */
function injectProducerFaults(sqs: SQSClient, { rng, rates, log }: DriverParts): void {
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const output = await next(args);
      if (context.commandName === 'SendMessageCommand' && rng.chance(rates.producerLostResponse)) {
        log.record('producer.lost-response');
        throw new Error('chaos: the send answer was lost');
      }
      return output;
    },
    { step: 'initialize', name: 'chaosProducerFaults' },
  );
}

/** Messages on each source queue: visible, in flight and delayed. */
/** Jobs RUNNING in the ledger (on the due index, read back from their records). */
async function runningBuilds(clients: LocalClients, info: PlatformInfo): Promise<number> {
  const listed = await localLedger({ clients, tableName: info.tableName }).listDue(Number.MAX_SAFE_INTEGER, 100);
  return listed.filter((r) => r.status === 'RUNNING').length;
}

async function queueDepths(sqs: SQSClient, info: PlatformInfo): Promise<Record<string, number>> {
  const depths: Record<string, number> = {};
  for (const [name, url] of Object.entries(info.queueUrls)) {
    const { Attributes = {} } = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    depths[name] =
      Number(Attributes.ApproximateNumberOfMessages ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(Attributes.ApproximateNumberOfMessagesDelayed ?? 0);
  }
  return depths;
}

async function observe(
  scenario: Scenario,
  platform: PlatformProcess | undefined,
  github: FakeGitHub,
): Promise<Observed> {
  if (!platform?.alive) throw new Error('the platform is not running: nothing to observe');
  const clients = createLocalClients(platform.info.endpoints);
  try {
    return await collect(scenario, { clients, info: platform.info, github });
  } finally {
    clients.destroy();
  }
}

function outcomes(scenario: Scenario, observed: Observed): Record<string, number> {
  const byId = new Map(observed.ledger.jobs.map((j) => [j.jobId, j]));
  return countBy(scenario.items.filter(isLedgerJob), (item) => {
    const record: JobRecord | undefined = byId.get(item.jobId);
    if (!record) return 'MISSING';
    if (record.status === 'FAILED' || record.status === 'SKIPPED')
      return `${record.status} ${record.error?.reason ?? '?'}`;
    return TERMINAL_STATUSES.includes(record.status) ? record.status : `${record.status} (unfinished)`;
  });
}

function counts(observed: Observed): Record<string, number> {
  const branches = [...observed.branches.values()];
  return {
    'commits on the workspace branches': branches.reduce((n, b) => n + b.commits.length, 0),
    'test runs (printed by the test commands)': observed.runs.length,
    'pull requests': [...observed.pulls.values()].reduce((n, p) => n + p.length, 0),
    'outcome events': observed.events.filter((e) => e.type !== 'WorkspaceBlocked').length,
    'WorkspaceBlocked events': observed.events.filter((e) => e.type === 'WorkspaceBlocked').length,
    'DLQ messages (last life)': observed.dlq.length,
    "DLQ messages moved by SQS's redrive (no reason)": observed.dlq.filter((c) => c.reason === undefined).length,
    'patch jobs that gave up after their push (counted as applied)': gaveUpAfterPushIds(observed).length,
  };
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
}
