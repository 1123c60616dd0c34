/**
 * The run_tests handler on the shared pipeline against dynalite + fauxqs, with CodeBuild mocked
 * (aws-sdk-client-mock: CodeBuild has no local stand-in). Messages are received and deleted like the
 * event source mapping does; back-off is zero so a redelivery is the next receive.
 */
import { randomUUID } from 'node:crypto';
import { BatchGetBuildsCommand, CodeBuildClient, StartBuildCommand, type Build } from '@aws-sdk/client-codebuild';
import { DeleteMessageCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { CodeBuildTestRunner } from '../../lambda/adapters/codebuild-test-runner';
import { DynamoDbLedger } from '../../lambda/adapters/dynamodb-ledger';
import { SqsQueueOps } from '../../lambda/adapters/sqs-queue-ops';
import { jobAttributes, jobDigest, type StageMessage } from '../../lambda/core/envelope';
import type { JobLogger, PipelineDeps } from '../../lambda/core/pipeline';
import type { EventPublisher } from '../../lambda/core/ports';
import { createRunTestsHandler } from '../../lambda/handlers/run-tests';
import { withEmulators } from '../support/emulators';

const QUEUE = 'run-tests';
const sha = 'b'.repeat(40);
const codebuild = mockClient(CodeBuildClient);

const quiet: JobLogger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe('run_tests handler (pipeline + dynalite + fauxqs)', () => {
  const emulators = withEmulators();
  let now: number;
  let events: { type: string; detail: Record<string, unknown> }[];
  let deps: PipelineDeps;
  let ledger: DynamoDbLedger;

  beforeEach(() => {
    const { clients, tableName, dlqUrls } = emulators();
    now = Date.parse('2026-11-29T12:00:00Z');
    events = [];
    const publisher: EventPublisher = { publish: async (type, detail) => void events.push({ type, detail }) };
    ledger = new DynamoDbLedger({ client: clients.dynamodb, tableName, retentionDays: 30 });
    deps = {
      ledger,
      queueOps: new SqsQueueOps({ client: clients.sqs, dlqUrl: dlqUrls[QUEUE]! }),
      events: publisher,
      metrics: { count: () => undefined },
      logger: quiet,
      clock: { now: () => now },
      newOwner: randomUUID,
      settings: { consumer: 'stage', leaseSeconds: 300, maxReceiveCount: 5, visibilitySeconds: 600, backoff: { baseSeconds: 0, capSeconds: 0 } },
    };
  });
  afterEach(() => codebuild.reset());

  function handler(remainingMs = 900_000) {
    const run = createRunTestsHandler({
      ...deps,
      runner: new CodeBuildTestRunner(new CodeBuildClient({ region: 'us-east-1' }), 'tests'),
      wait: { pollIntervalMs: 20_000, reserveMs: 30_000 },
      sleep: async (ms) => {
        now += ms;
      },
    });
    return (records: SQSRecord[]) => run({ Records: records }, { getRemainingTimeInMillis: () => remainingMs });
  }

  function job(jobId = `job-${randomUUID().slice(0, 8)}`): StageMessage<'run_tests'> {
    return {
      jobId,
      workspaceId: 'ws-1',
      tenantId: 't-1',
      type: 'run_tests',
      createdAt: '2026-11-29T11:00:00.000Z',
      payload: { command: 'npm test' },
      pin: { sha, repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-1' },
    };
  }

  /** What the sequencer leaves behind: the job FORWARDED with its pin, the message on the stage queue. */
  async function forward(message: StageMessage<'run_tests'>): Promise<void> {
    const { pin, ...envelope } = message;
    const owner = randomUUID();
    // (consumer 'stage': with 'sequencer' dynalite rejects the claim's condition, see the report)
    const claim = { job: envelope, digest: jobDigest(envelope), owner, now, leaseMs: 60_000, consumer: 'stage' as const, redrive: false };
    await ledger.claim(claim);
    await ledger.complete({ jobId: message.jobId, owner, now, verdict: { status: 'FORWARDED', pin } });
    const attributes = Object.entries(jobAttributes(message)).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]);
    await emulators().clients.sqs.send(
      new SendMessageCommand({ QueueUrl: emulators().queueUrls[QUEUE], MessageBody: JSON.stringify(message), MessageAttributes: Object.fromEntries(attributes) }),
    );
  }

  /** One receive of the stage queue, as the event source mapping does it; acknowledged records are deleted. */
  async function deliver(invoke: (records: SQSRecord[]) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>) {
    const { clients, queueUrls } = emulators();
    const queueUrl = queueUrls[QUEUE]!;
    const out = await clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] }),
    );
    const message = out.Messages?.[0];
    if (!message) throw new Error('no message to deliver');
    const record = toRecord(message, await arnOf(queueUrl));
    const response = await invoke([record]);
    const failed = response.batchItemFailures.some((f) => f.itemIdentifier === record.messageId);
    if (!failed) await clients.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
    return { failed, receiveCount: Number(record.attributes.ApproximateReceiveCount) };
  }

  async function arnOf(queueUrl: string): Promise<string> {
    const out = await emulators().clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }));
    return out.Attributes!.QueueArn!;
  }

  async function dlqMessages(): Promise<Message[]> {
    const out = await emulators().clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: emulators().dlqUrls[QUEUE], MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }),
    );
    return out.Messages ?? [];
  }

  const build = (status: Build['buildStatus'], extra: Partial<Build> = {}): Build => ({ id: 'tests:1', buildStatus: status, ...extra });
  const failedBuild = build('FAILED', {
    phases: [{ phaseType: 'BUILD', phaseStatus: 'FAILED', contexts: [{ statusCode: 'COMMAND_EXECUTION_ERROR', message: 'Error while executing command: npm test. Reason: exit status 1' }] }],
  });

  it('starts one build, waits with heartbeats, and records a passed verdict with the build id', async () => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolvesOnce({ builds: [build('IN_PROGRESS')] }).resolves({ builds: [build('SUCCEEDED')] });

    const delivery = await deliver(handler());

    expect(delivery.failed).toBe(false);
    const record = await ledger.getJob(message.jobId);
    expect(record).toMatchObject({ status: 'SUCCEEDED', progress: { buildId: 'tests:1' }, result: { verdict: 'passed', exitCode: 0, sha, buildId: 'tests:1' } });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(2);
    expect(events).toEqual([{ type: 'AgentJobSucceeded', detail: expect.objectContaining({ jobId: message.jobId, result: expect.objectContaining({ verdict: 'passed' }) }) }]);
  });

  it('records failing tests as a successful job with verdict failed', async () => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [failedBuild] });

    await deliver(handler());

    expect(await ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'failed', exitCode: 1, logTail: expect.stringContaining('exit status 1') } });
    expect(events.map((e) => e.type)).toEqual(['AgentJobSucceeded']);
  });

  it('hands a build that outlives the invocation to the next delivery, which resumes it without a second build', async () => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolvesOnce({ builds: [build('IN_PROGRESS')] }).resolves({ builds: [build('SUCCEEDED')] });

    const first = await deliver(handler(40_000));

    expect(first.failed).toBe(true);
    expect(await ledger.getJob(message.jobId)).toMatchObject({ status: 'IN_FLIGHT', progress: { buildId: 'tests:1' } });

    const second = await deliver(handler());

    expect(second).toEqual({ failed: false, receiveCount: 2 });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    // Three claims: the sequencer's (in forward) and the two deliveries.
    expect(await ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 3, result: { verdict: 'passed', buildId: 'tests:1' } });
  });

  it('resumes the recorded build after a worker died mid-wait (lease expired), without a second build', async () => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    // The first worker records the build, then loses CodeBuild (its last words are a transient error).
    codebuild.on(BatchGetBuildsCommand).rejectsOnce(new Error('socket hang up')).resolves({ builds: [build('SUCCEEDED')] });

    expect((await deliver(handler())).failed).toBe(true);
    // Still leased by the dead worker: the redelivery must not run it concurrently.
    expect((await deliver(handler())).failed).toBe(true);
    now += 301_000;
    expect((await deliver(handler())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(await ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { buildId: 'tests:1' } });
  });

  it('acknowledges a redelivery of a finished job without touching CodeBuild', async () => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build('SUCCEEDED')] });
    await deliver(handler());
    codebuild.resetHistory();
    // The same message again, as SQS's at-least-once delivery may do.
    await emulators().clients.sqs.send(new SendMessageCommand({ QueueUrl: emulators().queueUrls[QUEUE], MessageBody: JSON.stringify(message) }));

    expect((await deliver(handler())).failed).toBe(false);
    expect(codebuild.calls()).toHaveLength(0);
  });

  it.each(['FAULT', 'TIMED_OUT', 'STOPPED'] as const)('fails the job permanently when the build ends %s: ledger FAILED, DLQ with the reason, event', async (status) => {
    const message = job();
    await forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build(status)] });

    expect((await deliver(handler())).failed).toBe(false);

    expect(await ledger.getJob(message.jobId)).toMatchObject({ status: 'FAILED', error: { reason: 'REJECTED_BY_TARGET', message: expect.stringContaining(`test run ${status}`) } });
    const [dead] = (await dlqMessages()).filter((m) => m.MessageAttributes?.['jobId']?.StringValue === message.jobId);
    expect(dead?.MessageAttributes?.['reason']?.StringValue).toBe('REJECTED_BY_TARGET');
    expect(events).toEqual([{ type: 'AgentJobFailed', detail: expect.objectContaining({ jobId: message.jobId, reason: 'REJECTED_BY_TARGET' }) }]);
  });

  it('sends a message for another job type to the DLQ as invalid', async () => {
    const wrong = { ...job(), type: 'open_pr', payload: { baseBranch: 'main', title: 't' } };
    await emulators().clients.sqs.send(new SendMessageCommand({ QueueUrl: emulators().queueUrls[QUEUE], MessageBody: JSON.stringify(wrong) }));

    expect((await deliver(handler())).failed).toBe(false);

    expect(codebuild.calls()).toHaveLength(0);
    const dead = (await dlqMessages()).find((m) => m.MessageAttributes?.['reason']?.StringValue === 'INVALID_JOB');
    expect(dead?.MessageAttributes?.['errorMessage']?.StringValue).toMatch(/run-tests queue received a open_pr job/);
  });
});

function toRecord(message: Message, arn: string): SQSRecord {
  const attrs = message.Attributes ?? {};
  return {
    messageId: message.MessageId!,
    receiptHandle: message.ReceiptHandle!,
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attrs.ApproximateReceiveCount ?? '1',
      SentTimestamp: attrs.SentTimestamp ?? '0',
      SenderId: attrs.SenderId ?? 'local',
      ApproximateFirstReceiveTimestamp: attrs.ApproximateFirstReceiveTimestamp ?? '0',
    },
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([name, a]) => [name, { dataType: a.DataType ?? 'String', stringValue: a.StringValue, stringListValues: [], binaryListValues: [] }]),
    ),
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: arn,
    awsRegion: 'us-east-1',
  };
}
