/**
 * The processing rules every consumer shares (docs/design.md "Processing rules"). A handler describes
 * its job type as a `JobProcessor` and calls:
 *
 *   const process = createRecordProcessor(processor, deps);      // (record) => Promise<boolean>
 *   return processFifoBatch(event.Records, process);             // or processStandardBatch (fifo-batch.ts)
 *
 * For each record `processRecord`:
 *   1. parses the delivery with `processor.parse` (InvalidJobError → DLQ with the reason, acknowledged);
 *   2. claims the job in the ledger (duplicate / finished → acknowledged, its outcome reported again;
 *      conflict → recorded beside the original, permanent CONFLICT; a stage message the sequencer
 *      never pinned (no record, another request or another pin) → UNPINNED to the DLQ, no ledger
 *      write, no event; busy → transient; cancelled, or taken by its stage consumer →
 *      acknowledged no-op; a job the sequencer already forwarded → `processor.afterComplete` again
 *      with the recorded pin);
 *   3. runs `processor.run(job, ctx)`; `ctx.heartbeat()` extends the lease and the message
 *      visibility together, `ctx.recordProgress()` saves e.g. a build id before a long wait;
 *   4. completes the ledger with the verdict (fenced on the lease), publishes the event, counts the
 *      metric, moves a SKIPPED message to the DLQ, then calls `processor.afterComplete`.
 * Errors: PermanentJobError → ledger FAILED, `processor.onPermanentFailure` (the sequencer fences the
 * workspace there), DLQ with `reason` / `errorMessage` attributes, acknowledged. A transient
 * error (TransientJobError, or a network, throttling, 5xx or resource cause) releases the lease and
 * the record is retried with a ChangeMessageVisibility back-off, except on the last allowed
 * receive, where it becomes permanent RETRIES_EXHAUSTED; any other error is permanent
 * UNEXPECTED_ERROR at once (classifyFailure). Once a verdict is in the ledger nothing records a
 * second one: a failing later step (DLQ move, forward, event) is retried, and the redelivery redoes
 * the DLQ move or the forward from the record.
 *
 * Limits (RetryAfterError: GitHub's rate limits, the platform's pacing of GitHub writes, a build
 * quota, Secrets Manager's quotas on a build's checkout secret) are waits, not failures. SQS counts every receive and moves a message to the DLQ after
 * maxReceiveCount of them whatever the handler says, so a wait must not be spent as a receive:
 * - on a stage queue (standard) the job's message is sent again as a fresh copy, delayed by the
 *   wait (SQS's longest delay is 15 minutes: a longer wait travels in the copy, which is sent again
 *   when it comes early), and the original acknowledged. The copy's receive count starts at zero
 *   and carries the failed receives of the earlier copies (DEFERRAL_ATTRIBUTES), so a wait costs no
 *   receive and a real failure still counts: however long a quota holds a job, it never fails it.
 * - on the FIFO queue a copy would go behind its workspace's later jobs, so the message stays and
 *   its visibility is set to the wait (at least the usual back-off): each receive a limit spends is
 *   one window of the limit (GitHub's reset, its retry-after), never the seconds of a back-off, and
 *   RETRIES_EXHAUSTED names it. The sequencer meets a limit only when it mints a GitHub token.
 */
import type { SQSRecord } from 'aws-lambda';
import type { OutcomeEventDetail } from '../../contract/events';
import { DEFERRAL_ATTRIBUTES, REDRIVE_ATTRIBUTE } from '../../contract/messages';
import { JOB_METRICS, type EventType, type JobMetricName } from '../../contract/runtime-env';
import { isStageMessage, jobDigest, type JobEnvelope } from './envelope';
import {
  errorMessage,
  LeaseHeldError,
  PermanentJobError,
  RetryAfterError,
  TransientJobError,
  type LimitKind,
} from './errors';
import { judgeRequirements, type GateCheck } from './requirements';
import { transientCause } from './transient-cause';
import type {
  Clock,
  CompleteInput,
  Consumer,
  EventPublisher,
  JobLogger,
  JobMetrics,
  JobRecord,
  JobVerdict,
  Ledger,
  QueueOps,
} from './ports';

