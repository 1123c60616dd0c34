/**
 * JobRun, the heart of the pipeline (src/core/pipeline.ts), through processRecord: every claim kind
 * and every failure path, over the in-memory ledger (the same rules as the DynamoDB adapter: see
 * test/support/ledger-contract.ts) and recording fakes of the queue, the event bus and metrics.
 * Faults are injected by making one call of a fake (or of a ledger method) fail.
 */
import type { SQSRecord } from 'aws-lambda';
import { DEFERRAL_ATTRIBUTES, REDRIVE_ATTRIBUTE } from '../../contract/messages';
import type { EventType, JobMetricName } from '../../contract/runtime-env';
import { jobDigest, parseEnvelope, parseStageMessage, type JobEnvelope } from '../../src/core/envelope';
import { LeaseLostError, PermanentJobError, RetryAfterError, TransientJobError } from '../../src/core/errors';
import {
  MAX_DELAY_SECONDS,
  QUOTA_WAIT_CAP_SECONDS,
  processRecord,
  type JobContext,
  type JobProcessor,
  type PipelineDeps,
  type RunResult,
} from '../../src/core/pipeline';
import type { Consumer, JobFailure, JobRecord, JobVerdict, Ledger, QueueOps } from '../../src/core/ports';
import { claimOf } from '../support/ledger-contract';
import { MemoryLedger } from '../support/memory-ledger';
import { jobRecord, sqsRecordFactory } from '../support/sqs-records';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const LEASE_SECONDS = 60;
const MAX_RECEIVES = 5;
const PIN = { sha: 'c'.repeat(40), repoUrl: 'https://git.example/acme/app.git', branch: 'agent/ws-1' };

const job: JobEnvelope = {
  jobId: 'job-1',
  workspaceId: 'ws-1',
  tenantId: 'tenant-1',
  type: 'run_tests',
  createdAt: '2026-03-01T11:00:00Z',
  payload: { command: 'npm test' },
};

type Call =
  | { op: 'moveToDlq'; messageId: string; failure: JobFailure }
  | { op: 'changeVisibility'; messageId: string; seconds: number }
  | { op: 'requeue'; messageId: string; delaySeconds: number; attributes: Record<string, string> }
  | { op: 'send'; queueUrl: string; body: string };

/** Records every queue operation; `failNext` makes the next call of an operation throw (before any effect). */
class RecordingQueue implements QueueOps {
  readonly calls: Call[] = [];
  private readonly failures = new Map<Call['op'], Error>();

  failNext(op: Call['op'], error = new Error(`${op}: 500 Internal Server Error`)): void {
    this.failures.set(op, error);
  }

  private attempt(op: Call['op']): void {
    const error = this.failures.get(op);
    this.failures.delete(op);
    if (error) throw error;
  }

  async moveToDlq(record: SQSRecord, failure: JobFailure): Promise<void> {
    this.attempt('moveToDlq');
    this.calls.push({ op: 'moveToDlq', messageId: record.messageId, failure });
  }

  async changeVisibility(record: SQSRecord, seconds: number): Promise<void> {
    this.attempt('changeVisibility');
    this.calls.push({ op: 'changeVisibility', messageId: record.messageId, seconds });
  }

  async requeue(record: SQSRecord, delaySeconds: number, attributes: Record<string, string>): Promise<void> {
    this.attempt('requeue');
    this.calls.push({ op: 'requeue', messageId: record.messageId, delaySeconds, attributes });
  }

  async send(queueUrl: string, body: string): Promise<void> {
    this.attempt('send');
    this.calls.push({ op: 'send', queueUrl, body });
  }

  async sendToDlq(queueUrl: string, message: { body: string }): Promise<void> {
    this.attempt('send');
    this.calls.push({ op: 'send', queueUrl, body: message.body });
  }

  of<K extends Call['op']>(op: K): Extract<Call, { op: K }>[] {
    return this.calls.filter((c): c is Extract<Call, { op: K }> => c.op === op);
  }
}

/** One pipeline over fakes: the clock only moves when a test moves it. */
function pipeline(options: { consumer?: Consumer; ledger?: Ledger } = {}) {
  let now = NOW;
  let owners = 0;
  const ledger = options.ledger ?? new MemoryLedger();
  const queue = new RecordingQueue();
  const events: { type: EventType; detail: Record<string, unknown> }[] = [];
  let failPublish: Error | undefined;
  const metrics: { metric: JobMetricName; jobType?: string }[] = [];
  const warnings: string[] = [];
  const errors: { message: string; attributes: Record<string, unknown> }[] = [];
  const deps: PipelineDeps = {
    ledger,
    queueOps: queue,
    events: {
      publish: async (type, detail) => {
        const error = failPublish;
        failPublish = undefined;
        if (error) throw error;
        events.push({ type, detail });
      },
    },
    metrics: { count: (metric, jobType) => metrics.push({ metric, jobType }) },
    logger: {
      debug() {},
      info() {},
      warn: (message) => warnings.push(message),
      error: (message, ...extra) =>
        errors.push({ message, attributes: Object.assign({}, ...extra) as Record<string, unknown> }),
    },
    clock: { now: () => now },
    newOwner: () => `owner-${++owners}`,
    settings: {
      consumer: options.consumer ?? 'sequencer',
      leaseSeconds: LEASE_SECONDS,
      maxReceiveCount: MAX_RECEIVES,
      visibilitySeconds: 360,
      backoff: { baseSeconds: 10, capSeconds: 900 },
    },
  };
  return {
    deps,
    ledger,
    queue,
    events,
    metrics,
    warnings,
    errors,
    advance: (ms: number) => (now += ms),
    now: () => now,
    failNextPublish: (error = new Error('PutEvents: 500')) => (failPublish = error),
    deliver: (processor: JobProcessor, record: SQSRecord = jobRecord(job)) => processRecord(record, processor, deps),
  };
}

