import { INLINE_DIFF_LIMIT_BYTES } from '../../contract/runtime-env';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { enqueueAgentJob, enqueueAgentJobs, newJobId, type JobRequest } from '../../src/client';
import { deduplicationId, parseEnvelope } from '../../src/core/envelope';
import { InvalidJobError } from '../../src/core/errors';
import { drain } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';

function applyPatch(workspaceId: string, diff = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n'): JobRequest {
  return {
    jobId: newJobId(),
    workspaceId,
    tenantId: 'tenant-1',
    type: 'apply_patch',
    payload: { repo: { url: 'http://127.0.0.1:9/repo.git', branch: 'agent/work' }, diff, message: 'change a' },
  };
}

describe('producer against the local queue', () => {
  const env = withEmulators();
  const queueUrl = () => env().queueUrls['agent-jobs']!;
  const options = () => ({ sqs: env().clients.sqs, queueUrl: queueUrl(), diffStore: new S3DiffStore(env().clients.s3, env().bucketName) });

  /** Receives and deletes until the queue is empty; FIFO hands out a group's messages in order. */
  const drainQueue = () => drain(env().clients.sqs, queueUrl());

  it('sends a job in its workspace group with its deduplication id and triage attributes', async () => {
    const job = applyPatch('ws-single');
    const result = await enqueueAgentJob(job, options());
    expect(result).toMatchObject({ jobId: job.jobId, messageId: expect.any(String), sequenceNumber: expect.any(String) });
    expect(result.diffRef).toBeUndefined();

    const [message, ...rest] = await drainQueue();
    expect(rest).toEqual([]);
    expect(message?.Attributes).toMatchObject({ MessageGroupId: 'ws#ws-single', MessageDeduplicationId: deduplicationId(job.jobId!, 'apply_patch') });
    expect(message?.MessageAttributes).toEqual({
      jobId: { DataType: 'String', StringValue: job.jobId },
      workspaceId: { DataType: 'String', StringValue: 'ws-single' },
      tenantId: { DataType: 'String', StringValue: 'tenant-1' },
      type: { DataType: 'String', StringValue: 'apply_patch' },
    });
    expect(parseEnvelope(message?.Body)).toMatchObject({ ...job, createdAt: expect.any(String) });
  });

  it('deduplicates a retried send of the same job', async () => {
    const job = applyPatch('ws-retry');
    await enqueueAgentJob(job, options());
    await enqueueAgentJob({ ...job, createdAt: '2030-01-01T00:00:00.000Z' }, options());
    expect(await drainQueue()).toHaveLength(1);
  });

  it('rejects an invalid job before sending, naming every bad field', async () => {
    const job = { ...applyPatch('ws bad'), payload: { repo: { url: 'ftp://x', branch: 'main' }, diff: 'd', message: '' } } as JobRequest;
    const send = enqueueAgentJob(job, options());
    await expect(send).rejects.toThrow(InvalidJobError);
    await expect(send).rejects.toThrow(/workspaceId/);
    const payloadErrors = enqueueAgentJob({ ...applyPatch('ws-bad'), payload: job.payload } as JobRequest, options());
    await expect(payloadErrors).rejects.toThrow(/payload\.repo\.url.*payload\.message/);
    expect(await drainQueue()).toEqual([]);
  });

  it('claim-checks a diff over the inline limit to S3 and sends its reference instead', async () => {
    const line = '+' + 'x'.repeat(99) + '\n';
    const diff = 'diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -0,0 +1,3000 @@\n' + line.repeat(3000);
    expect(Buffer.byteLength(diff)).toBeGreaterThan(INLINE_DIFF_LIMIT_BYTES);

    const result = await enqueueAgentJob(applyPatch('ws-big', diff), options());
    expect(result.diffRef).toMatchObject({ bucket: env().bucketName, bytes: Buffer.byteLength(diff) });

    const [message] = await drainQueue();
    const sent = parseEnvelope(message?.Body);
    if (sent.type !== 'apply_patch') throw new Error('expected apply_patch');
    expect(sent.payload.diff).toBeUndefined();
    expect(sent.payload.diffRef).toEqual(result.diffRef);
    expect(await options().diffStore.get(sent.payload.diffRef!)).toBe(diff);
  });

  it('sends many jobs in batches keeping each workspace in order', async () => {
    const jobs = Array.from({ length: 25 }, (_, i) => applyPatch(`ws-batch-${i % 3}`));
    const outcomes = await enqueueAgentJobs(jobs, options());
    expect(outcomes.map((o) => [o.status, o.jobId])).toEqual(jobs.map((j) => ['SENT', j.jobId]));

    const received = await drainQueue();
    for (const workspace of ['ws-batch-0', 'ws-batch-1', 'ws-batch-2']) {
      const sentOrder = jobs.filter((j) => j.workspaceId === workspace).map((j) => j.jobId);
      const receivedOrder = received.filter((m) => m.Attributes?.MessageGroupId === `ws#${workspace}`).map((m) => m.MessageAttributes?.jobId?.StringValue);
      expect(receivedOrder).toEqual(sentOrder);
    }
  });
});
