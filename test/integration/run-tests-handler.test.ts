/**
 * The run_tests handler on the shared pipeline against dynalite + fauxqs, with CodeBuild mocked
 * (aws-sdk-client-mock: CodeBuild has no local stand-in). Messages are received and deleted like the
 * event source mapping does; back-off is zero so a redelivery is the next receive.
 */
import { randomUUID } from 'node:crypto';
import { BatchGetBuildsCommand, CodeBuildClient, ListBuildsForProjectCommand, StartBuildCommand, type Build } from '@aws-sdk/client-codebuild';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { CodeBuildTestRunner } from '../../src/adapters/codebuild-test-runner';
import { jobAttributes, jobDigest, type StageMessage } from '../../src/core/envelope';
import { withEmulators } from '../support/emulators';
import { LEASE_SECONDS, stageHarness, type StageHarness } from './staged-harness';
import { REDRIVE_ATTRIBUTE } from '../../contract/messages';
import { createRunTestsHandler } from '../../src/core/jobs/run-tests';

const QUEUE = 'run-tests';
const sha = 'b'.repeat(40);
const codebuild = mockClient(CodeBuildClient);

describe('run_tests handler (pipeline + dynalite + fauxqs)', () => {
  const emulators = withEmulators();
  let h: StageHarness;

  beforeEach(() => {
    h = stageHarness(emulators(), 'run_tests');
  });
  afterEach(() => codebuild.reset());

  function handler(remainingMs = 900_000) {
    const run = createRunTestsHandler({
      ...h.deps,
      runner: new CodeBuildTestRunner(new CodeBuildClient({ region: 'us-east-1' }), 'tests'),
      wait: { pollIntervalMs: 20_000, reserveMs: 30_000 },
      sleep: async (ms) => {
        h.now += ms;
      },
    });
    return (records: SQSRecord[]) => run({ Records: records }, { getRemainingTimeInMillis: () => remainingMs });
  }

  function job(jobId = `job-${randomUUID().slice(0, 8)}`): StageMessage<'run_tests'> {
    return {
      jobId,
      workspaceId: 'ws-1',
      tenantId: 't-1',
      type: 'run_tests',
      createdAt: '2026-11-29T11:00:00.000Z',
      payload: { command: 'npm test' },
      pin: { sha, repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-1' },
    };
  }

  const build = (status: Build['buildStatus'], extra: Partial<Build> = {}): Build => ({ id: 'tests:1', buildStatus: status, ...extra });
  const failedBuild = build('FAILED', {
    phases: [{ phaseType: 'BUILD', phaseStatus: 'FAILED', contexts: [{ statusCode: 'COMMAND_EXECUTION_ERROR', message: 'Error while executing command: npm test. Reason: exit status 1' }] }],
  });

  it('starts one build, polls it to the end, and records a passed verdict with the build id', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolvesOnce({ builds: [build('IN_PROGRESS')] }).resolves({ builds: [build('SUCCEEDED')] });

    const delivery = await h.deliver(handler());

    expect(delivery.failed).toBe(false);
    const record = await h.ledger.getJob(message.jobId);
    expect(record).toMatchObject({ status: 'SUCCEEDED', progress: { buildId: 'tests:1' }, result: { verdict: 'passed', exitCode: 0, sha, buildId: 'tests:1' } });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(codebuild.commandCalls(BatchGetBuildsCommand)).toHaveLength(2);
    expect(h.events).toEqual([{ type: 'AgentJobSucceeded', detail: expect.objectContaining({ jobId: message.jobId, result: expect.objectContaining({ verdict: 'passed' }) }) }]);
  });

  it('records failing tests as a successful job with verdict failed', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [failedBuild] });

    await h.deliver(handler());

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'failed', exitCode: 1, logTail: expect.stringContaining('exit status 1') } });
    expect(h.events.map((e) => e.type)).toEqual(['AgentJobSucceeded']);
  });

  it('hands a build that outlives the invocation to the next delivery, which resumes it without a second build', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolvesOnce({ builds: [build('IN_PROGRESS')] }).resolves({ builds: [build('SUCCEEDED')] });

    const first = await h.deliver(handler(40_000));

    expect(first.failed).toBe(true);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'IN_FLIGHT', progress: { buildId: 'tests:1' } });

    const second = await h.deliver(handler());

    expect(second).toEqual({ failed: false, receiveCount: 2 });
    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    // Two attempts at the job: the two deliveries to its stage (the sequencer's pinning is not one).
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 2, result: { verdict: 'passed', buildId: 'tests:1' } });
  });

  it('resumes the recorded build after a transient CodeBuild error mid-wait, without a second build', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).rejectsOnce(new Error('socket hang up')).resolves({ builds: [build('SUCCEEDED')] });

    expect((await h.deliver(handler())).failed).toBe(true);
    expect((await h.deliver(handler())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(1);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { buildId: 'tests:1' } });
  });

  it('resumes the build a dead worker recorded once its lease runs out, without starting another', async () => {
    const message = job();
    await h.forward(message);
    // A worker claimed the job, started and recorded its build, then died: no release, no verdict.
    const { pin: _pin, ...envelope } = message;
    const owner = 'dead-worker';
    await h.ledger.claim({ job: envelope, digest: jobDigest(envelope), owner, now: h.now, leaseMs: LEASE_SECONDS * 1000, consumer: 'stage', pin: message.pin, redrive: false });
    await h.ledger.recordProgress({ jobId: message.jobId, owner, progress: { buildId: 'tests:1' }, now: h.now });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build('SUCCEEDED')] });

    // Its lease is live: the redelivery must not run the job concurrently; it comes back when the lease ends.
    expect((await h.deliver(handler())).failed).toBe(true);
    await h.elapse((LEASE_SECONDS + 1) * 1000);
    expect((await h.deliver(handler())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(0);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'passed', buildId: 'tests:1' } });
  });

  it('finds the build a worker started but died before recording, instead of starting a second', async () => {
    const message = job();
    await h.forward(message);
    // The dead worker asked for a build (marker written), CodeBuild started it, the worker died.
    const { pin: _pin, ...envelope } = message;
    const owner = 'dead-worker';
    await h.ledger.claim({ job: envelope, digest: jobDigest(envelope), owner, now: h.now, leaseMs: LEASE_SECONDS * 1000, consumer: 'stage', pin: message.pin, redrive: false });
    await h.ledger.recordProgress({ jobId: message.jobId, owner, progress: { startRequestedAt: new Date(h.now).toISOString() }, now: h.now });
    h.now += (LEASE_SECONDS + 1) * 1000;
    const started: Build = build('SUCCEEDED', {
      id: 'tests:7',
      environment: { type: 'LINUX_CONTAINER', image: 'i', computeType: 'BUILD_GENERAL1_SMALL', environmentVariables: [{ name: 'JOB_ID', value: message.jobId }] },
    });
    codebuild.on(ListBuildsForProjectCommand).resolves({ ids: ['tests:8', 'tests:7'] });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build('IN_PROGRESS', { id: 'tests:8' }), started] });

    expect((await h.deliver(handler())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(0);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', progress: { buildId: 'tests:7' }, result: { buildId: 'tests:7', verdict: 'passed' } });
  });

  it('records that it asks for a build before starting it, and the build id right after', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build('SUCCEEDED')] });

    await h.deliver(handler());

    // A first attempt never searches: there is nothing an earlier attempt could have started.
    expect(codebuild.commandCalls(ListBuildsForProjectCommand)).toHaveLength(0);
    expect((await h.ledger.getJob(message.jobId))?.progress).toEqual({ startRequestedAt: new Date(h.now).toISOString(), buildId: 'tests:1' });
  });

  it('acknowledges a redelivery of a finished job without touching CodeBuild', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build('SUCCEEDED')] });
    await h.deliver(handler());
    codebuild.resetHistory();
    // The same message again, as SQS's at-least-once delivery may do.
    await h.sendRaw(JSON.stringify(message));

    expect((await h.deliver(handler())).failed).toBe(false);
    expect(codebuild.calls()).toHaveLength(0);
  });

  it.each(['FAULT', 'TIMED_OUT', 'STOPPED'] as const)('fails the job permanently when the build ends %s: ledger FAILED, DLQ with the reason, event', async (status) => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolves({ build: { id: 'tests:1' } });
    codebuild.on(BatchGetBuildsCommand).resolves({ builds: [build(status)] });

    expect((await h.deliver(handler())).failed).toBe(false);

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: expect.stringContaining(`test run ${status}`) } });
    const [dead] = (await h.dlqMessages()).filter((m) => m.MessageAttributes?.['jobId']?.StringValue === message.jobId);
    expect(dead?.MessageAttributes?.['reason']?.StringValue).toBe('TEST_RUN_ERROR');
    expect(h.events).toEqual([{ type: 'AgentJobFailed', detail: expect.objectContaining({ jobId: message.jobId, reason: 'TEST_RUN_ERROR' }) }]);
  });

  it('starts a new build when an operator redrives a job whose build broke, instead of resuming the broken one', async () => {
    const message = job();
    await h.forward(message);
    codebuild.on(StartBuildCommand).resolvesOnce({ build: { id: 'tests:1' } }).resolves({ build: { id: 'tests:2' } });
    codebuild.on(BatchGetBuildsCommand, { ids: ['tests:1'] }).resolves({ builds: [build('FAULT')] });
    codebuild.on(BatchGetBuildsCommand, { ids: ['tests:2'] }).resolves({ builds: [build('SUCCEEDED', { id: 'tests:2' })] });
    expect((await h.deliver(handler())).failed).toBe(false);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'FAILED', error: { reason: 'TEST_RUN_ERROR' } });

    // `dlq redrive` sends the message back with the redrive attribute (decisions §2).
    const attributes = { ...jobAttributes(message), [REDRIVE_ATTRIBUTE]: 'dlq-message-1' };
    const { sqs } = emulators().clients;
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: emulators().queueUrls[QUEUE],
        MessageBody: JSON.stringify(message),
        MessageAttributes: Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }])),
      }),
    );
    expect((await h.deliver(handler())).failed).toBe(false);

    expect(codebuild.commandCalls(StartBuildCommand)).toHaveLength(2);
    // Run by the stage, then again by the redrive.
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 2, progress: { buildId: 'tests:2' }, result: { verdict: 'passed', buildId: 'tests:2' } });
  });

  it('sends a message for another job type to the DLQ as invalid', async () => {
    const wrong = { ...job(), type: 'open_pr', payload: { baseBranch: 'main', title: 't' } };
    await h.sendRaw(JSON.stringify(wrong));

    expect((await h.deliver(handler())).failed).toBe(false);

    expect(codebuild.calls()).toHaveLength(0);
    const dead = (await h.dlqMessages()).find((m) => m.MessageAttributes?.['reason']?.StringValue === 'INVALID_JOB');
    expect(dead?.MessageAttributes?.['errorMessage']?.StringValue).toMatch(/run-tests queue received a open_pr job/);
  });
});