interface ScriptedProcessor extends JobProcessor {
  readonly runs: JobContext[];
  readonly afterCompleted: JobRecord[];
  readonly permanentFailures: { reason: string; held: boolean }[];
  failAfterComplete(error: Error): void;
}

/** A processor whose run is the given script; records what the pipeline asked of it. */
function processor(
  script: (ctx: JobContext) => Promise<RunResult> = async () => ({
    verdict: { status: 'SUCCEEDED', result: { ok: true } },
  }),
): ScriptedProcessor {
  const runs: JobContext[] = [];
  const afterCompleted: JobRecord[] = [];
  const permanentFailures: { reason: string; held: boolean }[] = [];
  let afterCompleteError: Error | undefined;
  return {
    runs,
    afterCompleted,
    permanentFailures,
    failAfterComplete: (error) => (afterCompleteError = error),
    parse: parseEnvelope,
    run: async (_job, ctx) => {
      runs.push(ctx);
      return script(ctx);
    },
    afterComplete: async (_job, record) => {
      const error = afterCompleteError;
      afterCompleteError = undefined;
      if (error) throw error;
      afterCompleted.push(record);
    },
    onPermanentFailure: async (_job, error, held) => {
      permanentFailures.push({ reason: error.reason, held });
    },
  };
}

/** `ledger` with some methods replaced (fault injection); every other call goes to `ledger` itself. */
function withFaults(ledger: Ledger, faults: Partial<Ledger>): Ledger {
  return new Proxy(ledger, {
    get: (target, key, receiver) => (faults as Record<PropertyKey, unknown>)[key] ?? Reflect.get(target, key, receiver),
  });
}

const failWith = (error: Error) => async (): Promise<RunResult> => {
  throw error;
};

/** Puts a verdict in the ledger for `job` as an earlier delivery would have. */
async function recorded(ledger: Ledger, verdict: JobVerdict, envelope: JobEnvelope = job): Promise<JobRecord> {
  const claim = claimOf(envelope, { now: NOW - 1_000 });
  await ledger.claim(claim);
  return ledger.complete({ jobId: envelope.jobId, owner: claim.owner, now: NOW - 1_000, verdict });
}