export interface PipelineSettings {
  readonly consumer: Consumer;
  readonly leaseSeconds: number;
  /** The queue's maxReceiveCount: the last allowed receive turns a transient error permanent. */
  readonly maxReceiveCount: number;
  /** Visibility set by a heartbeat. */
  readonly visibilitySeconds: number;
  readonly backoff: BackoffSettings;
}

export interface BackoffSettings {
  readonly baseSeconds: number;
  readonly capSeconds: number;
}

export interface PipelineDeps {
  readonly ledger: Ledger;
  readonly queueOps: QueueOps;
  readonly events: EventPublisher;
  readonly metrics: JobMetrics;
  readonly logger: JobLogger;
  readonly clock: Clock;
  /** A fresh lease owner per delivery attempt. */
  readonly newOwner: () => string;
  readonly settings: PipelineSettings;
}

export interface JobContext {
  readonly record: SQSRecord;
  /** The ledger record as claimed (attempt, pin, progress of an earlier attempt). */
  readonly claimed: JobRecord;
  readonly owner: string;
  readonly logger: JobLogger;
  /** Extends the ledger lease and the message visibility together. */
  heartbeat(): Promise<void>;
  /** Indexes the job under its workspace (byWorkspace) when its verdict is written, whatever it is. */
  placeInWorkspace(position: WorkspacePosition): void;
  recordProgress(progress: Record<string, string>): Promise<void>;
}

export interface WorkspacePosition {
  readonly workspaceId: string;
  readonly seq: number;
}

/** What `run` decided (failures are thrown). */
export type RunVerdict = Exclude<JobVerdict, { status: 'FAILED' }>;

export interface RunResult {
  readonly verdict: RunVerdict;
}

export interface JobProcessor<M extends JobEnvelope = JobEnvelope> {
  /**
   * Validates the delivery: the body (parseEnvelope or parseStageMessage) and whatever the lane
   * requires of the message itself (the sequencer: its FIFO group). Throws InvalidJobError.
   */
  parse(body: string, record: SQSRecord): M;
  run(job: M, ctx: JobContext): Promise<RunResult>;
  /** After the verdict is recorded, and again for a redelivered job the claim calls `forwarded`: must be idempotent. */
  afterComplete?(job: M, record: JobRecord): Promise<void>;
  /** A permanent failure is about to be reported; `held` says whether this delivery held the claim. */
  onPermanentFailure?(job: M, error: PermanentJobError, held: boolean): Promise<void>;
}

/** Retry back-off of every consumer: 10 s doubling per receive, at most 15 minutes. */
export const DEFAULT_BACKOFF: BackoffSettings = { baseSeconds: 10, capSeconds: 900 };

/** Visibility before the next try: exponential in the receive count, capped (SQS allows up to 12 h). */
export function backoffSeconds(receiveCount: number, settings: BackoffSettings): number {
  const exponent = Math.max(0, receiveCount - 1);
  return Math.min(settings.capSeconds, settings.baseSeconds * 2 ** Math.min(exponent, 30));
}

export function receiveCount(record: SQSRecord): number {
  const count = Number(record.attributes.ApproximateReceiveCount);
  return Number.isFinite(count) && count > 0 ? count : 1;
}

/** The longest visibility SQS allows (12 hours). */
const MAX_VISIBILITY_SECONDS = 43_200;
/** The longest delay SQS allows a message (15 minutes). */
export const MAX_DELAY_SECONDS = 900;
/**
 * A limit that names no time (a build quota: builds free up when running ones end, which nobody
 * announces; a throttled Secrets Manager) is tried again after the back-off of the job's waits so far, capped here so a freed
 * build is taken within this long: the quota stays used while jobs wait for it.
 */
