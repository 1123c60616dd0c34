import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { mockClient } from 'aws-sdk-client-mock';
import { EVENT_SOURCE, SECRET_PLACEHOLDER } from '../../contract/runtime-env';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { EventBridgePublisher, JsonlEventLog } from '../../src/adapters/events';
import { SecretsManagerSecrets } from '../../src/adapters/secrets';
import { ConfigurationError, PermanentJobError, TransientJobError } from '../../src/core/errors';
import { withEmulators } from '../support/emulators';

describe('JsonlEventLog', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-events-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('appends concurrent events as whole lines in publish order and reads them back incrementally', async () => {
    const log = new JsonlEventLog(path.join(dir, 'nested', 'events.jsonl'));
    expect(await log.readFrom(0)).toEqual({ events: [], nextOffset: 0 });

    await Promise.all(Array.from({ length: 20 }, (_, i) => log.publish('AgentJobSucceeded', { jobId: `job-${i}` })));
    const first = await log.readFrom(0);
    expect(first.events.map((e) => e.detail.jobId)).toEqual(Array.from({ length: 20 }, (_, i) => `job-${i}`));
    expect(first.events[0]).toMatchObject({ source: EVENT_SOURCE, type: 'AgentJobSucceeded' });

    await log.publish('WorkspaceBlocked', { workspaceId: 'ws-1' });
    const next = await log.readFrom(first.nextOffset);
    expect(next.events.map((e) => e.type)).toEqual(['WorkspaceBlocked']);
  });

  it('leaves a line that is still being written for the next read', async () => {
    const file = path.join(dir, 'events.jsonl');
    const log = new JsonlEventLog(file);
    await log.publish('AgentJobFailed', { jobId: 'a' });
    await appendFile(file, '{"time":"2026-01-01T00:00:00.000Z","source":"agent-jobs","type":"AgentJobSk');

    const read = await log.readFrom(0);
    expect(read.events.map((e) => e.detail.jobId)).toEqual(['a']);
    await appendFile(file, 'ipped","detail":{"jobId":"b"}}\n');
    expect((await log.readFrom(read.nextOffset)).events.map((e) => e.detail.jobId)).toEqual(['b']);
  });
});

// EventBridge has no local emulator: the client is mocked to check the request and to inject a
// partial failure.
describe('EventBridgePublisher', () => {
  const eventBridge = mockClient(EventBridgeClient);
  afterEach(() => eventBridge.reset());

  it('puts the event on the bus with the platform source and the event type as detail-type', async () => {
    eventBridge.on(PutEventsCommand).resolves({ FailedEntryCount: 0, Entries: [{ EventId: '1' }] });
    await new EventBridgePublisher(new EventBridgeClient({}), 'bus-1').publish('AgentJobSucceeded', { jobId: 'j' });
    expect(eventBridge.commandCalls(PutEventsCommand)[0]?.args[0].input).toEqual({
      Entries: [
        { EventBusName: 'bus-1', Source: EVENT_SOURCE, DetailType: 'AgentJobSucceeded', Detail: '{"jobId":"j"}' },
      ],
    });
  });

  it('throws a TransientJobError when the entry is rejected', async () => {
    eventBridge
      .on(PutEventsCommand)
      .resolves({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'ThrottlingException', ErrorMessage: 'slow down' }] });
    const publish = new EventBridgePublisher(new EventBridgeClient({}), 'bus-1').publish('AgentJobFailed', {
      jobId: 'j',
    });
    await expect(publish).rejects.toThrow(TransientJobError);
    await expect(publish).rejects.toThrow(/ThrottlingException/);
  });
});

