/**
 * The local stand-in for an SQS fair queue: a stage poller serves tenants in turn, so a quiet
 * tenant's job is not stuck behind a noisy tenant's burst. Asserted on the order in which jobs
 * start, on fauxqs, never on timings. The messages are sent as the sequencer sends them (group =
 * tenant, which fauxqs drops; the tenantId attribute, which the poller reads).
 */
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { stringAttributes } from '../../contract/messages';
import { queueTopology } from '../../contract/topology';
import { tenantGroupId } from '../../src/core/envelope';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { pollingOrder, startQueuePoller, type PollerOptions, type QueuePoller } from '../../tools/local/poller';
import { withEmulators } from '../support/emulators';
import { eventually } from '../support/eventually';

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const NOISY = 20;

describe('stage poller: tenants in turn', () => {
  const env = withEmulators();
  let queues = 0;
  const running: QueuePoller[] = [];

  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.stop()));
  });

  /** A standard queue of the test's own (receives a stopped poller abandoned would take messages). */
  async function stageQueue(attributes: Record<string, string> = {}): Promise<{ queueUrl: string; queueArn: string }> {
    const { sqs } = env().clients;
    const { QueueUrl: queueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: `fair-stage-${++queues}`, Attributes: attributes }),
    );
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    urls.set(Attributes!.QueueArn!, queueUrl!);
    return { queueUrl: queueUrl!, queueArn: Attributes!.QueueArn! };
  }

  const urls = new Map<string, string>();
  const queueUrlOf = (arn: string): string => urls.get(arn)!;

  async function sendJob(queueUrl: string, tenantId: string, jobId: string): Promise<void> {
    await env().clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: jobId,
        MessageGroupId: tenantGroupId(tenantId),
        MessageAttributes: stringAttributes({ jobId, tenantId }),
      }),
    );
  }

  /** The noisy tenant's burst, then one job of a quiet tenant. */
  async function burstThenQuiet(queueUrl: string): Promise<void> {
    for (let i = 1; i <= NOISY; i++) await sendJob(queueUrl, 'noisy', `noisy-${i}`);
    await sendJob(queueUrl, 'quiet', 'quiet-1');
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

  function poll(
    queue: { queueUrl: string; queueArn: string },
    handler: (event: SQSEvent) => Promise<void>,
    overrides: Partial<PollerOptions> = {},
  ): QueuePoller {
    const poller = startQueuePoller({
      name: 'run_tests',
      sqs: env().clients.sqs,
      ...queue,
      region: LOCAL_REGION,
      batchSize: 1,
      maxConcurrency: 1,
      timeoutSeconds: 60,
      waitTimeSeconds: 1,
      handler,
      logger: silent,
      ...overrides,
    });
    running.push(poller);
    return poller;
  }

  /**
   * A handler whose first batch waits until `release` is called: the poller's one slot is busy
   * while the burst and the quiet job are on the queue. Records the order jobs start in.
   */
  function heldFirstBatch(): { started: string[]; release: () => void; handler: (event: SQSEvent) => Promise<void> } {
    const started: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    return {
      started,
      release: () => release(),
      handler: async (event) => {
        started.push(...event.Records.map((r) => r.body));
        if (started.length > 1) return;
        // A running job keeps its own message invisible (the pipeline's heartbeat does the same).
        for (const record of event.Records) {
          await env().clients.sqs.send(
            new ChangeMessageVisibilityCommand({
              QueueUrl: queueUrlOf(record.eventSourceARN),
              ReceiptHandle: record.receiptHandle,
              VisibilityTimeout: 60,
            }),
          );
        }
        await held;
      },
    };
  }

  it("starts a quiet tenant's job after at most one more of a noisy tenant's burst, not after the burst", async () => {
    const queue = await stageQueue();
    await burstThenQuiet(queue.queueUrl);
    const jobs = heldFirstBatch();
    poll(queue, jobs.handler, { order: 'tenant' });
    // The first job holds the only slot until the poller has received every other message.
    await eventually(
      () => counts(queue.queueUrl),
      (c) => c.visible === 0,
      { what: 'every message received by the poller' },
    );
    jobs.release();
    await eventually(
      () => jobs.started.length,
      (n) => n === NOISY + 1,
      { what: 'every job started' },
    );

    expect(jobs.started.indexOf('quiet-1')).toBeLessThanOrEqual(2);
    // A tenant's own jobs keep their order.
    expect(jobs.started.filter((j) => j.startsWith('noisy'))).toEqual(
      Array.from({ length: NOISY }, (_, i) => `noisy-${i + 1}`),
    );
  });

  it("in arrival order (the FIFO queue's polling, and fauxqs on its own) the quiet job starts after the whole burst", async () => {
    const queue = await stageQueue();
    await burstThenQuiet(queue.queueUrl);
    const started: string[] = [];
    poll(queue, async (event) => void started.push(...event.Records.map((r) => r.body)), { order: 'arrival' });
    await eventually(
      () => started.length,
      (n) => n === NOISY + 1,
      { what: 'every job started' },
    );

    expect(started.indexOf('quiet-1')).toBe(NOISY);
  });

  it('holds at most its lookahead, keeps what it holds invisible past the visibility timeout, and releases it when it stops', async () => {
    const visibilityTimeoutSeconds = 6;
    const queue = await stageQueue({ VisibilityTimeout: String(visibilityTimeoutSeconds) });
    await burstThenQuiet(queue.queueUrl);
    const jobs = heldFirstBatch();
    // A lookahead the waiting messages fill: no receive is open when it stops (fauxqs would hand
    // released messages to a receive the poller abandoned).
    const poller = poll(queue, jobs.handler, { order: 'tenant', visibilityTimeoutSeconds, lookahead: NOISY });
    await eventually(
      () => counts(queue.queueUrl),
      (c) => c.visible === 0,
      { what: 'every message received by the poller' },
    );
    // Longer than the queue's visibility timeout: without the poller's extensions the waiting ones would be visible again.
    await new Promise((resolve) => setTimeout(resolve, (visibilityTimeoutSeconds + 2) * 1000));
    expect(await counts(queue.queueUrl)).toEqual({ visible: 0, inFlight: NOISY + 1 });

    const stopped = poller.stop();
    jobs.release();
    await stopped;
    expect(jobs.started).toEqual(['noisy-1']);
    // noisy-1 finished (deleted); the ones still waiting are back on the queue for the next poller.
    expect(await counts(queue.queueUrl)).toEqual({ visible: NOISY, inFlight: 0 });
  }, 30_000);

  it('polls every stage queue of the platform by tenant and the FIFO queue by arrival', () => {
    expect(Object.fromEntries(queueTopology().map((spec) => [spec.name, pollingOrder(spec.role)]))).toEqual({
      'agent-jobs': 'arrival',
      'run-tests': 'tenant',
      'run-lint': 'tenant',
      'open-pr': 'tenant',
    });
  });
});