describe('JobRun: claim kinds', () => {
  it('claimed: runs the job once, records the verdict with its place, then reports it and calls afterComplete', async () => {
    const p = pipeline();
    const proc = processor(async (ctx) => {
      expect(ctx.claimed).toMatchObject({
        status: 'IN_FLIGHT',
        attempt: 1,
        leaseOwner: ctx.owner,
        leaseUntil: NOW + LEASE_SECONDS * 1000,
      });
      ctx.placeInWorkspace({ workspaceId: job.workspaceId, seq: 4 });
      return { verdict: { status: 'SUCCEEDED', result: { ok: true } } };
    });

    expect(await p.deliver(proc)).toBe(true);

    expect(proc.runs).toHaveLength(1);
    const record = await p.ledger.getJob(job.jobId);
    expect(record).toMatchObject({
      status: 'SUCCEEDED',
      result: { ok: true },
      attempt: 1,
      wsSeq: 4,
      digest: jobDigest(job),
    });
    expect((await p.ledger.listWorkspaceJobs(job.workspaceId)).map((j) => j.jobId)).toEqual([job.jobId]);
    expect(p.events).toEqual([
      {
        type: 'AgentJobSucceeded',
        detail: {
          jobId: 'job-1',
          workspaceId: 'ws-1',
          tenantId: 'tenant-1',
          type: 'run_tests',
          status: 'SUCCEEDED',
          attempt: 1,
          result: { ok: true },
        },
      },
    ]);
    expect(p.metrics).toEqual([{ metric: 'JobSucceeded', jobType: 'run_tests' }]);
    expect(proc.afterCompleted).toEqual([record]);
    expect(p.queue.calls).toEqual([]);
  });

  it('duplicate: a redelivery of a SUCCEEDED job runs nothing and reports the stored result again, counting it once', async () => {
    const p = pipeline();
    await recorded(p.ledger, { status: 'SUCCEEDED', result: { exitCode: 0 } });
    const before = await p.ledger.getJob(job.jobId);
    const proc = processor();

    expect(await p.deliver(proc)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toEqual(before);
    expect(p.events).toEqual([
      {
        type: 'AgentJobSucceeded',
        detail: expect.objectContaining({ jobId: 'job-1', status: 'SUCCEEDED', attempt: 1, result: { exitCode: 0 } }),
      },
    ]);
    expect(p.metrics).toEqual([]);
    expect(p.queue.calls).toEqual([]);
  });

  it('conflict: the same jobId for a different request fails permanently without touching the original', async () => {
    const p = pipeline();
    await recorded(p.ledger, { status: 'SUCCEEDED', result: { exitCode: 0 } });
    const before = await p.ledger.getJob(job.jobId);
    const proc = processor();
    const record = jobRecord({ ...job, payload: { command: 'rm -rf /' } } as JobEnvelope);

    expect(await p.deliver(proc, record)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toEqual(before);
    // Recorded beside the original, so `status` and `wait` show it.
    expect(await p.ledger.getConflicts(job.jobId)).toEqual([
      expect.objectContaining({ jobId: 'job-1', seenBy: 'sequencer' }),
    ]);
    expect(proc.permanentFailures).toEqual([{ reason: 'CONFLICT', held: false }]);
    expect(p.queue.of('moveToDlq')).toEqual([
      {
        op: 'moveToDlq',
        messageId: record.messageId,
        failure: { reason: 'CONFLICT', message: expect.stringContaining('job-1') },
      },
    ]);
    expect(p.events).toEqual([
      {
        type: 'AgentJobFailed',
        detail: expect.objectContaining({ jobId: 'job-1', status: 'FAILED', reason: 'CONFLICT', attempt: 0 }),
      },
    ]);
    expect(p.metrics).toEqual([{ metric: 'JobFailed', jobType: 'run_tests' }]);
  });

  it('busy: a live lease of another worker is a transient failure: nothing runs, the holder keeps its lease, the record comes back when the lease ends', async () => {
    const p = pipeline();
    const holder = claimOf(job, { now: NOW, owner: 'holder' });
    await p.ledger.claim(holder);
    p.advance(15_500);
    const proc = processor();
    const record = jobRecord(job, { receiveCount: 2 });

    expect(await p.deliver(proc, record)).toBe(false);

    expect(proc.runs).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'IN_FLIGHT',
      leaseOwner: 'holder',
      leaseUntil: NOW + 60_000,
      attempt: 1,
    });
    // Not the 20 s back-off of a second receive: a holder that died is taken over on the next delivery.
    expect(p.queue.calls).toEqual([{ op: 'changeVisibility', messageId: record.messageId, seconds: 45 }]);
    expect(p.events).toEqual([]);
  });

  it("busy on the last allowed receive: not RETRIES_EXHAUSTED, nothing reported; the job is its holder's to finish", async () => {
    const p = pipeline({ consumer: 'sequencer' });
    await p.ledger.claim(claimOf(job, { now: NOW, owner: 'holder' }));
    const proc = processor();

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: MAX_RECEIVES }))).toBe(false);

    expect(proc.permanentFailures).toEqual([]);
    expect([...p.queue.of('moveToDlq'), ...p.events, ...p.metrics]).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseOwner: 'holder' });
  });

  it('cancelled: a job cancelled before its delivery is acknowledged as a no-op', async () => {
    const p = pipeline();
    await p.ledger.recordQueued({ job, digest: jobDigest(job), now: NOW });
    await p.ledger.cancel(job.jobId, NOW);
    const proc = processor();

    expect(await p.deliver(proc, jobRecord(job, { attributes: { [REDRIVE_ATTRIBUTE]: 'm-1' } }))).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'CANCELLED' });
    expect([...p.queue.calls, ...p.events, ...p.metrics]).toEqual([]);
  });

  it.each([
    ['FAILED', { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: 'FAULT' } }, 'AgentJobFailed'],
    [
      'SKIPPED',
      { status: 'SKIPPED', blockedBy: 'job-0', error: { reason: 'SKIPPED', message: 'blocked by job-0' } },
      'AgentJobSkipped',
    ],
  ] as const)(
    'finished (%s): an ordinary redelivery runs nothing, puts the message on the DLQ and reports the outcome again',
    async (_status, verdict, event) => {
      const p = pipeline();
      await recorded(p.ledger, verdict);
      const proc = processor();
      const record = jobRecord(job);

      expect(await p.deliver(proc, record)).toBe(true);

      expect(proc.runs).toEqual([]);
      expect(p.queue.calls).toEqual([{ op: 'moveToDlq', messageId: record.messageId, failure: verdict.error }]);
      expect(p.events).toEqual([
        {
          type: event,
          detail: expect.objectContaining({ jobId: 'job-1', status: verdict.status, reason: verdict.error.reason }),
        },
      ]);
      expect(p.metrics).toEqual([]);
      expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: verdict.status, attempt: 1 });
    },
  );

  it('finished and dismissed: a redelivery (a re-send, a redrive the dismissal revoked) is acknowledged without a DLQ copy or an event', async () => {
    const p = pipeline();
    await recorded(p.ledger, { status: 'FAILED', error: { reason: 'PATCH_DOES_NOT_APPLY', message: 'stale' } });
    const token = 'redrive-1';
    await p.ledger.authorizeRedrive({ jobId: job.jobId, token, now: NOW });
    await p.ledger.dismiss({
      jobId: job.jobId,
      dismissal: { by: 'alice', reason: 'sent again as job-2', at: new Date(NOW).toISOString() },
      now: NOW,
    });
    const proc = processor();

    expect(await p.deliver(proc, jobRecord(job, { attributes: { [REDRIVE_ATTRIBUTE]: token } }))).toBe(true);

    expect(proc.runs).toEqual([]);
    expect([...p.queue.calls, ...p.events, ...p.metrics]).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      dismissed: { by: 'alice' },
    });
  });

  it('staged: the sequencer acknowledges a pinned job its stage consumer is running, and reports nothing', async () => {
    const p = pipeline({ consumer: 'sequencer' });
    await recorded(p.ledger, { status: 'FORWARDED', pin: PIN });
    await p.ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN, now: NOW }));
    const proc = processor();

    expect(await p.deliver(proc)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(proc.afterCompleted).toEqual([]);
    expect([...p.queue.calls, ...p.events, ...p.metrics]).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', attempt: 1 });
  });

  it.each([
    ['SUCCEEDED', { status: 'SUCCEEDED', result: { verdict: 'passed' } }, 'AgentJobSucceeded'],
    ['FAILED', { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: 'STOPPED' } }, 'AgentJobFailed'],
  ] as const)(
    'staged and finished (%s): a re-sent job its stage settled is acknowledged and its outcome reported again (the stage may have died before its event)',
    async (_status, verdict, event) => {
      const p = pipeline({ consumer: 'sequencer' });
      await recorded(p.ledger, { status: 'FORWARDED', pin: PIN });
      const stage = claimOf(job, { consumer: 'stage', pin: PIN, now: NOW });
      await p.ledger.claim(stage);
      await p.ledger.complete({ jobId: job.jobId, owner: stage.owner, now: NOW, verdict });
      const proc = processor();

      expect(await p.deliver(proc)).toBe(true);

      expect(proc.runs).toEqual([]);
      expect(proc.afterCompleted).toEqual([]);
      // The DLQ copy of a stage failure is the stage's: nothing goes on the FIFO DLQ, no metric is counted again.
      expect([...p.queue.calls, ...p.metrics]).toEqual([]);
      expect(p.events).toEqual([
        { type: event, detail: expect.objectContaining({ jobId: 'job-1', status: verdict.status }) },
      ]);
    },
  );

  it('unpinned: a stage consumer refuses a message the sequencer never pinned: DLQ UNPINNED, no record, no event, nothing run', async () => {
    const p = pipeline({ consumer: 'stage' });
    const proc = processor();
    const forged = sqsRecordFactory(JSON.stringify({ ...job, pin: PIN }));

    expect(await p.deliver({ ...proc, parse: (body) => parseStageMessage(body) }, forged)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(p.queue.calls).toEqual([
      {
        op: 'moveToDlq',
        messageId: forged.messageId,
        failure: { reason: 'UNPINNED', message: expect.stringMatching(/no record of job job-1/) },
      },
    ]);
    expect(p.events).toEqual([]);
    expect(p.metrics).toEqual([{ metric: 'JobFailed' }]);
    expect(await p.ledger.getJob(job.jobId)).toBeUndefined();
  });

  it('unpinned: a stage message whose pin differs from the recorded one leaves the real record untouched', async () => {
    const p = pipeline({ consumer: 'stage' });
    const forwarded = await recorded(p.ledger, { status: 'FORWARDED', pin: PIN });
    const proc = processor();
    const forged = sqsRecordFactory(JSON.stringify({ ...job, pin: { ...PIN, sha: 'd'.repeat(40) } }));

    expect(await p.deliver({ ...proc, parse: (body) => parseStageMessage(body) }, forged)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(p.queue.of('moveToDlq').map((c) => c.failure.reason)).toEqual(['UNPINNED']);
    expect(p.events).toEqual([]);
    expect(await p.ledger.getJob(job.jobId)).toEqual(forwarded);
  });

  it('forwarded: the sequencer re-forwards a FORWARDED job with the pin it recorded, without running it again', async () => {
    const p = pipeline({ consumer: 'sequencer' });
    const forwarded = await recorded(p.ledger, { status: 'FORWARDED', pin: PIN });
    const proc = processor();

    expect(await p.deliver(proc)).toBe(true);

    expect(proc.runs).toEqual([]);
    expect(proc.afterCompleted).toEqual([forwarded]);
    expect([...p.events, ...p.metrics]).toEqual([]);
  });

  it('retry: a record that became claimable between the refused write and the read is claimed and run', async () => {
    let between: (() => Promise<void>) | undefined;
    const ledger: MemoryLedger = new MemoryLedger({ onRefusedClaim: () => between?.() });
    const p = pipeline({ ledger });
    const holder = claimOf(job, { now: NOW, owner: 'holder' });
    await ledger.claim(holder);
    between = async () => {
      between = undefined;
      // The holder failed and released its lease while this delivery's claim was in flight.
      await ledger.release({ jobId: job.jobId, owner: 'holder', now: NOW });
    };
    const proc = processor();

    expect(await p.deliver(proc)).toBe(true);

    expect(proc.runs).toHaveLength(1);
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 2, leaseOwner: 'owner-1' });
  });

  it('retry: a claim that keeps racing with other writers is a transient failure, backed off', async () => {
    const ledger = new MemoryLedger();
    const racing = withFaults(ledger, {
      claim: async () => {
        throw new TransientJobError('claim of job job-1 kept racing with other writers');
      },
    });
    const p = pipeline({ ledger: racing });
    const proc = processor();

    expect(await p.deliver(proc)).toBe(false);

    expect(proc.runs).toEqual([]);
    expect(p.queue.of('changeVisibility')).toHaveLength(1);
    expect(await ledger.getJob(job.jobId)).toBeUndefined();
  });
});

