/**
 * The CLI's copies of DLQ messages (redrive, requeue at a DLQ's tail) keep the message group: on the
 * FIFO lane the workspace's, on a stage queue (an SQS fair queue) the tenant's, from the tenantId
 * attribute. fauxqs accepts a group on a standard queue without returning it, so the group is read
 * from the sends themselves (test/support/sqs-sends.ts); fair delivery itself is SQS's and is not
 * exercised here.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { stringAttributes } from '../../contract/messages';
import { peekDlq, redriveMessage, requeueAtTail } from '../../tools/operator/dlq-messages';
import type { QueueEndpoint } from '../../tools/operator/targets';
import { drain } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';
import { recordSends } from '../support/sqs-sends';

describe('copies of DLQ messages keep their group', () => {
  const emulators = withEmulators();

  function runTests(): QueueEndpoint {
    const { queueUrls, dlqUrls } = emulators();
    return {
      name: 'run-tests',
      url: queueUrls['run-tests']!,
      dlqUrl: dlqUrls['run-tests']!,
      fifo: false,
      consumer: 'run_tests',
    };
  }

  afterEach(async () => {
    const queue = runTests();
    await drain(emulators().clients.sqs, queue.url);
    await drain(emulators().clients.sqs, queue.dlqUrl);
  });

  it("a stage job redriven or requeued goes in its tenant's group; a message without a tenant goes without one", async () => {
    const { sqs } = emulators().clients;
    const queue = runTests();
    const attributes = {
      jobId: 'job-1',
      workspaceId: 'ws-1',
      tenantId: 'tenant-a',
      type: 'run_tests',
      reason: 'TEST_RUN_ERROR',
    };
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queue.dlqUrl,
        MessageBody: '{"jobId":"job-1"}',
        MessageAttributes: stringAttributes(attributes),
      }),
    );
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: queue.dlqUrl,
        MessageBody: 'not a job',
        MessageAttributes: stringAttributes({ reason: 'INVALID_JOB' }),
      }),
    );
    const [job, stray] = (await peekDlq(sqs, queue)).sort((a, b) =>
      a.attributes.jobId ? -1 : b.attributes.jobId ? 1 : 0,
    );

    const sends = recordSends(sqs);
    try {
      await redriveMessage(sqs, queue, job!, 'token-1');
      await requeueAtTail(sqs, queue, job!);
      await redriveMessage(sqs, queue, stray!, 'token-2');
    } finally {
      sends.stop();
    }

    expect(sends.sent.map((s) => [s.QueueUrl, s.MessageGroupId, s.MessageDeduplicationId])).toEqual([
      [queue.url, 'tenant-a', undefined],
      [queue.dlqUrl, 'tenant-a', undefined],
      [queue.url, undefined, undefined],
    ]);
  });
});