export const QUOTA_WAIT_CAP_SECONDS = 120;

/** The metric each limit is counted by, once per wait. */
const LIMIT_METRICS: Readonly<Record<LimitKind, JobMetricName>> = {
  'github-rate-limit': JOB_METRICS.githubRateLimited,
  'github-pacing': JOB_METRICS.githubPaced,
  'build-quota': JOB_METRICS.buildsWaitingForQuota,
  'secrets-quota': JOB_METRICS.checkoutSecretsThrottled,
  'requirement-pending': JOB_METRICS.jobsWaitingForRequirement,
};

/** What earlier copies of a stage message spent (DEFERRAL_ATTRIBUTES); zeros for a first copy. */
interface Deferral {
  /** Epoch ms before which the job must not run. */
  readonly until: number;
  readonly failedReceives: number;
  readonly deferrals: number;
}

function deferralOf(record: SQSRecord): Deferral {
  const read = (name: string): number => {
    const value = Number(record.messageAttributes[name]?.stringValue);
    return Number.isFinite(value) && value > 0 ? value : 0;
  };
  return {
    until: read(DEFERRAL_ATTRIBUTES.until),
    failedReceives: read(DEFERRAL_ATTRIBUTES.failedReceives),
    deferrals: read(DEFERRAL_ATTRIBUTES.deferrals),
  };
}

/** Seconds a limit asks the job to wait: the service's time when it named one, else the quota back-off. */
function limitWaitSeconds(limit: RetryAfterError, now: number, deferrals: number, backoff: BackoffSettings): number {
  if (limit.retryAt !== undefined)
    return Math.min(MAX_VISIBILITY_SECONDS, Math.max(1, Math.ceil((limit.retryAt - now) / 1000)));
  return Math.min(QUOTA_WAIT_CAP_SECONDS, backoffSeconds(deferrals + 1, backoff));
}

/**
 * Seconds until a held lease ends: a busy job comes back then, so a holder that died is taken over
 * on that delivery (a shorter back-off spends the receives while the lease still runs).
 */
function untilLeaseEnds(error: LeaseHeldError, now: number): number {
  return Math.min(MAX_VISIBILITY_SECONDS, Math.max(0, Math.ceil((error.leaseUntil - now) / 1000)));
}

/**
 * Classifies a failure by cause: permanent as is; a lease held by another delivery is its holder's
 * to finish (failing it here would report FAILED, and fence the workspace, for a job that may well
 * succeed); transient (a TransientJobError, or a cause a retry can cure: transient-cause.ts) until
 * the last allowed receive, then RETRIES_EXHAUSTED; anything else fails on this delivery as
 * UNEXPECTED_ERROR, since every retry would meet it again.
 */
export function classifyFailure(
  error: unknown,
  receives: number,
  maxReceiveCount: number,
): PermanentJobError | TransientJobError {
  if (error instanceof PermanentJobError || error instanceof LeaseHeldError) return error;
  const cause = error instanceof TransientJobError ? 'transient' : transientCause(error);
  if (cause === undefined) {
    return new PermanentJobError('UNEXPECTED_ERROR', `${describeError(error)} (retrying cannot cure it)`, {
      cause: error,
    });
  }
  if (receives >= maxReceiveCount) {
    return new PermanentJobError('RETRIES_EXHAUSTED', `gave up after ${receives} receives: ${errorMessage(error)}`, {
      cause: error,
    });
  }
  return error instanceof TransientJobError ? error : new TransientJobError(errorMessage(error), { cause: error });
}

/** `TypeError: x is not a function`: the class says as much as the text. */
function describeError(error: unknown): string {
  return error instanceof Error && error.name !== 'Error' ? `${error.name}: ${error.message}` : errorMessage(error);
}

/**
 * The event and metric of each verdict. A forwarded or running job is not finished: its stage
 * consumer, or its build's completion, publishes the outcome.
 */
