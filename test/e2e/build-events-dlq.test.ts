/**
 * The build-events DLQ through the CLI: what EventBridge could not deliver to the build-events
 * queue (a build's "Build State Change" event, with its RULE_ARN and ERROR_CODE attributes) is
 * counted by `dlq list`, shown by `dlq peek` with the build it is about and what to do, and sent
 * back by `dlq redrive --queue build-events`. EventBridge is not emulated: the failed delivery is
 * put on the local platform's build-events DLQ (fauxqs) with the attributes EventBridge gives it.
 */
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { createLocalClients } from '../../tools/local/emulators';
import { PLATFORM_FILE } from '../../tools/local/state-dir';
import { localRunEventBody } from '../../tools/local/test-runner';
import { eventually } from '../support/eventually';
import { removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(240_000);

interface PeekedMessage {
  queue: string;
  messageId: string;
  attributes: Record<string, string>;
  buildEvent?: { buildId?: string; jobId?: string; buildStatus?: string };
}

let platform: RunningPlatform;

beforeAll(async () => {
  platform = await startPlatform();
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

/** What EventBridge sends to a rule target's DLQ when it gives up on a delivery: the event, and why, as attributes. */
async function failedDelivery(): Promise<void> {
  const info = JSON.parse(await readFile(path.join(platform.stateDir, PLATFORM_FILE), 'utf8')) as {
    endpoints: Parameters<typeof createLocalClients>[0];
    dlqUrls: Record<string, string>;
  };
  const event = localRunEventBody({
    buildId: 'local:lost-1:1:0123456789abcdef',
    jobId: 'lost-1',
    jobType: 'run_tests',
    sha: 'a'.repeat(40),
    status: { state: 'PASSED', exitCode: 0, logTail: '' },
  });
  const attribute = (value: string) => ({ DataType: 'String', StringValue: value });
  const clients = createLocalClients(info.endpoints);
  try {
    await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: info.dlqUrls['build-events'],
        MessageBody: event,
        MessageAttributes: {
          RULE_ARN: attribute('arn:aws:events:eu-west-1:123456789012:rule/AgentJobs-dev-BuildEventsRule'),
          TARGET_ARN: attribute('arn:aws:sqs:eu-west-1:123456789012:build-events'),
          ERROR_CODE: attribute('SDK_CLIENT_ERROR'),
          ERROR_MESSAGE: attribute('Failed to send the event to the queue'),
        },
      }),
    );
  } finally {
    clients.destroy();
  }
}

test('a failed delivery of a build event is listed, shown with its build and the advice, and redriven to the build-events queue', async () => {
  await failedDelivery();

  const listed = await platform.cli(['dlq', 'list']);
  expect(listed.code).toBe(0);
  expect(listed.stdout).toContain(
    'build-events DLQ: about 1 message(s) (build events, not jobs: "dlq peek --queue build-events" shows them)',
  );
  expect(listed.stderr).toMatch(/build-events DLQ: .*the build reconciler/);

  const peeked = await platform.cliLines<PeekedMessage>(['dlq', 'peek', '--queue', 'build-events']);
  expect(peeked).toEqual([
    expect.objectContaining({
      queue: 'build-events',
      attributes: expect.objectContaining({
        RULE_ARN: expect.stringContaining('BuildEventsRule'),
        ERROR_CODE: 'SDK_CLIENT_ERROR',
      }),
      buildEvent: {
        buildId: 'local:lost-1:1:0123456789abcdef',
        jobId: 'lost-1',
        jobType: 'run_tests',
        buildStatus: 'PASSED',
      },
    }),
  ]);
  const shown = await platform.cli(['dlq', 'peek', '--queue', 'build-events']);
  expect(shown.stdout).toMatch(/build-events\s+\S+\s+lost-1\s+run_tests\s+SDK_CLIENT_ERROR/);
  expect(shown.stderr).toMatch(
    /EventBridge could not deliver.*the build reconciler records the verdict.*"dlq redrive --queue build-events"/,
  );

  const redriven = await platform.cliJson<{ redriven: { queue: string; jobId: string }[] }>([
    'dlq',
    'redrive',
    '--queue',
    'build-events',
  ]);
  expect(redriven.redriven).toEqual([expect.objectContaining({ queue: 'build-events', jobId: 'lost-1' })]);
  // The build-events consumer reads it: a completion of a job the ledger does not know changes nothing, and is not moved back.
  await eventually(
    () => platform.cli(['dlq', 'list', '--queue', 'build-events']),
    (r) => r.stdout.startsWith('build-events DLQ: about 0 message(s)'),
    { what: 'an empty build-events DLQ', timeoutMs: 30_000 },
  );
});
