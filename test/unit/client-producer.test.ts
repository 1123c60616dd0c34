// The SQS client is mocked only to inject batch outcomes AWS can return but the emulator never
// does (refused entries, unreported entries); normal sending is tested against fauxqs in
// test/integration/client-producer.test.ts.
import { SendMessageBatchCommand, SQSClient, type SendMessageBatchRequestEntry } from '@aws-sdk/client-sqs';
import { mockClient } from 'aws-sdk-client-mock';
import { INLINE_DIFF_LIMIT_BYTES, MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { enqueueAgentJob, enqueueAgentJobs, EnqueueError, type JobRequest } from '../../src/client';
import { ConfigurationError, InvalidJobError } from '../../src/core/errors';

const sqsMock = mockClient(SQSClient);
const options = {
  sqs: new SQSClient({ region: 'us-east-1' }),
  queueUrl: 'https://sqs.us-east-1.amazonaws.com/111122223333/agent-jobs.fifo',
};

function job(jobId: string, workspaceId: string, diff = 'diff --git a/a b/a\n'): JobRequest {
  return {
    jobId,
    workspaceId,
    tenantId: 't',
    type: 'apply_patch',
    payload: { repo: { url: 'https://git.example.com/r.git', branch: 'main' }, diff, message: 'm' },
  };
}

/** A diff the producer accepts (it parses every diff), of exactly `bytes` bytes: one long added line. */
function diffOfBytes(bytes: number): string {
  const head = 'diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+';
  return `${head}${'d'.repeat(bytes - head.length - 1)}\n`;
}

/** A SendMessageBatch answer that accepts every entry except the job ids listed. */
function accepting(...refused: string[]) {
  return ({ Entries = [] }: { Entries?: SendMessageBatchRequestEntry[] }) => {
    const jobIdOf = (e: SendMessageBatchRequestEntry) => e.MessageAttributes?.jobId?.StringValue ?? '';
    return {
      Successful: Entries.filter((e) => !refused.includes(jobIdOf(e))).map((e) => ({
        Id: e.Id,
        MessageId: `m-${jobIdOf(e)}`,
        MD5OfMessageBody: '',
      })),
      Failed: Entries.filter((e) => refused.includes(jobIdOf(e))).map((e) => ({
        Id: e.Id,
        Code: 'InternalError',
        SenderFault: false,
      })),
    };
  };
}

function acceptAllBut(...refused: string[]) {
  sqsMock.on(SendMessageBatchCommand).callsFake(accepting(...refused));
}

function sentBatches(): string[][] {
  return sqsMock
    .commandCalls(SendMessageBatchCommand)
    .map((call) => (call.args[0].input.Entries ?? []).map((e) => e.MessageAttributes?.jobId?.StringValue ?? ''));
}

afterEach(() => sqsMock.reset());

describe('enqueueAgentJobs', () => {
  it('holds back the later jobs of a workspace whose job was refused, and sends the others', async () => {
    acceptAllBut('a1');
    const outcomes = await enqueueAgentJobs([job('a1', 'A'), job('b1', 'B'), job('a2', 'A'), job('c1', 'C')], options);

    expect(outcomes.map((o) => [o.jobId, o.status])).toEqual([
      ['a1', 'FAILED'],
      ['b1', 'SENT'],
      ['a2', 'FAILED'],
      ['c1', 'SENT'],
    ]);
    expect(outcomes[0]).toMatchObject({
      error: { name: 'EnqueueError', reason: 'SEND_FAILED', code: 'InternalError' },
    });
    expect(outcomes[2]).toMatchObject({ error: { reason: 'EARLIER_JOB_FAILED' } });
    expect(sentBatches()).toEqual([['a1', 'b1'], ['c1']]);
  });

  it('holds back the later jobs of a workspace whose job is invalid', async () => {
    acceptAllBut();
    const invalid = { ...job('a1', 'A'), tenantId: '' };
    const outcomes = await enqueueAgentJobs([invalid, job('a2', 'A'), job('b1', 'B')], options);
    expect(outcomes.map((o) => o.status)).toEqual(['FAILED', 'FAILED', 'SENT']);
    expect(outcomes[0]).toMatchObject({ error: expect.any(InvalidJobError) });
    expect(outcomes[1]).toMatchObject({ error: expect.any(EnqueueError) });
    expect(sentBatches()).toEqual([['b1']]);
  });

  it('reports every job of a batch whose request failed, and goes on with the other workspaces', async () => {
    sqsMock
      .on(SendMessageBatchCommand)
      .rejectsOnce(Object.assign(new Error('socket hang up'), { name: 'TimeoutError' }))
      .callsFake(accepting());
    const outcomes = await enqueueAgentJobs([job('a1', 'A'), job('b1', 'B'), job('a2', 'A'), job('c1', 'C')], options);
    expect(outcomes.map((o) => [o.jobId, o.status])).toEqual([
      ['a1', 'FAILED'],
      ['b1', 'FAILED'],
      ['a2', 'FAILED'],
      ['c1', 'SENT'],
    ]);
    expect(outcomes[0]).toMatchObject({ error: { reason: 'SEND_FAILED', code: 'TimeoutError' } });
    expect(outcomes[2]).toMatchObject({ error: { reason: 'EARLIER_JOB_FAILED' } });
  });

  it('reports an entry SQS did not mention as failed', async () => {
    sqsMock.on(SendMessageBatchCommand).resolves({ Successful: [], Failed: [] });
    const [outcome] = await enqueueAgentJobs([job('a1', 'A')], options);
    expect(outcome).toMatchObject({ status: 'FAILED', error: { reason: 'SEND_FAILED' } });
  });

  it('puts at most ten entries, one per workspace and 1 MiB in total in a batch', async () => {
    acceptAllBut();
    await enqueueAgentJobs(
      Array.from({ length: 12 }, (_, i) => job(`w${i}`, `W${i}`)),
      options,
    );
    expect(sentBatches().map((b) => b.length)).toEqual([10, 2]);

    sqsMock.resetHistory();
    const nearLimit = diffOfBytes(INLINE_DIFF_LIMIT_BYTES - 1_000);
    await enqueueAgentJobs(
      Array.from({ length: 6 }, (_, i) => job(`s${i}`, `S${i}`, nearLimit)),
      options,
    );
    expect(sentBatches().map((b) => b.length)).toEqual([5, 1]);
  });
});

describe('enqueueAgentJob diff limits', () => {
  it('refuses a diff over the inline limit when no diff store is configured', async () => {
    await expect(enqueueAgentJob(job('big', 'A', diffOfBytes(INLINE_DIFF_LIMIT_BYTES + 1)), options)).rejects.toThrow(
      ConfigurationError,
    );
  });

  it('refuses a diff over the absolute limit as an invalid job', async () => {
    await expect(enqueueAgentJob(job('huge', 'A', 'd'.repeat(MAX_DIFF_BYTES + 1)), options)).rejects.toThrow(
      /payload\.diff.*over the/,
    );
    expect(sqsMock.calls()).toHaveLength(0);
  });
});