export const EVENT_OF: Readonly<
  Record<JobVerdict['status'], { readonly event?: EventType; readonly metric: JobMetricName }>
> = {
  SUCCEEDED: { event: 'AgentJobSucceeded', metric: 'JobSucceeded' },
  FAILED: { event: 'AgentJobFailed', metric: 'JobFailed' },
  SKIPPED: { event: 'AgentJobSkipped', metric: 'JobSkipped' },
  FORWARDED: { metric: 'JobForwarded' },
  RUNNING: { metric: 'JobRunning' },
};

function jobLogger(logger: JobLogger, ids: Record<string, unknown>): JobLogger {
  return {
    debug: (m, ...extra) => logger.debug(m, ids, ...extra),
    info: (m, ...extra) => logger.info(m, ids, ...extra),
    warn: (m, ...extra) => logger.warn(m, ids, ...extra),
    error: (m, ...extra) => logger.error(m, ids, ...extra),
  };
}

/** A verdict that ends a job, and so has an outcome event. */
export type OutcomeVerdict = Extract<JobVerdict, { status: 'SUCCEEDED' | 'FAILED' | 'SKIPPED' }>;

function isOutcome(verdict: JobVerdict): verdict is OutcomeVerdict {
  return verdict.status === 'SUCCEEDED' || verdict.status === 'FAILED' || verdict.status === 'SKIPPED';
}

/** The `detail` of a job's outcome event: ids and the verdict, never the payload (contract/events.ts). */
export function eventDetail(
  job: Pick<JobEnvelope, 'jobId' | 'workspaceId' | 'tenantId' | 'type'>,
  verdict: OutcomeVerdict,
  attempt: number,
): OutcomeEventDetail {
  const { jobId, workspaceId, tenantId, type } = job;
  const base = { jobId, workspaceId, tenantId, type, attempt };
  switch (verdict.status) {
    case 'SUCCEEDED':
      return { ...base, status: verdict.status, result: verdict.result };
    case 'FAILED':
      return { ...base, status: verdict.status, reason: verdict.error.reason, message: verdict.error.message };
    case 'SKIPPED':
      return { ...base, status: verdict.status, reason: verdict.error.reason, blockedBy: verdict.blockedBy };
  }
}

/** The verdict a finished record holds, to report it again; undefined for a record without one. */
export function recordedVerdict(record: JobRecord): OutcomeVerdict | undefined {
  switch (record.status) {
    case 'SUCCEEDED':
      return { status: 'SUCCEEDED', result: record.result ?? {} };
    case 'FAILED':
      return record.error ? { status: 'FAILED', error: record.error } : undefined;
    case 'SKIPPED':
      return record.error
        ? { status: 'SKIPPED', error: record.error, blockedBy: record.blockedBy ?? 'unknown' }
        : undefined;
    default:
      return undefined;
  }
}

/** A build's verdict is reported by the build-completion path (or the reconciler), once. */
function reportedByItsBuild(record: JobRecord): boolean {
  return record.dueAt !== undefined || record.reportedAt !== undefined;
}

export function createRecordProcessor<M extends JobEnvelope>(
  processor: JobProcessor<M>,
  deps: PipelineDeps,
): (record: SQSRecord) => Promise<boolean> {
  return (record) => processRecord(record, processor, deps);
}

/** Runs one delivery through the rules above; resolves true when the record may be acknowledged. */
export async function processRecord<M extends JobEnvelope>(
  record: SQSRecord,
  processor: JobProcessor<M>,
  deps: PipelineDeps,
): Promise<boolean> {
  let job: M;
  try {
    job = processor.parse(record.body, record);
  } catch (error) {
    if (!(error instanceof PermanentJobError)) throw error;
    return refuseMessage(record, error, deps, 'unparseable message moved to the DLQ');
  }
  const log = jobLogger(deps.logger, {
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    jobType: job.type,
    messageId: record.messageId,
  });
  const early = deferralOf(record).until - deps.clock.now();
  // A copy that came before its wait ended (the wait was longer than SQS's longest delay): sent again.
  if (early > 0 && deps.settings.consumer === 'stage' && (await requeue(record, Math.ceil(early / 1000), deps, log)))
    return true;
  const run = new JobRun(record, job, processor, deps, log);
  try {
    return await run.execute();
  } catch (error) {
    return run.fail(error);
  }
}

