import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { recordsToDelete, startQueuePoller, type LocalHandler, type PollerOptions } from '../../tools/local/poller';
import { withEmulators } from '../support/emulators';
import { eventually } from '../support/eventually';

const silent = { debug() {}, info() {}, warn() {}, error() {} };

describe('queue poller (local event source mapping)', () => {
  const env = withEmulators();

  async function queue(name: string) {
    const queueUrl = env().queueUrls[name]!;
    const { Attributes } = await env().clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    return { queueUrl, queueArn: Attributes!.QueueArn! };
  }

  async function counts(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
    const { Attributes = {} } = await env().clients.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return {
      visible: Number(Attributes.ApproximateNumberOfMessages),
      inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible),
    };
  }

  async function poller(name: string, handler: LocalHandler, overrides: Partial<PollerOptions> = {}) {
    const { queueUrl, queueArn } = await queue(name);
    return startQueuePoller({
      name,
      sqs: env().clients.sqs,
      queueUrl,
      queueArn,
      region: LOCAL_REGION,
      batchSize: 10,
      maxConcurrency: 2,
      timeoutSeconds: 60,
      handler,
      logger: silent,
      ...overrides,
    });
  }

  it('delivers Lambda-shaped records, deletes the successes and leaves the failures to their visibility', async () => {
    const { queueUrl, queueArn } = await queue('open-pr');
    for (const body of ['ok', 'retry-me']) {
      await env().clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: body,
          MessageAttributes: { jobId: { DataType: 'String', StringValue: body } },
        }),
      );
    }
    const seen: SQSRecord[] = [];
    const running = await poller('open-pr', async (event: SQSEvent): Promise<SQSBatchResponse> => {
      seen.push(...event.Records);
      const failures = event.Records.filter(
        (r) => r.body === 'retry-me' && r.attributes.ApproximateReceiveCount === '1',
      );
      // What the pipeline does for a transient failure: report it and set its back-off (here: none).
      for (const record of failures) {
        await env().clients.sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: queueUrl,
            ReceiptHandle: record.receiptHandle,
            VisibilityTimeout: 0,
          }),
        );
      }
      return { batchItemFailures: failures.map((r) => ({ itemIdentifier: r.messageId })) };
    });
    await eventually(
      () => seen.map((r) => r.body),
      (bodies) => bodies.filter((b) => b === 'retry-me').length === 2 && bodies.includes('ok'),
      { what: 'ok once and retry-me twice' },
    );
    await running.stop();

    expect(seen.filter((r) => r.body === 'ok')).toHaveLength(1);
    expect(seen.find((r) => r.body === 'ok')).toMatchObject({
      eventSource: 'aws:sqs',
      eventSourceARN: queueArn,
      awsRegion: LOCAL_REGION,
      attributes: { ApproximateReceiveCount: '1', SentTimestamp: expect.stringMatching(/^\d+$/) },
      messageAttributes: {
        jobId: { dataType: 'String', stringValue: 'ok', stringListValues: [], binaryListValues: [] },
      },
    });
    expect(seen.filter((r) => r.body === 'retry-me').map((r) => r.attributes.ApproximateReceiveCount)).toEqual([
      '1',
      '2',
    ]);
    expect(await counts(queueUrl)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('leaves the whole batch when the handler throws', async () => {
    const { queueUrl } = await queue('run-tests');
    await env().clients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'boom' }));
    let thrown!: () => void;
    const threw = new Promise<void>((r) => (thrown = r));
    const running = await poller('run-tests', async () => {
      thrown();
      throw new Error('handler crashed');
    });
    await threw;
    await running.stop();
    expect(await counts(queueUrl)).toEqual({ visible: 0, inFlight: 1 });
  });

  it('never has more than maxConcurrency batches in flight', async () => {
    const { queueUrl } = await queue('agent-jobs');
    const groups = Array.from({ length: 12 }, (_, i) => `ws#concurrency-${i}`);
    for (const group of groups) {
      await env().clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: group,
          MessageGroupId: group,
          MessageDeduplicationId: group,
        }),
      );
    }
    let inFlight = 0;
    let maxInFlight = 0;
    // The first batches wait until three run at once, so the cap is reached, not just respected.
    let openGate!: () => void;
    const gate = new Promise<void>((r) => (openGate = r));
    const handled: string[] = [];
    const running = await poller(
      'agent-jobs',
      async (event) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (inFlight === 3) openGate();
        await gate;
        handled.push(...event.Records.map((r) => r.body));
        inFlight--;
      },
      { batchSize: 1, maxConcurrency: 3 },
    );
    await eventually(
      () => handled.length,
      (n) => n === groups.length,
      { what: `all ${groups.length} groups handled` },
    );
    await running.stop();
    expect(maxInFlight).toBe(3);
    expect(handled.sort()).toEqual([...groups].sort());
  });

  it('keeps one receive open, whatever its concurrency: an idle slot does not hold a long poll of its own', async () => {
    // A queue of its own: receives the earlier tests' pollers abandoned still wait in fauxqs and
    // would take the first message sent to their queue.
    const { QueueUrl: queueUrl } = await env().clients.sqs.send(
      new CreateQueueCommand({ QueueName: 'one-receive.fifo', Attributes: { FifoQueue: 'true' } }),
    );
    if (!queueUrl) throw new Error('no queue url');
    const { Attributes } = await env().clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    // Receives waiting on this queue at once, seen by SDK middleware on the poller's own client.
    let open = 0;
    let mostOpen = 0;
    const sqs = new SQSClient({
      endpoint: env().endpoints.sqs,
      region: LOCAL_REGION,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'ReceiveMessageCommand') return next(args);
        mostOpen = Math.max(mostOpen, ++open);
        try {
          return await next(args);
        } finally {
          open--;
        }
      },
      { step: 'initialize', name: 'openReceives' },
    );
    const handled: string[] = [];
    const running = await poller(
      'agent-jobs',
      async (event) => void handled.push(...event.Records.map((r) => r.body)),
      {
        sqs,
        queueUrl,
        queueArn: Attributes!.QueueArn!,
        maxConcurrency: 5,
      },
    );
    for (const group of ['ws#one-receive-a', 'ws#one-receive-b', 'ws#one-receive-c']) {
      await env().clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: group,
          MessageGroupId: group,
          MessageDeduplicationId: group,
        }),
      );
      await eventually(
        () => handled,
        (bodies) => bodies.includes(group),
        { what: `${group} handled` },
      );
    }
    await running.stop();
    sqs.destroy();
    expect(mostOpen).toBe(1);
  });
});

describe('recordsToDelete', () => {
  const record = (messageId: string) => ({ messageId }) as SQSRecord;
  const batch = [record('a'), record('b'), record('c')];

  it('deletes every record not reported as failed', () => {
    expect(recordsToDelete(batch, undefined)).toEqual(batch);
    expect(recordsToDelete(batch, { batchItemFailures: [{ itemIdentifier: 'b' }] })?.map((r) => r.messageId)).toEqual([
      'a',
      'c',
    ]);
  });

  it('fails the whole batch on an empty or unknown item identifier, as Lambda does', () => {
    expect(recordsToDelete(batch, { batchItemFailures: [{ itemIdentifier: '' }] })).toBeUndefined();
    expect(recordsToDelete(batch, { batchItemFailures: [{ itemIdentifier: 'zzz' }] })).toBeUndefined();
  });
});
