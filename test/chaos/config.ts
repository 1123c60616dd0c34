/**
 * What the chaos harness and its platform process agree on: fault rates (probability per call or
 * request at each boundary), the platform settings of a run, and how the platform process is told.
 */
import type { WorkerSettings } from '../../contract/job-types';
import { BUILD_EVENTS, JOB_TYPES, SEQUENCER } from '../../contract/job-types';
import type { BackoffSettings } from '../../src/core/pipeline';

export interface FaultRates {
  /** DynamoDB: throttled (ProvisionedThroughputExceeded) before the request. */
  readonly dynamodbThrottle: number;
  /** DynamoDB: 500 before the request. */
  readonly dynamodb5xx: number;
  /** DynamoDB: a write applied, then a 500 the application sees (the SDK's retries gave up). */
  readonly dynamodb5xxAfterWrite: number;
  /** DynamoDB: a write applied, then a 500 the SDK retries (the retry meets its own write). */
  readonly dynamodb5xxAfterWriteRetried: number;
  /** SQS: DeleteMessageBatch fails (the message comes back after its visibility timeout). */
  readonly sqsDeleteError: number;
  /** SQS: ChangeMessageVisibility fails (back-off, release of cut records, heartbeats). */
  readonly sqsVisibilityError: number;
  /** SQS: SendMessage (forward, DLQ move) applied, then an error. */
  readonly sqsSendLostResponse: number;
  /** SQS: ReceiveMessage fails. */
  readonly sqsReceiveError: number;
  /** SQS: a received message becomes visible again while its worker runs (a second delivery). */
  readonly sqsDuplicateDelivery: number;
  /** git (sequencer's fetch and push through the proxy): 502/503 before the request reaches the server. */
  readonly git5xx: number;
  /** git: connection reset before the request reaches the server. */
  readonly gitReset: number;
  /** git: a push the server applied, then the connection reset before the answer. */
  readonly gitResetAfterPush: number;
  /** git: the request is held this long before it goes on (a slow host, a paused worker). */
  readonly gitSlow: number;
  /** GitHub: 502 on any request. */
  readonly github5xx: number;
  /** GitHub: the create succeeds, then the connection drops before the answer. */
  readonly githubLostCreate: number;
  /** GitHub: the list misses an open pull request (replica lag): the create then meets a 422. */
  readonly githubStaleList: number;
  /** Test runner: start fails before anything runs. */
  readonly runnerStartError: number;
  /** Test runner: start ran, then the answer is lost. */
  readonly runnerStartLost: number;
  /** Test runner: a poll fails. */
  readonly runnerPollError: number;
  /** Producer: the send applied, the answer is lost, the agent sends again. */
  readonly producerLostResponse: number;
  /** Producer: an agent sends the same job twice (inside SQS's deduplication window). */
  readonly producerRetry: number;
}

export const DEFAULT_RATES: FaultRates = {
  dynamodbThrottle: 0.01,
  dynamodb5xx: 0.005,
  dynamodb5xxAfterWrite: 0.005,
  dynamodb5xxAfterWriteRetried: 0.005,
  sqsDeleteError: 0.01,
  sqsVisibilityError: 0.02,
  sqsSendLostResponse: 0.01,
  sqsReceiveError: 0.005,
  sqsDuplicateDelivery: 0.01,
  git5xx: 0.01,
  gitReset: 0.005,
  gitResetAfterPush: 0.02,
  gitSlow: 0.003,
  github5xx: 0.05,
  githubLostCreate: 0.1,
  githubStaleList: 0.1,
  runnerStartError: 0.03,
  runnerStartLost: 0.03,
  runnerPollError: 0.02,
  producerLostResponse: 0.01,
  producerRetry: 0.02,
};

/**
 * `--rates`: comma-separated `name=probability` pairs over DEFAULT_RATES, `none` first to start
 * from all zero (`none,gitSlow=0.25`: slow git requests as the only fault). Throws naming the
 * entry at fault.
 */
export function parseRates(text: string): FaultRates {
  const entries = text.split(',').map((entry) => entry.trim());
  const fromNone = entries[0] === 'none';
  const rates: Record<string, number> = fromNone
    ? Object.fromEntries(Object.keys(DEFAULT_RATES).map((name) => [name, 0]))
    : { ...DEFAULT_RATES };
  for (const entry of fromNone ? entries.slice(1) : entries) {
    const match = /^([A-Za-z0-9]+)=(.+)$/.exec(entry);
    if (!match) throw new Error(`--rates: ${JSON.stringify(entry)} is not name=probability (or "none" first)`);
    const [, name = '', value = ''] = match;
    if (!(name in DEFAULT_RATES))
      throw new Error(`--rates: no fault rate named ${name}; the rates are ${Object.keys(DEFAULT_RATES).join(', ')}`);
    const probability = Number(value);
    if (!Number.isFinite(probability) || probability < 0 || probability > 1)
      throw new Error(`--rates: ${name} must be a probability from 0 to 1, got ${JSON.stringify(value)}`);
    rates[name] = probability;
  }
  return rates as unknown as FaultRates;
}

/** Where in its work the platform process kills itself (kill -9), once per life. */
export interface SelfKill {
  /** `during-run`: while a test command runs (a process sleeps the scenario's run tag). */
  readonly at: 'after-push' | 'before-delete' | 'during-run';
  /** On the nth such point of this life. */
  readonly nth: number;
}

/**
 * Short timeouts, so leases run out and messages come back within a run; the ratios are the
 * platform's (visibility = 6 x timeout, lease = timeout, five receives).
 */
export const CHAOS_WORKERS: Record<string, WorkerSettings> = {
  sequencer: { ...SEQUENCER, timeoutSeconds: 10 },
  run_tests: { ...JOB_TYPES.run_tests.stage, timeoutSeconds: 20 },
  open_pr: { ...JOB_TYPES.open_pr.stage, timeoutSeconds: 10 },
  // Its catalog timeout (60 s) makes a completion whose delete failed come back after 6 minutes: past a run's stall limit.
  build_events: { ...BUILD_EVENTS, timeoutSeconds: 10 },
};

export const CHAOS_BACKOFF: BackoffSettings = { baseSeconds: 1, capSeconds: 8 };

/** How long a slow git request or a paused worker is held: past the sequencer's lease. */
export const GIT_SLOW_MS = (CHAOS_WORKERS.sequencer?.timeoutSeconds ?? 10) * 1000 + 2_000;

/** The platform process's configuration (env CHAOS_CONFIG, JSON). */
export interface PlatformProcessConfig {
  readonly stateDir: string;
  readonly faultLog: string;
  readonly seed: string;
  /** Which life of the platform this is (0 first): forks the fault streams. */
  readonly life: number;
  readonly rates: FaultRates;
  readonly selfKill?: SelfKill;
  /** Base URL of the GitHub stand-in the open_pr stage talks to. */
  readonly githubUrl: string;
  /** Base URL of the flaky git proxy: repository URLs as the agents send them. */
  readonly gitProxyUrl: string;
  /** What the scenario's test commands sleep (Scenario.runTag): a run in progress is found by it. */
  readonly runTag: string;
}

export const CONFIG_ENV = 'CHAOS_CONFIG';