/**
 * A transient failure: the record is reported failed and becomes visible again after its back-off,
 * or after the time a busy lease or a limit names when that is later.
 */
async function backOff(record: SQSRecord, error: unknown, deps: PipelineDeps, log: JobLogger): Promise<false> {
  const receives = receiveCount(record);
  const now = deps.clock.now();
  const named =
    error instanceof LeaseHeldError
      ? untilLeaseEnds(error, now)
      : error instanceof RetryAfterError
        ? limitWaitSeconds(error, now, receives - 1, deps.settings.backoff)
        : 0;
  const seconds = Math.max(backoffSeconds(receives, deps.settings.backoff), named);
  log.warn('transient failure: retrying later', { error: errorMessage(error), receives, backoffSeconds: seconds });
  // Best effort: without it the retry waits for the visibility timeout.
  await deps.queueOps
    .changeVisibility(record, seconds)
    .catch((e: unknown) => log.warn('back-off failed', { error: errorMessage(e) }));
  return false;
}

/**
 * Sends a stage message again as a fresh copy visible in `seconds` (its wait goes in the copy when
 * SQS cannot delay it that long), carrying the failed receives of this delivery's copies; false
 * when the send failed (the caller falls back on the visibility back-off).
 */
async function requeue(
  record: SQSRecord,
  seconds: number,
  deps: PipelineDeps,
  log: JobLogger,
  waited = false,
): Promise<boolean> {
  const carried = deferralOf(record);
  const now = deps.clock.now();
  // This copy's receives before this one failed; this one waited (or came early) and does not count.
  const failedReceives = carried.failedReceives + receiveCount(record) - 1;
  const attributes = {
    [DEFERRAL_ATTRIBUTES.until]: String(now + seconds * 1000),
    [DEFERRAL_ATTRIBUTES.failedReceives]: String(failedReceives),
    [DEFERRAL_ATTRIBUTES.deferrals]: String(carried.deferrals + (waited ? 1 : 0)),
  };
  try {
    await deps.queueOps.requeue(record, Math.min(seconds, MAX_DELAY_SECONDS), attributes);
    return true;
  } catch (error) {
    log.warn('sending the waiting job again failed: it waits on its visibility instead', {
      error: errorMessage(error),
    });
    return false;
  }
}

/**
 * A message refused before any ledger write (unparseable, or a stage message the sequencer never
 * pinned): no job record to claim, complete or fence, and no outcome event, since the job id it
 * names may belong to a real job. The message goes to the DLQ with the reason (the DLQ alarm tells
 * the operator); a failed send is retried.
 */
async function refuseMessage(
  record: SQSRecord,
  error: PermanentJobError,
  deps: PipelineDeps,
  what: string,
  ids: Record<string, unknown> = {},
): Promise<boolean> {
  const logIds = { ...ids, messageId: record.messageId, reason: error.reason };
  try {
    await deps.queueOps.moveToDlq(record, { reason: error.reason, message: error.message });
  } catch (moveError) {
    return backOff(record, moveError, deps, jobLogger(deps.logger, logIds));
  }
  deps.logger.warn(what, logIds, { error: error.message });
  deps.metrics.count('JobFailed');
  return true;
}

/** One delivery of one job: holds the claim state shared by the success and failure paths. */
class JobRun<M extends JobEnvelope> {
  private readonly owner: string;
  private claimed: JobRecord | undefined;
  private position: WorkspacePosition | undefined;
  /** The verdict is in the ledger: what follows (DLQ, events, forward) is redone by a redelivery. */
  private settled = false;

