import { INLINE_DIFF_LIMIT_BYTES, MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { enqueueAgentJob, enqueueAgentJobs, newJobId, type JobRequest } from '../../src/client';
import { inlineDiffBytes } from '../../src/core/diff-wire';
import { deduplicationId, parseEnvelope } from '../../src/core/envelope';
import { InvalidJobError } from '../../src/core/errors';
import { drain } from '../support/drive-queue';
import { newFileDiffOf } from '../support/git-fixtures';
import { withEmulators } from '../support/emulators';

function applyPatch(
  workspaceId: string,
  diff: string | Uint8Array = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+y\n',
): JobRequest {
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
  const options = () => ({
    sqs: env().clients.sqs,
    queueUrl: queueUrl(),
    diffStore: new S3DiffStore(env().clients.s3, env().bucketName),
  });

  /** Receives and deletes until the queue is empty; FIFO hands out a group's messages in order. */
  const drainQueue = () => drain(env().clients.sqs, queueUrl());

  it('sends a job in its workspace group with its deduplication id and triage attributes', async () => {
    const job = applyPatch('ws-single');
    const result = await enqueueAgentJob(job, options());
    expect(result).toMatchObject({
      jobId: job.jobId,
      messageId: expect.any(String),
      sequenceNumber: expect.any(String),
    });
    expect(result.diffRef).toBeUndefined();

    const [message, ...rest] = await drainQueue();
    expect(rest).toEqual([]);
    expect(message?.Attributes).toMatchObject({
      MessageGroupId: 'ws#ws-single',
      MessageDeduplicationId: deduplicationId(job.jobId!, 'apply_patch'),
    });
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
    const job = {
      ...applyPatch('ws bad'),
      payload: { repo: { url: 'ftp://x', branch: 'main' }, diff: 'd', message: '' },
    } as JobRequest;
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
    expect(Buffer.from(await options().diffStore.get(sent.payload.diffRef!)).toString('utf8')).toBe(diff);
  });

  it('sends a diff with characters outside the BMP (an emoji), which fauxqs refuses raw in a body, as escaped ASCII JSON', async () => {
    const diff = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+ship it 🚀 \ufffe\n';
    await enqueueAgentJob(applyPatch('ws-emoji', diff), options());
    const [message] = await drainQueue();
    expect(message?.Body).toMatch(/^[\x20-\x7e]*$/);
    expect(parseEnvelope(message?.Body)).toMatchObject({ payload: { diff } });
  });

  it('sends a diff that is not UTF-8 (Latin-1 bytes) as diffBase64, and the consumer reads the same bytes', async () => {
    const bytes = Buffer.concat([
      Buffer.from('diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+caf'),
      Buffer.from([0xe9, 0x0a]),
    ]);
    await enqueueAgentJob(applyPatch('ws-latin1', bytes), options());
    const [message] = await drainQueue();
    const sent = parseEnvelope(message?.Body);
    if (sent.type !== 'apply_patch') throw new Error('expected apply_patch');
    expect(sent.payload).toMatchObject({ diffBase64: bytes.toString('base64') });
    expect(sent.payload.diff).toBeUndefined();
    expect(Buffer.from(inlineDiffBytes(sent.payload) ?? []).equals(bytes)).toBe(true);
  });

  it('sends diff bytes that are UTF-8 as readable text', async () => {
    const text = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+café\n';
    await enqueueAgentJob(applyPatch('ws-utf8-bytes', Buffer.from(text)), options());
    expect(parseEnvelope((await drainQueue())[0]?.Body)).toMatchObject({ payload: { diff: text } });
  });

  it('claim-checks a large diff that is not UTF-8 byte for byte', async () => {
    const bytes = Buffer.concat([
      Buffer.from('diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -0,0 +1,3000 @@\n'),
      Buffer.from(`+${'\xe9'.repeat(99)}\n`.repeat(3000), 'latin1'),
    ]);
    const result = await enqueueAgentJob(applyPatch('ws-big-latin1', bytes), options());
    expect(result.diffRef).toMatchObject({ bytes: bytes.length });
    const sent = parseEnvelope((await drainQueue())[0]?.Body);
    if (sent.type !== 'apply_patch' || !sent.payload.diffRef) throw new Error('expected a diffRef');
    expect(sent.payload.diffBase64).toBeUndefined();
    expect(Buffer.from(await options().diffStore.get(sent.payload.diffRef)).equals(bytes)).toBe(true);
  });

  it("claim-checks a diff of exactly the limit, over the emulator's 11 MiB request limit, and the consumer reads it byte for byte", async () => {
    const diff = newFileDiffOf(MAX_DIFF_BYTES);

    const result = await enqueueAgentJob(applyPatch('ws-at-the-limit', diff), options());

    expect(result.diffRef).toMatchObject({ bytes: MAX_DIFF_BYTES });
    const sent = parseEnvelope((await drainQueue())[0]?.Body);
    if (sent.type !== 'apply_patch' || !sent.payload.diffRef) throw new Error('expected a diffRef');
    expect(Buffer.from(await options().diffStore.get(sent.payload.diffRef)).equals(diff)).toBe(true);
  });

  it('refuses a diff one byte over the limit before storing or sending anything', async () => {
    await expect(
      enqueueAgentJob(applyPatch('ws-over-the-limit', newFileDiffOf(MAX_DIFF_BYTES + 1)), options()),
    ).rejects.toThrow(/payload\.diff: 20971521 bytes is over the 20971520-byte limit/);
    expect(await drainQueue()).toEqual([]);
  });

  it('sends many jobs in batches keeping each workspace in order', async () => {
    const jobs = Array.from({ length: 25 }, (_, i) => applyPatch(`ws-batch-${i % 3}`));
    const outcomes = await enqueueAgentJobs(jobs, options());
    expect(outcomes.map((o) => [o.status, o.jobId])).toEqual(jobs.map((j) => ['SENT', j.jobId]));

    const received = await drainQueue();
    for (const workspace of ['ws-batch-0', 'ws-batch-1', 'ws-batch-2']) {
      const sentOrder = jobs.filter((j) => j.workspaceId === workspace).map((j) => j.jobId);
      const receivedOrder = received
        .filter((m) => m.Attributes?.MessageGroupId === `ws#${workspace}`)
        .map((m) => m.MessageAttributes?.jobId?.StringValue);
      expect(receivedOrder).toEqual(sentOrder);
    }
  });
});
