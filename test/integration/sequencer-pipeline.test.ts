/**
 * The shared pipeline's long-work helpers on a standard (stage) queue: fauxqs + dynalite, with a
 * minimal job processor standing in for a stage handler. Metrics are recorded in memory.
 */
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ChangeMessageVisibilityCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSEvent } from 'aws-lambda';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { JsonlEventLog } from '../../src/adapters/events';
import { localPipelineDeps } from '../../src/compose/local';
import { jobAttributes, jobDigest, parseStageMessage, type JobEnvelope } from '../../src/core/envelope';
import { LeaseLostError } from '../../src/core/errors';
import { processStandardBatch } from '../../src/core/fifo-batch';
import { createRecordProcessor, type JobContext, type JobProcessor, type PipelineDeps } from '../../src/core/pipeline';
import { deliver, drain, queueArn, receive } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';

const LEASE_SECONDS = 60;

const PIN = { sha: 'e'.repeat(40), repoUrl: 'http://127.0.0.1:1/hb.git', branch: 'agent/ws-hb' };
describe('pipeline heartbeat on a stage queue', () => {
  const emulators = withEmulators();
  const sqs = () => emulators().clients.sqs;
  const stageUrl = () => emulators().queueUrls['run-tests'] as string;
  let clockOffset = 0;
  let ledger: DynamoDbLedger;

  beforeAll(() => {
    ledger = new DynamoDbLedger({
      client: emulators().clients.dynamodb,
      tableName: emulators().tableName,
      retentionDays: 30,
    });
  });

  afterEach(async () => {
    clockOffset = 0;
    await drain(sqs(), stageUrl());
  });

  function deps(): PipelineDeps {
    return {
      ...localPipelineDeps('run_tests', {
        resources: emulators(),
        events: new JsonlEventLog(join(tmpdir(), `pipeline-it-${randomUUID()}.jsonl`)),
        logger: new Logger({ serviceName: 'pipeline-it', logLevel: 'SILENT' }),
        clock: { now: () => Date.now() + clockOffset },
        leaseSeconds: LEASE_SECONDS,
        backoff: { baseSeconds: 0, capSeconds: 0 },
      }),
      ledger,
    };
  }

  function handlerFor(run: (ctx: JobContext) => Promise<void>) {
    const processor: JobProcessor = {
      parse: (body) => parseStageMessage(body),
      run: async (_job, ctx) => {
        await run(ctx);
        return { verdict: { status: 'SUCCEEDED', result: { ok: true } } };
      },
    };
    const process = createRecordProcessor(processor, deps());
    return (event: SQSEvent) => processStandardBatch(event.Records, process);
  }

  /** A run_tests job pinned as the sequencer pins it (FORWARDED with its pin), on the stage queue. */
  async function sendJob(): Promise<JobEnvelope> {
    const job: JobEnvelope = {
      jobId: `job-${randomUUID()}`,
      workspaceId: 'ws-hb',
      tenantId: 't',
      type: 'run_tests',
      createdAt: '2026-01-01T00:00:00Z',
      payload: {},
    };
    const owner = `sequencer-${randomUUID()}`;
    await ledger.claim({ job, digest: jobDigest(job), owner, now: Date.now(), leaseMs: 60_000, consumer: 'sequencer' });
    await ledger.complete({ jobId: job.jobId, owner, now: Date.now(), verdict: { status: 'FORWARDED', pin: PIN } });
    await sqs().send(
      new SendMessageCommand({
        QueueUrl: stageUrl(),
        MessageBody: JSON.stringify({ ...job, pin: PIN }),
        MessageAttributes: Object.fromEntries(
          Object.entries(jobAttributes(job)).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
        ),
      }),
    );
    return job;
  }

  it('extends the lease with a heartbeat while the message is in flight', async () => {
    const job = await sendJob();
    const arn = await queueArn(sqs(), stageUrl());
    let leases: (number | undefined)[] = [];

    const response = await deliver(
      sqs(),
      stageUrl(),
      arn,
      await receive(sqs(), stageUrl()),
      handlerFor(async (ctx) => {
        const before = ctx.claimed.leaseUntil;
        clockOffset = 30_000;
        await ctx.heartbeat();
        leases = [before, (await ledger.getJob(job.jobId))?.leaseUntil];
      }),
    );

    expect(response).toEqual({ batchItemFailures: [] });
    const [before, after] = leases as [number, number];
    expect(after - before).toBeGreaterThanOrEqual(30_000);
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { ok: true } });
  });

  it('extends the message visibility with the same heartbeat: it fails once SQS gave the message up', async () => {
    const job = await sendJob();
    const arn = await queueArn(sqs(), stageUrl());
    let heartbeatError: unknown;

    const response = await deliver(
      sqs(),
      stageUrl(),
      arn,
      await receive(sqs(), stageUrl()),
      handlerFor(async (ctx) => {
        // The visibility timeout ran out: the message is no longer this worker's.
        await sqs().send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: stageUrl(),
            ReceiptHandle: ctx.record.receiptHandle,
            VisibilityTimeout: 0,
          }),
        );
        heartbeatError = await ctx.heartbeat().catch((e: unknown) => e);
        if (heartbeatError) throw heartbeatError;
      }),
    );

    expect(heartbeatError).toMatchObject({ message: expect.stringMatching(/visibility/i) });
    expect(response.batchItemFailures).toHaveLength(1);
    // The failed worker gave its lease back, so the redelivery can claim at once.
    expect(
      (
        await ledger.claim({
          job,
          digest: (await ledger.getJob(job.jobId))?.digest ?? '',
          owner: 'next',
          now: Date.now(),
          leaseMs: 60_000,
          consumer: 'stage',
          pin: PIN,
        })
      ).kind,
    ).toBe('claimed');
  });

  it('stops a worker whose lease was taken over: its heartbeat fails and it records nothing', async () => {
    const job = await sendJob();
    const arn = await queueArn(sqs(), stageUrl());
    const batch = await receive(sqs(), stageUrl());
    let heartbeatError: unknown;

    const response = await deliver(
      sqs(),
      stageUrl(),
      arn,
      batch,
      handlerFor(async (ctx) => {
        // Another worker takes the job over after the lease ran out.
        clockOffset = LEASE_SECONDS * 1000;
        const { pin, ...envelope } = parseStageMessage(ctx.record.body);
        await ledger.claim({
          job: envelope,
          digest: ctx.claimed.digest,
          owner: 'other',
          now: Date.now() + clockOffset,
          leaseMs: 60_000,
          consumer: 'stage',
          pin,
        });
        heartbeatError = await ctx.heartbeat().catch((e: unknown) => e);
        if (heartbeatError) throw heartbeatError;
      }),
    );

    expect(heartbeatError).toBeInstanceOf(LeaseLostError);
    expect(response.batchItemFailures).toHaveLength(1);
    // Started by this worker (1), then by the other (2); the sequencer's pinning is not an attempt.
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseOwner: 'other', attempt: 2 });
  });
});