describe('S3DiffStore on the local S3', () => {
  const env = withEmulators();
  const store = () => new S3DiffStore(env().clients.s3, env().bucketName);
  // Bytes, not text: a Latin-1 "é" (0xE9) and an emoji in UTF-8, side by side.
  const diff = Buffer.concat([
    Buffer.from('diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new caf'),
    Buffer.from([0xe9]),
    Buffer.from(' 😀\n'),
  ]);

  it('round-trips a diff byte for byte under a content-addressed key', async () => {
    const ref = await store().put('ws-1/job-1', diff);
    expect(ref).toEqual({
      bucket: env().bucketName,
      key: `ws-1/job-1/${ref.sha256}.diff`,
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
      bytes: diff.length,
    });
    expect(await store().put('ws-1/job-1', diff)).toEqual(ref);
    expect(Buffer.from(await store().get(ref)).equals(diff)).toBe(true);
  });

  it('refuses an object that no longer matches its reference', async () => {
    const ref = await store().put('ws-1/job-2', diff);
    await env().clients.s3.send(
      new PutObjectCommand({
        Bucket: ref.bucket,
        Key: ref.key,
        Body: Buffer.from(diff.toString('latin1').replace('new', 'evil'), 'latin1'),
      }),
    );
    await expect(store().get(ref)).rejects.toMatchObject({ name: 'PermanentJobError', reason: 'INVALID_JOB' });
  });

  it('refuses a missing object and a reference to another bucket as invalid jobs', async () => {
    const ref = await store().put('ws-1/job-3', diff);
    await expect(store().get({ ...ref, key: 'ws-1/none.diff' })).rejects.toThrow(/does not exist/);
    await expect(store().get({ ...ref, bucket: 'someone-elses' })).rejects.toThrow(PermanentJobError);
  });
});

// There is no local Secrets Manager emulator: the client is mocked to hand in secret values.
describe('SecretsManagerSecrets', () => {
  const secretsManager = mockClient(SecretsManagerClient);
  afterEach(() => secretsManager.reset());
  const gitArn = 'arn:aws:secretsmanager:us-east-1:111122223333:secret:git-AbCdEf';
  const tokenArn = 'arn:aws:secretsmanager:us-east-1:111122223333:secret:gh-AbCdEf';
  const secrets = () =>
    new SecretsManagerSecrets({
      client: new SecretsManagerClient({}),
      gitCredentialsArn: gitArn,
      githubTokenArn: tokenArn,
    });

  it('reads git credentials once and serves them from the cache afterwards', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: gitArn })
      .resolves({ SecretString: '{"username":"bot","password":"p4ss"}' });
    const source = secrets();
    expect(await source.gitCredentials()).toEqual({ username: 'bot', password: 'p4ss' });
    expect(await source.gitCredentials()).toEqual({ username: 'bot', password: 'p4ss' });
    expect(secretsManager.commandCalls(GetSecretValueCommand)).toHaveLength(1);
  });

  it('accepts a bare GitHub token or a {"token"} object', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: tokenArn })
      .resolvesOnce({ SecretString: 'ghp_abc' })
      .resolvesOnce({ SecretString: '{"token":"ghp_def"}' });
    expect(await secrets().githubToken()).toBe('ghp_abc');
    expect(await secrets().githubToken()).toBe('ghp_def');
  });

  it('names the malformed secret without echoing its value', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: gitArn })
      .resolves({ SecretString: '{"username":"bot","pasword":"hunter2"}' });
    const read = secrets().gitCredentials();
    await expect(read).rejects.toThrow(ConfigurationError);
    await expect(read).rejects.toThrow(
      new RegExp(`secret ${gitArn} \\(GIT_CREDENTIALS_SECRET_ARN\\) is malformed.*password`),
    );
    await expect(read).rejects.not.toThrow(/hunter2/);
  });

  it('refuses the placeholder a stack-created secret holds until the operator stores the credential, naming the secret', async () => {
    secretsManager
      .on(GetSecretValueCommand, { SecretId: gitArn })
      .resolves({ SecretString: JSON.stringify({ username: SECRET_PLACEHOLDER, password: SECRET_PLACEHOLDER }) })
      .on(GetSecretValueCommand, { SecretId: tokenArn })
      .resolves({ SecretString: SECRET_PLACEHOLDER });
    const git = secrets().gitCredentials();
    await expect(git).rejects.toThrow(ConfigurationError);
    await expect(git).rejects.toThrow(
      `secret ${gitArn} (GIT_CREDENTIALS_SECRET_ARN) still holds the placeholder ${SECRET_PLACEHOLDER}`,
    );
    await expect(secrets().githubToken()).rejects.toThrow(
      `secret ${tokenArn} (GITHUB_TOKEN_SECRET_ARN) still holds the placeholder`,
    );
  });

  it('names the missing setting when a secret ARN is not configured', async () => {
    await expect(new SecretsManagerSecrets({ client: new SecretsManagerClient({}) }).githubToken()).rejects.toThrow(
      'GITHUB_TOKEN_SECRET_ARN is not set',
    );
  });
});