  constructor(
    private readonly record: SQSRecord,
    private readonly job: M,
    private readonly processor: JobProcessor<M>,
    private readonly deps: PipelineDeps,
    private readonly log: JobLogger,
  ) {
    this.owner = deps.newOwner();
  }

  async execute(): Promise<boolean> {
    const { ledger, settings, clock } = this.deps;
    const digest = jobDigest(this.job);
    const claim = await ledger.claim({
      job: this.job,
      digest,
      owner: this.owner,
      now: clock.now(),
      leaseMs: settings.leaseSeconds * 1000,
      consumer: settings.consumer,
      ...(settings.consumer === 'stage' && isStageMessage(this.job) ? { pin: this.job.pin } : {}),
      redriveToken: this.redriveToken(),
    });
    switch (claim.kind) {
      case 'busy':
        throw new LeaseHeldError(this.job.jobId, claim.record.leaseUntil ?? this.deps.clock.now());
      case 'conflict':
        // Recorded beside the original (never on it), so `status` and `wait` show the refused request.
        await ledger.recordConflict({ job: this.job, digest, seenBy: settings.consumer, now: clock.now() });
        throw new PermanentJobError(
          'CONFLICT',
          `job id ${this.job.jobId} was already used for a different request (${claim.record.status}, kept): this one is refused`,
        );
      case 'unpinned': {
        const refusal = new PermanentJobError(
          'UNPINNED',
          `${claim.why}: a stage consumer runs only what the sequencer pinned`,
        );
        return refuseMessage(this.record, refusal, this.deps, 'stage message the sequencer never pinned: refused', {
          jobId: this.job.jobId,
        });
      }
      case 'cancelled':
        this.log.info('acknowledged as cancelled', { status: claim.record.status });
        return true;
      case 'staged':
        this.log.info('acknowledged: its stage consumer took it', { status: claim.record.status });
        return this.announceStaged(claim.record);
      case 'running':
        this.log.info('acknowledged: its build is running and reports the job when it ends', {
          buildId: claim.record.progress?.['buildId'],
        });
        return true;
      case 'duplicate':
      case 'finished':
        return this.settleFinished(claim.record);
      case 'forwarded':
        this.log.info('re-forwarding with the recorded pin');
        await this.processor.afterComplete?.(this.job, claim.record);
        return true;
      case 'claimed':
        this.claimed = claim.record;
        break;
    }
    const gate = await this.judgeGate(claim.record);
    const { verdict: ran } = await this.processor.run(this.job, this.context(claim.record));
    // The checks it passed, in its result (a command stage's verdict comes later, from its build).
    const verdict: RunVerdict =
      gate.length > 0 && ran.status === 'SUCCEEDED' ? { ...ran, result: { ...ran.result, gate } } : ran;
    const done = await ledger.complete({
      jobId: this.job.jobId,
      owner: this.owner,
      now: clock.now(),
      verdict,
      workspace: this.placement(),
    });
    this.settled = true;
    if (verdict.status === 'SKIPPED') await this.deps.queueOps.moveToDlq(this.record, verdict.error);
    await this.report(verdict, done.attempt);
    await this.processor.afterComplete?.(this.job, done);
    return true;
  }

  /**
   * A stage's requirements at its pinned commit (requirements.ts): the checks it passed; a failed
   * or missing one throws its permanent reason, one without a verdict yet a RetryAfterError (the
   * wait of a limit), after the ledger records what it waits for.
   */
  private async judgeGate(claimed: JobRecord): Promise<GateCheck[]> {
    if (this.deps.settings.consumer !== 'stage' || !isStageMessage(this.job)) return [];
    try {
      return await judgeRequirements(this.deps.ledger, this.job, claimed);
    } catch (error) {
      // Shown by status while it waits; a record with progress of its own (a build id) keeps it.
      if (error instanceof RetryAfterError && claimed.progress === undefined) {
        await this.deps.ledger
          .recordProgress({
            jobId: this.job.jobId,
            owner: this.owner,
            progress: { waitingFor: error.message },
            now: this.deps.clock.now(),
          })
          .catch((e: unknown) => this.log.warn('recording the wait failed', { error: errorMessage(e) }));
      }
      throw error;
    }
  }