describe('JobRun: failure paths', () => {
  it('permanent before any claim: an unparseable message goes to the DLQ with the reason and is acknowledged', async () => {
    const p = pipeline();
    const record = sqsRecordFactory('{"jobId": "job-1"');

    expect(await p.deliver(processor(), record)).toBe(true);

    expect(p.queue.calls).toEqual([
      {
        op: 'moveToDlq',
        messageId: record.messageId,
        failure: { reason: 'INVALID_JOB', message: expect.stringContaining('not JSON') },
      },
    ]);
    expect(p.metrics).toEqual([{ metric: 'JobFailed', jobType: undefined }]);
    expect(p.events).toEqual([]);
  });

  it('permanent before any claim: when the DLQ send fails, the message backs off and is not acknowledged', async () => {
    const p = pipeline();
    p.queue.failNext('moveToDlq');
    const record = sqsRecordFactory('not json');

    expect(await p.deliver(processor(), record)).toBe(false);

    expect(p.queue.calls).toEqual([{ op: 'changeVisibility', messageId: record.messageId, seconds: 10 }]);
    expect(p.metrics).toEqual([]);
  });

  it('permanent after the claim: FAILED with the reason, the processor told, then the DLQ and the event, in that order', async () => {
    const p = pipeline();
    const order: string[] = [];
    const proc = processor(async (ctx) => {
      ctx.placeInWorkspace({ workspaceId: job.workspaceId, seq: 2 });
      throw new PermanentJobError('PATCH_DOES_NOT_APPLY', 'hunk 1 of a.txt does not apply');
    });
    const told = proc.onPermanentFailure!.bind(proc);
    proc.onPermanentFailure = async (j, e, held) => {
      order.push(`told (ledger ${(await p.ledger.getJob(job.jobId))?.status})`);
      await told(j, e, held);
    };
    const move = p.queue.moveToDlq.bind(p.queue);
    p.queue.moveToDlq = async (r, f) => {
      order.push('dlq');
      await move(r, f);
    };

    expect(await p.deliver(proc)).toBe(true);

    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      wsSeq: 2,
      error: { reason: 'PATCH_DOES_NOT_APPLY', message: 'hunk 1 of a.txt does not apply' },
    });
    expect(proc.permanentFailures).toEqual([{ reason: 'PATCH_DOES_NOT_APPLY', held: true }]);
    expect(order).toEqual(['told (ledger FAILED)', 'dlq']);
    expect(p.events).toEqual([
      { type: 'AgentJobFailed', detail: expect.objectContaining({ reason: 'PATCH_DOES_NOT_APPLY', attempt: 1 }) },
    ]);
    expect(p.metrics).toEqual([{ metric: 'JobFailed', jobType: 'run_tests' }]);
    expect(proc.afterCompleted).toEqual([]);
  });

  it('transient: the lease is released and the record backs off, so the next delivery claims at once', async () => {
    const p = pipeline();
    // As Node reports a connection cut mid-request: transient by its code.
    const proc = processor(failWith(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
    const record = jobRecord(job, { receiveCount: 3 });

    expect(await p.deliver(proc, record)).toBe(false);

    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'IN_FLIGHT',
      leaseOwner: 'owner-1',
      leaseUntil: NOW,
    });
    expect(p.queue.calls).toEqual([{ op: 'changeVisibility', messageId: record.messageId, seconds: 40 }]);
    expect([...p.events, ...p.metrics]).toEqual([]);
    expect(proc.permanentFailures).toEqual([]);

    const retried = processor();
    expect(await p.deliver(retried, jobRecord(job, { receiveCount: 4 }))).toBe(true);
    expect(retried.runs).toHaveLength(1);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
  });

  it('transient on the last allowed receive: FAILED with RETRIES_EXHAUSTED naming the cause, on the DLQ, reported', async () => {
    const p = pipeline();
    const proc = processor(failWith(new TransientJobError('fetch main: HTTP 503 Service Unavailable')));

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: MAX_RECEIVES }))).toBe(true);

    const failed = await p.ledger.getJob(job.jobId);
    expect(failed).toMatchObject({
      status: 'FAILED',
      error: {
        reason: 'RETRIES_EXHAUSTED',
        message: 'gave up after 5 receives: fetch main: HTTP 503 Service Unavailable',
      },
    });
    expect(proc.permanentFailures).toEqual([{ reason: 'RETRIES_EXHAUSTED', held: true }]);
    expect(p.queue.of('moveToDlq')).toEqual([expect.objectContaining({ failure: failed?.error })]);
    expect(p.events).toEqual([
      { type: 'AgentJobFailed', detail: expect.objectContaining({ reason: 'RETRIES_EXHAUSTED' }) },
    ]);
  });

  it('an error no retry can cure (a TypeError) on the first receive: FAILED with UNEXPECTED_ERROR at once, on the DLQ, reported', async () => {
    const p = pipeline();
    const proc = processor(failWith(new TypeError("Cannot read properties of undefined (reading 'trim')")));

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 1 }))).toBe(true);

    const failed = await p.ledger.getJob(job.jobId);
    expect(failed).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      error: {
        reason: 'UNEXPECTED_ERROR',
        message: "TypeError: Cannot read properties of undefined (reading 'trim') (retrying cannot cure it)",
      },
    });
    expect(proc.permanentFailures).toEqual([{ reason: 'UNEXPECTED_ERROR', held: true }]);
    expect(p.queue.of('changeVisibility')).toEqual([]);
    expect(p.queue.of('moveToDlq')).toEqual([expect.objectContaining({ failure: failed?.error })]);
    expect(p.events).toEqual([
      { type: 'AgentJobFailed', detail: expect.objectContaining({ reason: 'UNEXPECTED_ERROR' }) },
    ]);
    // Where an unclassified error came from is logged, so an operator can tell what to classify.
    expect(p.errors).toContainEqual({
      message: 'permanent failure',
      attributes: expect.objectContaining({
        reason: 'UNEXPECTED_ERROR',
        stack: expect.stringContaining('job-run.test.ts'),
      }),
    });
  });

  it('a failing event after SUCCEEDED is recorded: retried without a second verdict; the redelivery reports it', async () => {
    const p = pipeline();
    p.failNextPublish();
    const proc = processor();

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 1 }))).toBe(false);
    const recordedOnce = await p.ledger.getJob(job.jobId);
    expect(recordedOnce).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
    expect(p.events).toEqual([]);
    expect(p.queue.of('changeVisibility')).toHaveLength(1);
    // The lease was not released: there is no lease left to release once the verdict is written.
    expect(p.warnings).not.toContain('lease release failed');

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 2 }))).toBe(true);
    expect(proc.runs).toHaveLength(1);
    expect(await p.ledger.getJob(job.jobId)).toEqual(recordedOnce);
    expect(p.events.map((e) => e.type)).toEqual(['AgentJobSucceeded']);
    expect(p.metrics).toEqual([{ metric: 'JobSucceeded', jobType: 'run_tests' }]);
  });

  it('a failing DLQ send after FAILED is recorded: retried; the redelivery puts it on the DLQ without running the job', async () => {
    const p = pipeline();
    p.queue.failNext('moveToDlq');
    const proc = processor(failWith(new PermanentJobError('UNSAFE_PATCH', 'path ../x leaves the repository')));

    expect(await p.deliver(proc)).toBe(false);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'FAILED', error: { reason: 'UNSAFE_PATCH' } });
    expect(p.queue.of('moveToDlq')).toEqual([]);
    expect(p.events).toEqual([]);

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 2 }))).toBe(true);
    expect(proc.runs).toHaveLength(1);
    expect(p.queue.of('moveToDlq')).toEqual([
      expect.objectContaining({ failure: expect.objectContaining({ reason: 'UNSAFE_PATCH' }) }),
    ]);
    expect(p.events.map((e) => e.type)).toEqual(['AgentJobFailed']);
  });

  it('a failing forward after FORWARDED is recorded: the redelivery re-forwards with the recorded pin', async () => {
    const p = pipeline({ consumer: 'sequencer' });
    const proc = processor(async () => ({ verdict: { status: 'FORWARDED', pin: PIN } }));
    proc.failAfterComplete(new Error('SendMessage: 500'));

    expect(await p.deliver(proc)).toBe(false);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'FORWARDED', pin: PIN });

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 2 }))).toBe(true);
    expect(proc.runs).toHaveLength(1);
    expect(proc.afterCompleted).toEqual([expect.objectContaining({ status: 'FORWARDED', pin: PIN })]);
    expect(p.metrics).toEqual([{ metric: 'JobForwarded', jobType: 'run_tests' }]);
  });

  it('a failing verdict write (ledger 5xx) on a permanent failure is retried: the lease is released, nothing is reported', async () => {
    const ledger = new MemoryLedger();
    let failComplete = true;
    const flaky = withFaults(ledger, {
      complete: async (input) => {
        if (failComplete) {
          failComplete = false;
          throw new Error('UpdateItem: 500 InternalServerError');
        }
        return ledger.complete(input);
      },
    });
    const p = pipeline({ ledger: flaky });
    const proc = processor(failWith(new PermanentJobError('PATCH_DOES_NOT_APPLY', 'no')));

    expect(await p.deliver(proc)).toBe(false);
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseUntil: NOW });
    expect([...p.queue.of('moveToDlq'), ...p.events]).toEqual([]);

    expect(await p.deliver(proc, jobRecord(job, { receiveCount: 2 }))).toBe(true);
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'FAILED', attempt: 2 });
    expect(p.events.map((e) => e.type)).toEqual(['AgentJobFailed']);
  });

  describe('lease lost: another worker took the job over while this one ran', () => {
    /** Runs past the lease; a second worker claims the job meanwhile. */
    function overtaken(p: ReturnType<typeof pipeline>, then: () => Promise<RunResult>) {
      return processor(async () => {
        p.advance(LEASE_SECONDS * 1000);
        expect((await p.ledger.claim(claimOf(job, { now: p.now(), owner: 'successor' }))).kind).toBe('claimed');
        return then();
      });
    }

    it('records nothing, reports nothing and leaves the successor its lease', async () => {
      const p = pipeline();

      expect(
        await p.deliver(
          overtaken(p, async () => ({ verdict: { status: 'SUCCEEDED', result: { by: 'paused worker' } } })),
        ),
      ).toBe(false);

      expect(await p.ledger.getJob(job.jobId)).toMatchObject({
        status: 'IN_FLIGHT',
        leaseOwner: 'successor',
        attempt: 2,
      });
      expect(p.warnings).toContain('lease release failed');
      expect([...p.queue.of('moveToDlq'), ...p.events, ...p.metrics]).toEqual([]);
    });

    it('does not record RETRIES_EXHAUSTED over the successor on the last receive either', async () => {
      const p = pipeline();
      const proc = overtaken(p, failWith(new TransientJobError('push: ECONNRESET')));

      expect(await p.deliver(proc, jobRecord(job, { receiveCount: MAX_RECEIVES }))).toBe(false);

      expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseOwner: 'successor' });
      expect([...p.queue.of('moveToDlq'), ...p.events]).toEqual([]);
    });

    it('throws LeaseLostError from a heartbeat, so long work stops', async () => {
      const p = pipeline();
      let heartbeat: unknown;
      const proc = overtaken(p, async () => {
        throw (heartbeat = await proc.runs[0]!.heartbeat().catch((e: unknown) => e));
      });

      expect(await p.deliver(proc)).toBe(false);
      expect(heartbeat).toBeInstanceOf(LeaseLostError);
    });
  });

  it('heartbeat extends the lease and the visibility together; recorded progress survives into a takeover', async () => {
    const p = pipeline();
    const record = jobRecord(job);
    let died!: () => void;
    const dead = new Promise<void>((resolve) => (died = resolve));
    const proc = processor(async (ctx) => {
      await ctx.recordProgress({ buildId: 'build-7' });
      p.advance(30_000);
      await ctx.heartbeat();
      expect(await p.ledger.getJob(job.jobId)).toMatchObject({
        leaseUntil: p.now() + LEASE_SECONDS * 1000,
        progress: { buildId: 'build-7' },
      });
      // The worker dies here: no verdict, no release.
      died();
      return new Promise<RunResult>(() => undefined);
    });
    void p.deliver(proc, record);
    await dead;

    expect(p.queue.calls).toEqual([{ op: 'changeVisibility', messageId: record.messageId, seconds: 360 }]);
    p.advance(LEASE_SECONDS * 1000);
    const resumed = processor(async (ctx) => ({
      verdict: { status: 'SUCCEEDED', result: { resumed: ctx.claimed.progress?.buildId } },
    }));
    expect(await p.deliver(resumed, jobRecord(job, { receiveCount: 2 }))).toBe(true);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      attempt: 2,
      result: { resumed: 'build-7' },
    });
  });
});

