/**
 * The wire contract's JSON Schema (contract/schema/): the files are what the code makes (a change
 * to a zod schema or the catalog without `npm run schema` fails here), and a JSON Schema validator
 * (ajv, as a producer in another language would use one) agrees with the platform on what the
 * producer sends, what the platform publishes and moves to a DLQ, and on the refusals JSON Schema
 * can express. The SQS client is mocked only to capture what the producer would send.
 */
import { readdirSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { SendMessageCommand, SQSClient, type SendMessageCommandInput } from '@aws-sdk/client-sqs';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { mockClient } from 'aws-sdk-client-mock';
import { outcomeEventDetailSchema } from '../../contract/events';
import { DLQ_ATTRIBUTES } from '../../contract/messages';
import { enqueueAgentJob, type JobRequest } from '../../src/client';
import { parseEnvelope, parseStageMessage, type JobEnvelope } from '../../src/core/envelope';
import { eventDetail, type OutcomeVerdict } from '../../src/core/pipeline';
import { WIRE_SCHEMA_DIR, wireSchemaFiles } from '../../src/core/wire-schema';

const DIR = path.join(__dirname, '../..', WIRE_SCHEMA_DIR);
const made = wireSchemaFiles();
// Strict: a keyword ajv does not know, or a format it cannot check, fails the test instead of being
// ignored. (strictRequired would also refuse the `oneOf: [{ required: ['diff'] }, ...]` that says
// "one of the diff forms": the properties are defined beside it, which JSON Schema allows.)
const ajv = addFormats(new Ajv2020({ strict: true, strictRequired: false, allErrors: true }));
const validator = (file: string) => ajv.compile(JSON.parse(readFileSync(path.join(DIR, file), 'utf8')) as object);

describe('the checked-in files', () => {
  it.each(Object.keys(made))('%s is what the code makes (else: npm run schema)', (file) => {
    expect(readFileSync(path.join(DIR, file), 'utf8')).toBe(made[file]);
  });

  it('are all there is in the folder', () => {
    expect(readdirSync(DIR).sort()).toEqual(Object.keys(made).sort());
  });
});

const sqsMock = mockClient(SQSClient);
afterEach(() => sqsMock.reset());

/** What the producer sends for a job: the SendMessage input, captured on its way out. */
async function sentFor(job: JobRequest): Promise<SendMessageCommandInput> {
  sqsMock.on(SendMessageCommand).resolves({ MessageId: 'm-1' });
  await enqueueAgentJob(job, {
    sqs: new SQSClient({ region: 'us-east-1' }),
    queueUrl: 'https://sqs.us-east-1.amazonaws.com/111122223333/q.fifo',
  });
  const input = sqsMock.commandCalls(SendMessageCommand)[0]?.args[0].input;
  if (!input) throw new Error('nothing sent');
  return input;
}

const repo = { url: 'https://git.example.com/app.git', branch: 'agent/ws-1' };
const ids = { workspaceId: 'ws-1', tenantId: 'acme' };
const REQUESTS: readonly JobRequest[] = [
  {
    ...ids,
    jobId: 'p1',
    type: 'apply_patch',
    payload: {
      repo,
      diff: 'diff --git a/a b/a\n',
      message: 'Fix',
      author: { name: 'Agent', email: 'agent@example.com' },
    },
  },
  {
    ...ids,
    jobId: 'p2',
    type: 'apply_patch',
    payload: {
      repo,
      diff: Buffer.from('diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+caf\xe9\n', 'latin1'),
      message: 'Latin-1',
    },
  },
  { ...ids, jobId: 't1', type: 'run_tests', payload: { command: 'npm test', timeoutSeconds: 600 } },
  { ...ids, jobId: 'pr1', type: 'open_pr', payload: { baseBranch: 'main', title: 'Fix' } },
];

describe('job-envelope.schema.json', () => {
  const valid = validator('job-envelope.schema.json');

  it.each(REQUESTS.map((r) => [r.jobId, r] as const))(
    'accepts the body the producer sends (%s)',
    async (_id, request) => {
      const body: unknown = JSON.parse((await sentFor(request)).MessageBody ?? '');
      expect(valid(body) ? [] : valid.errors).toEqual([]);
    },
  );

  const base = { jobId: 'j1', ...ids, createdAt: '2026-01-01T00:00:00.000Z' };
  const refused: readonly [string, Record<string, unknown>][] = [
    ['a job id with a slash', { ...base, jobId: 'a/b', type: 'run_tests', payload: {} }],
    ['an unknown type', { ...base, type: 'deploy', payload: {} }],
    ['a field the envelope does not have', { ...base, type: 'run_tests', payload: {}, priority: 1 }],
    ['a payload field of another type', { ...base, type: 'run_tests', payload: { title: 'x' } }],
    ['no payload', { ...base, type: 'run_tests' }],
    ['a time with an offset', { ...base, createdAt: '2026-01-01T00:00:00+02:00', type: 'run_tests', payload: {} }],
    [
      'two forms of one diff',
      { ...base, type: 'apply_patch', payload: { repo, message: 'm', diff: 'x', diffBase64: 'eA==' } },
    ],
    ['no diff at all', { ...base, type: 'apply_patch', payload: { repo, message: 'm' } }],
    ['a timeout over CodeBuild’s longest', { ...base, type: 'run_tests', payload: { timeoutSeconds: 10 ** 9 } }],
  ];

  it.each(refused)('refuses what the platform refuses: %s', (_what, body) => {
    expect(() => parseEnvelope(body)).toThrow(/invalid/);
    expect(valid(body)).toBe(false);
  });
});

describe('stage-message.schema.json', () => {
  it('accepts a pinned job as the sequencer forwards it, and refuses one without its pin', () => {
    const valid = validator('stage-message.schema.json');
    const job = parseEnvelope({
      jobId: 't1',
      ...ids,
      type: 'run_tests',
      createdAt: '2026-01-01T00:00:00.000Z',
      payload: {},
    });
    const pinned = { ...job, pin: { sha: 'a'.repeat(40), repoUrl: repo.url, branch: repo.branch } };
    expect(parseStageMessage(pinned)).toEqual(pinned);
    expect(valid(pinned) ? [] : valid.errors).toEqual([]);
    expect(valid(job)).toBe(false);
  });
});

describe('outcome-event-detail.schema.json', () => {
  const job = { jobId: 'j1', ...ids, type: 'apply_patch' } satisfies Pick<
    JobEnvelope,
    'jobId' | 'workspaceId' | 'tenantId' | 'type'
  >;
  const verdicts: readonly OutcomeVerdict[] = [
    { status: 'SUCCEEDED', result: { commitSha: 'b'.repeat(40) } },
    { status: 'FAILED', error: { reason: 'PATCH_DOES_NOT_APPLY', message: 'hunk 1 failed' } },
    { status: 'SKIPPED', error: { reason: 'SKIPPED', message: 'blocked' }, blockedBy: 'j0' },
  ];

  it.each(verdicts.map((v) => [v.status, v] as const))(
    'holds the detail the platform publishes for %s',
    (_status, verdict) => {
      const detail = eventDetail(job, verdict, 1);
      const valid = validator('outcome-event-detail.schema.json');
      expect(valid(detail) ? [] : valid.errors).toEqual([]);
      expect(outcomeEventDetailSchema.safeParse(detail).success).toBe(true);
    },
  );
});

describe('dlq-message-attributes.schema.json', () => {
  it("holds the attributes of a job's message on a DLQ, and needs its reason", async () => {
    const valid = validator('dlq-message-attributes.schema.json');
    const sent = await sentFor(REQUESTS[0]!);
    const values = (extra: Record<string, string>) => ({
      ...Object.fromEntries(Object.entries(sent.MessageAttributes ?? {}).map(([name, a]) => [name, a.StringValue])),
      ...extra,
    });
    expect(
      valid(
        values({ [DLQ_ATTRIBUTES.reason]: 'PATCH_DOES_NOT_APPLY', [DLQ_ATTRIBUTES.errorMessage]: 'hunk 1 failed' }),
      ),
    ).toBe(true);
    expect(valid(values({ [DLQ_ATTRIBUTES.errorMessage]: 'hunk 1 failed' }))).toBe(false);
  });
});