  /** Its place in the workspace, with the turn it had before when it is run again at a new one (a replay, a redrive). */
  private placement(): CompleteInput['workspace'] {
    const previousSeq = this.claimed?.wsSeq;
    if (this.position === undefined || previousSeq === undefined || previousSeq === this.position.seq)
      return this.position;
    return { ...this.position, previousSeq };
  }

  /** The `redrive` attribute's value: the operator's token, or anyone's forgery (the ledger decides). */
  private redriveToken(): string | undefined {
    return this.record.messageAttributes[REDRIVE_ATTRIBUTE]?.stringValue;
  }

  /**
   * A SUCCEEDED / FAILED / SKIPPED record met again on an ordinary redelivery. The earlier worker
   * recorded the verdict but may have died before the DLQ send or the event, so both are done
   * again: the FIFO DLQ dedups the send, and events are at least once (consumers dedup by jobId).
   * Metrics are not counted again. A command stage's verdict came from its build's completion,
   * which reports it (and the reconciler after a crash): the redelivered message reports nothing.
   */
  private async settleFinished(record: JobRecord): Promise<boolean> {
    this.log.info('already finished: acknowledged', { status: record.status });
    if (this.redriveToken() !== undefined)
      this.log.warn('a redrive the ledger did not record: handled as an ordinary redelivery, nothing runs again', {
        status: record.status,
      });
    // An operator dismissed the failure (its DLQ copy removed, its event long published): nothing to report again.
    if (record.dismissed !== undefined) return true;
    if (reportedByItsBuild(record)) return true;
    const verdict = recordedVerdict(record);
    if (verdict === undefined) return true;
    if (verdict.status !== 'SUCCEEDED') await this.deps.queueOps.moveToDlq(this.record, verdict.error);
    await this.publish(verdict, record.attempt);
    return true;
  }

  /**
   * A pinned job met again by the sequencer (an agent re-sent it). When its stage has recorded the
   * verdict, the stage may have died before its event, and the stage's own message may be gone (a
   * restart of the local platform loses what was queued), so the outcome is reported again (events
   * are at least once). Its DLQ copy is the stage's, and its metrics were counted there.
   */
  private async announceStaged(record: JobRecord): Promise<boolean> {
    if (reportedByItsBuild(record)) return true;
    const verdict = recordedVerdict(record);
    if (verdict !== undefined) await this.publish(verdict, record.attempt);
    return true;
  }

  async fail(error: unknown): Promise<boolean> {
    if (error instanceof RetryAfterError && !this.settled && (await this.waitForLimit(error))) return true;
    // A stage message sent again after a wait carries the failed receives of its earlier copies.
    const receives = receiveCount(this.record) + deferralOf(this.record).failedReceives;
    const failure = classifyFailure(error, receives, this.deps.settings.maxReceiveCount);
    if (!(failure instanceof PermanentJobError) || this.settled) return this.retryLater(failure);
    try {
      return await this.failPermanently(failure);
    } catch (reportError) {
      // Not recorded (e.g. LeaseLostError: the new owner settles it), or recorded with a later step
      // left undone: either way a redelivery finishes the work, after the back-off.
      return this.retryLater(reportError);
    }
  }