describe('JobRun: limits are waits, not failures', () => {
  /** A stage consumer's delivery of the pinned job, as the sequencer forwarded it (or a copy sent again after a wait). */
  async function staged(options: { receiveCount?: number; attributes?: Record<string, string> } = {}) {
    const p = pipeline({ consumer: 'stage' });
    await recorded(p.ledger, { status: 'FORWARDED', pin: PIN });
    const record = sqsRecordFactory(JSON.stringify({ ...job, pin: PIN }), {
      receiveCount: options.receiveCount ?? 1,
      ...(options.attributes && { attributes: options.attributes }),
    });
    const deliver = (proc: ScriptedProcessor, r: SQSRecord = record) =>
      p.deliver({ ...proc, parse: (body) => parseStageMessage(body) }, r);
    return { ...p, record, deliver };
  }
  const gitHubSaysWait = (seconds: number) =>
    new RetryAfterError(
      'github-rate-limit',
      `GitHub acme/app: secondary rate limit (retry-after ${seconds})`,
      NOW + seconds * 1000,
    );

  it('stage: a 403 with retry-after 30 sends the job again delayed 30 s and acknowledges this delivery: no receive spent, counted once', async () => {
    const p = await staged();
    const proc = processor(failWith(gitHubSaysWait(30)));

    expect(await p.deliver(proc)).toBe(true);

    expect(p.queue.calls).toEqual([
      {
        op: 'requeue',
        messageId: p.record.messageId,
        delaySeconds: 30,
        attributes: {
          [DEFERRAL_ATTRIBUTES.until]: String(NOW + 30_000),
          [DEFERRAL_ATTRIBUTES.failedReceives]: '0',
          [DEFERRAL_ATTRIBUTES.deferrals]: '1',
        },
      },
    ]);
    expect(p.metrics).toEqual([{ metric: 'GitHubRateLimited' }]);
    expect(p.events).toEqual([]);
    // The lease is released: the copy claims at once when it comes.
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseUntil: NOW });
  });

  it('stage: a limit on the last allowed receive is still a wait, never RETRIES_EXHAUSTED; the copy carries the failed receives before it', async () => {
    const p = await staged({ receiveCount: MAX_RECEIVES });

    expect(await p.deliver(processor(failWith(gitHubSaysWait(60))))).toBe(true);

    expect(p.queue.of('moveToDlq')).toEqual([]);
    expect(p.queue.of('requeue')).toEqual([
      expect.objectContaining({
        delaySeconds: 60,
        attributes: expect.objectContaining({ [DEFERRAL_ATTRIBUTES.failedReceives]: String(MAX_RECEIVES - 1) }),
      }),
    ]);
    expect(await p.ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT' });
  });

  it('stage: failed receives of earlier copies count: a transient error that brings them to maxReceiveCount is RETRIES_EXHAUSTED', async () => {
    const p = await staged({
      receiveCount: 2,
      attributes: {
        [DEFERRAL_ATTRIBUTES.failedReceives]: String(MAX_RECEIVES - 2),
        [DEFERRAL_ATTRIBUTES.deferrals]: '3',
      },
    });

    expect(await p.deliver(processor(failWith(new TransientJobError('GitHub: 502 Bad Gateway'))))).toBe(true);

    expect(await p.ledger.getJob(job.jobId)).toMatchObject({
      status: 'FAILED',
      error: {
        reason: 'RETRIES_EXHAUSTED',
        message: `gave up after ${MAX_RECEIVES} receives: GitHub: 502 Bad Gateway`,
      },
    });
  });

  it('stage: a wait longer than SQS can delay travels in the copy; the copy that comes early is sent again without running', async () => {
    const p = await staged();
    expect(await p.deliver(processor(failWith(gitHubSaysWait(3_600))))).toBe(true);
    const [first] = p.queue.of('requeue');
    expect(first).toMatchObject({
      delaySeconds: MAX_DELAY_SECONDS,
      attributes: { [DEFERRAL_ATTRIBUTES.until]: String(NOW + 3_600_000) },
    });

    p.advance(MAX_DELAY_SECONDS * 1000);
    const early = processor();
    const copy = sqsRecordFactory(p.record.body, { attributes: first!.attributes });
    expect(await p.deliver(early, copy)).toBe(true);

    expect(early.runs).toEqual([]);
    // 45 minutes still to wait: another hop of SQS's longest delay, the same deadline.
    expect(p.queue.of('requeue')[1]).toEqual({
      op: 'requeue',
      messageId: copy.messageId,
      delaySeconds: MAX_DELAY_SECONDS,
      attributes: first!.attributes,
    });
    // Counted once, when GitHub said so; the early copy waited without asking anyone.
    expect(p.metrics).toEqual([{ metric: 'GitHubRateLimited' }]);
  });

  it("stage: a build quota names no time: the wait grows with the job's waits so far, capped so a freed build is taken soon", async () => {
    const p = await staged({ attributes: { [DEFERRAL_ATTRIBUTES.deferrals]: '2' } });
    const quota = new RetryAfterError('build-quota', 'CodeBuild: AccountLimitExceededException');

    expect(await p.deliver(processor(failWith(quota)))).toBe(true);
    const p2 = await staged({ attributes: { [DEFERRAL_ATTRIBUTES.deferrals]: '9' } });
    expect(await p2.deliver(processor(failWith(quota)))).toBe(true);

    // base 10 s doubling: the third wait is 40 s; the tenth would be over the cap.
    expect(p.queue.of('requeue')).toEqual([
      expect.objectContaining({
        delaySeconds: 40,
        attributes: expect.objectContaining({ [DEFERRAL_ATTRIBUTES.deferrals]: '3' }),
      }),
    ]);
    expect(p2.queue.of('requeue')).toEqual([expect.objectContaining({ delaySeconds: QUOTA_WAIT_CAP_SECONDS })]);
    expect(p.metrics).toEqual([{ metric: 'BuildsWaitingForQuota' }]);
  });

  it('stage: when the copy cannot be sent, the job waits on its visibility for the time the limit named', async () => {
    const p = await staged();
    p.queue.failNext('requeue');

    expect(await p.deliver(processor(failWith(gitHubSaysWait(30))))).toBe(false);

    expect(p.queue.of('changeVisibility')).toEqual([
      { op: 'changeVisibility', messageId: p.record.messageId, seconds: 30 },
    ]);
  });

  it('sequencer (FIFO): the message keeps its place and waits on its visibility for the time the limit named, not the back-off', async () => {
    const p = pipeline();
    const record = jobRecord(job, { receiveCount: 2 });

    expect(await p.deliver(processor(failWith(gitHubSaysWait(3_600))), record)).toBe(false);

    expect(p.queue.calls).toEqual([{ op: 'changeVisibility', messageId: record.messageId, seconds: 3_600 }]);
    expect(p.metrics).toEqual([{ metric: 'GitHubRateLimited' }]);
  });
});
