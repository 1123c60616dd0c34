/**
 * A producer that knows only the README's "Send jobs from any language" and contract/schema/, not
 * the TypeScript library: hand-written JSON bodies, checked against the checked-in JSON Schema by
 * a generic validator, sent with the AWS SDK's raw SendMessage (and PutObject for a claim-checked
 * diff), with the fields the README names. They run on the local platform; what comes back (the
 * outcome events, a refused job's DLQ attributes) holds to the schema too. Nothing here imports
 * src/: only the SDK's raw calls, node's sha256 and the schema files.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import * as path from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { eventually } from '../support/eventually';
import { diffChain, makeRepository, removeScratch, startPlatform, type RunningPlatform } from './harness';

jest.setTimeout(240_000);

const SCHEMA_DIR = path.join(__dirname, '../../contract/schema');
const ajv = addFormats(new Ajv2020({ strict: true, strictRequired: false, allErrors: true }));
const schema = (file: string) => ajv.compile(JSON.parse(readFileSync(path.join(SCHEMA_DIR, file), 'utf8')) as object);
const envelopeSchema = schema('job-envelope.schema.json');

/** What the README says `.agent-jobs/platform.json` holds for a producer. */
interface PlatformFile {
  region: string;
  endpoints: { sqs: string; s3: string };
  queueUrls: Record<string, string>;
  bucketName: string;
}

let platform: RunningPlatform;
let local: PlatformFile;
let sqs: SQSClient;
let s3: S3Client;

beforeAll(async () => {
  platform = await startPlatform();
  local = JSON.parse(await readFile(path.join(platform.stateDir, 'platform.json'), 'utf8')) as PlatformFile;
  // The local emulators take any credentials; on AWS, the caller's own.
  const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
  sqs = new SQSClient({ region: local.region, endpoint: local.endpoints.sqs, credentials });
  s3 = new S3Client({ region: local.region, endpoint: local.endpoints.s3, forcePathStyle: true, credentials });
});

afterAll(async () => {
  sqs?.destroy();
  s3?.destroy();
  await platform?.stop();
  await removeScratch();
});

const sha256 = (text: string | Buffer) => createHash('sha256').update(text).digest('hex');

/** One SendMessage, field by field as the README's table gives them. */
async function send(body: string): Promise<void> {
  const job = JSON.parse(body) as { jobId: string; workspaceId: string; tenantId: string; type: string };
  expect(envelopeSchema(JSON.parse(body)) ? [] : envelopeSchema.errors).toEqual([]);
  await sqs.send(
    new SendMessageCommand({
      QueueUrl: local.queueUrls['agent-jobs'],
      MessageBody: body,
      MessageGroupId: `ws#${job.workspaceId}`,
      MessageDeduplicationId: sha256(`${job.jobId}:${job.type}`),
      MessageAttributes: Object.fromEntries(
        ['jobId', 'workspaceId', 'tenantId', 'type'].map((name) => [
          name,
          { DataType: 'String', StringValue: job[name as keyof typeof job] },
        ]),
      ),
    }),
  );
}

test('hand-written bodies, a claim-checked diff among them, run in order; outcome events and DLQ attributes hold to the schema', async () => {
  const source = await makeRepository({ 'greeting.txt': 'hello\n', 'test.sh': 'grep -q world greeting.txt\n' }, [
    'polyglot',
  ]);
  const { url } = await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'polyglot']);
  const big = Array.from(
    { length: 6_000 },
    (_, i) => `line ${i} of a generated file, long enough to pass the inline limit\n`,
  ).join('');
  const [small, large] = await diffChain(source, [{ 'greeting.txt': 'hello world\n' }, { 'generated.txt': big }]);
  const smallDiff = await readFile(small ?? '', 'utf8');
  const largeDiff = await readFile(large ?? '');
  expect(largeDiff.length).toBeGreaterThan(200 * 1024);

  // A diff over 200 KiB travels by claim-check: its bytes in the diff bucket, its reference in the body.
  const key = `ws-polyglot/p2/${sha256(largeDiff)}.diff`;
  await s3.send(new PutObjectCommand({ Bucket: local.bucketName, Key: key, Body: largeDiff }));

  const createdAt = '2026-12-01T10:00:00.000Z';
  await send(`{"jobId":"p1","workspaceId":"ws-polyglot","tenantId":"acme","type":"apply_patch","createdAt":"${createdAt}",
    "payload":{"repo":{"url":"${url}","branch":"polyglot"},"diff":${JSON.stringify(smallDiff)},"message":"Greet the world"}}`);
  await send(`{"jobId":"p2","workspaceId":"ws-polyglot","tenantId":"acme","type":"apply_patch","createdAt":"${createdAt}",
    "payload":{"repo":{"url":"${url}","branch":"polyglot"},"diffRef":{"bucket":"${local.bucketName}","key":"${key}","sha256":"${sha256(largeDiff)}","bytes":${largeDiff.length}},"message":"Generate a file"}}`);
  // The tests at the commit the pull request is pinned to: open_pr requires them (catalog `requires`).
  await send(
    `{"jobId":"t1","workspaceId":"ws-polyglot","tenantId":"acme","type":"run_tests","createdAt":"${createdAt}","payload":{"command":"sh ./test.sh"}}`,
  );
  await send(
    `{"jobId":"pr1","workspaceId":"ws-polyglot","tenantId":"acme","type":"open_pr","createdAt":"${createdAt}","payload":{"baseBranch":"main","title":"Greet the world"}}`,
  );
  // Valid to the schema, refused by the platform: the rule the schema states only in words (a branch named HEAD).
  await send(`{"jobId":"x1","workspaceId":"ws-refused","tenantId":"acme","type":"apply_patch","createdAt":"${createdAt}",
    "payload":{"repo":{"url":"${url}","branch":"HEAD"},"diff":${JSON.stringify(smallDiff)},"message":"m"}}`);

  for (const jobId of ['p1', 't1', 'p2', 'pr1'])
    await platform.untilJob<{ status: string }>(jobId, (job) => job.status === 'SUCCEEDED');
  expect(await platform.cliJson<{ result: { verdict: string } }>(['status', 't1'])).toMatchObject({
    result: { verdict: 'passed' },
  });
  expect(await platform.remoteLog(url, 'polyglot')).toEqual(['Generate a file', 'Greet the world', 'initial']);
  const outcome = schema('outcome-event-detail.schema.json');
  const events = (await platform.events()).filter((e) => e.type.startsWith('AgentJob'));
  expect(events.map((e) => e.detail['jobId']).sort()).toEqual(['p1', 'p2', 'pr1', 't1']);
  for (const event of events) expect(outcome(event.detail) ? [] : outcome.errors).toEqual([]);

  // An envelope the platform refuses is not a job it records: it waits on the DLQ, its reason in its attributes.
  const dlq = schema('dlq-message-attributes.schema.json');
  const peek = () => platform.cliLines<{ attributes: Record<string, string> }>(['dlq', 'peek']);
  const peeked = await eventually(peek, (messages) => messages.some((m) => m.attributes['jobId'] === 'x1'), {
    what: 'x1 on the DLQ',
    timeoutMs: 60_000,
    intervalMs: 500,
  });
  const onDlq = peeked.find((m) => m.attributes['jobId'] === 'x1');
  expect(onDlq?.attributes).toMatchObject({
    reason: 'INVALID_JOB',
    errorMessage: expect.stringContaining('payload.repo.branch'),
  });
  expect(dlq(onDlq?.attributes) ? [] : dlq.errors).toEqual([]);
});