  /**
   * A limit asked the job to wait (see the header): counted, the lease released, and on a stage
   * queue the message sent again delayed by the wait; true when it was (the original is then
   * acknowledged). On the FIFO queue, or when the send failed, false: the failure path backs off
   * with the limit's time as the visibility.
   */
  private async waitForLimit(limit: RetryAfterError): Promise<boolean> {
    const { settings, clock, metrics } = this.deps;
    metrics.count(LIMIT_METRICS[limit.limit]);
    if (settings.consumer !== 'stage') return false;
    const seconds = limitWaitSeconds(limit, clock.now(), deferralOf(this.record).deferrals, settings.backoff);
    this.log.info('waiting for a limit: sent again for later', { limit: limit.limit, seconds, error: limit.message });
    await this.releaseLease();
    return requeue(this.record, seconds, this.deps, this.log, true);
  }

  private async releaseLease(): Promise<void> {
    if (!this.claimed || this.settled) return;
    // Best effort: without the release the retry waits for the lease to run out.
    await this.deps.ledger
      .release({ jobId: this.job.jobId, owner: this.owner, now: this.deps.clock.now() })
      .catch((e: unknown) => this.log.warn('lease release failed', { error: errorMessage(e) }));
  }

  private async retryLater(error: unknown): Promise<boolean> {
    await this.releaseLease();
    return backOff(this.record, error, this.deps, this.log);
  }

  private async failPermanently(failure: PermanentJobError): Promise<boolean> {
    const { reason, message, repositoryData, gate } = failure;
    const verdict: JobVerdict = {
      status: 'FAILED',
      error: { reason, message, ...(repositoryData ? { repositoryData } : {}), ...(gate ? { gate } : {}) },
    };
    let attempt = 0;
    if (this.claimed) {
      const done = await this.deps.ledger.complete({
        jobId: this.job.jobId,
        owner: this.owner,
        now: this.deps.clock.now(),
        verdict,
        workspace: this.placement(),
      });
      this.settled = true;
      attempt = done.attempt;
    }
    // An error no rule classified: where it came from is what an operator needs to classify it.
    const origin =
      failure.reason === 'UNEXPECTED_ERROR' && failure.cause instanceof Error ? { stack: failure.cause.stack } : {};
    this.log.error('permanent failure', { reason: failure.reason, error: failure.message, ...origin });
    await this.processor.onPermanentFailure?.(this.job, failure, this.claimed !== undefined);
    await this.deps.queueOps.moveToDlq(this.record, verdict.error);
    await this.report(verdict, attempt);
    return true;
  }

  private async report(verdict: JobVerdict, attempt: number): Promise<void> {
    this.deps.metrics.count(EVENT_OF[verdict.status].metric, this.job.type);
    this.log.info(`job ${verdict.status}`);
    await this.publish(verdict, attempt);
  }

  private async publish(verdict: JobVerdict, attempt: number): Promise<void> {
    const { event } = EVENT_OF[verdict.status];
    if (event && isOutcome(verdict)) await this.deps.events.publish(event, eventDetail(this.job, verdict, attempt));
  }

  private context(claimed: JobRecord): JobContext {
    const { ledger, queueOps, clock, settings } = this.deps;
    return {
      record: this.record,
      claimed,
      owner: this.owner,
      logger: this.log,
      heartbeat: async () => {
        const now = clock.now();
        await ledger.heartbeat({
          jobId: this.job.jobId,
          owner: this.owner,
          leaseUntil: now + settings.leaseSeconds * 1000,
          now,
        });
        await queueOps.changeVisibility(this.record, settings.visibilitySeconds).catch((error: unknown) => {
          // SQS refuses a receipt handle once the message went back to the queue: the message is a
          // later delivery's now, whatever the error says, so this one stops and is retried.
          throw new TransientJobError(`extending the message visibility failed: ${errorMessage(error)}`, {
            cause: error,
          });
        });
      },
      placeInWorkspace: (position) => {
        this.position = position;
      },
      recordProgress: (progress) =>
        ledger.recordProgress({ jobId: this.job.jobId, owner: this.owner, progress, now: clock.now() }),
    };
  }
}
