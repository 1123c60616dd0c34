/**
 * The real sequencer handler against fauxqs (FIFO queue, DLQs, stage queues), dynalite (ledger) and
 * a loopback git server, driven the way the event source mapping drives it. Faults are injected by
 * wrapping the real adapters (git, ledger); CloudWatch metrics are recorded in memory (no emulator).
 */
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ChangeMessageVisibilityCommand, SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import { SEQUENCER } from '../../contract/job-types';
import { queueTopology } from '../../contract/topology';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { JsonlEventLog } from '../../src/adapters/events';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { enqueueAgentJob } from '../../src/client/producer';
import { deduplicationId, jobAttributes, jobDigest, messageGroupId, type JobEnvelope } from '../../src/core/envelope';
import { TransientJobError } from '../../src/core/errors';
import { localClientConfig } from '../../tools/local/emulators';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { deliver, drain, driveQueue, queueArn, receive, toSqsRecord } from '../support/drive-queue';
import { withEmulators } from '../support/emulators';
import { recordSends } from '../support/sqs-sends';
import type { Ledger, QueueOps, WorkspaceGit } from '../../src/core/ports';
import type { JobMetricName } from '../../contract/runtime-env';
import { createSequencer, type SequencerDeps } from '../../src/core/sequencer';
import { localGit, localSequencerDeps } from '../../src/compose/local';

const run = promisify(execFile);
const LEASE_SECONDS = 60;
const TENANT = 'tenant-1';

/** A promise resolved from outside: orders steps across concurrent deliveries without timers. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** A diff that appends `line` to log.txt holding `lines`: it applies only on exactly that content. */
function appendDiff(lines: readonly string[], line: string): string {
  const context = lines.slice(-3);
  const start = lines.length - context.length + 1;
  return [
    'diff --git a/log.txt b/log.txt',
    '--- a/log.txt',
    '+++ b/log.txt',
    `@@ -${start},${context.length} +${start},${context.length + 1} @@`,
    ...context.map((l) => ` ${l}`),
    `+${line}`,
    '',
  ].join('\n');
}

describe('sequencer handler (fauxqs + a DynamoDB emulator + loopback git)', () => {
  const emulators = withEmulators();
  let gitServer: GitServer;
  let root: string;
  let events: JsonlEventLog;
  let ledger: DynamoDbLedger;
  let clockOffset = 0;
  const metrics: { metric: JobMetricName; jobType?: string }[] = [];

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'sequencer-it-'));
    gitServer = await startGitServer({ root: join(root, 'remotes') });
    events = new JsonlEventLog(join(root, 'events.jsonl'));
    ledger = new DynamoDbLedger({
      client: emulators().clients.dynamodb,
      tableName: emulators().tableName,
      retentionDays: 30,
    });
  });

  afterAll(async () => {
    await gitServer?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  afterEach(async () => {
    // Every test leaves the shared queues empty for the next one.
    await Promise.all(
      queueTopology()
        .map((spec) => spec.name)
        .flatMap((q) => [
          drain(sqs(), emulators().queueUrls[q] as string),
          drain(sqs(), emulators().dlqUrls[q] as string),
        ]),
    );
    clockOffset = 0;
    metrics.length = 0;
  });

  const sqs = () => emulators().clients.sqs;
  const queueUrl = () => emulators().queueUrls['agent-jobs'] as string;
  const dlqUrl = () => emulators().dlqUrls['agent-jobs'] as string;

  function deps(overrides: { git?: WorkspaceGit; ledger?: Ledger } = {}): SequencerDeps {
    return {
      ...localSequencerDeps({
        resources: emulators(),
        events,
        logger: new Logger({ serviceName: 'sequencer-it', logLevel: 'SILENT' }),
        metrics: { count: (metric, jobType) => metrics.push({ metric, jobType }) },
        clock: { now: () => Date.now() + clockOffset },
        leaseSeconds: LEASE_SECONDS,
        backoff: { baseSeconds: 0, capSeconds: 0 },
        workRoot: join(root, 'work'),
        ...(overrides.git && { git: overrides.git }),
      }),
      ledger: overrides.ledger ?? ledger,
    };
  }

  /** The real git adapter, for tests that wrap it to inject a fault. */
  const realGit = () => localGit(join(root, 'work'));

  /** The real git adapter, except that `jobId`'s commits go through `instead` (fault injection), given the real one. */
  function gitExceptFor(
    jobId: string,
    instead: (
      request: Parameters<WorkspaceGit['commitPatch']>[0],
      real: WorkspaceGit,
    ) => ReturnType<WorkspaceGit['commitPatch']>,
  ): WorkspaceGit {
    const git = realGit();
    return {
      branchHead: (url, branch) => git.branchHead(url, branch),
      commitPatch: (request) => (request.jobId === jobId ? instead(request, git) : git.commitPatch(request)),
    };
  }

  /** The real git adapter, except that `jobId`'s commit waits inside git until released: a worker still at work. */
  function gitHolding(jobId: string): { git: WorkspaceGit; entered: Promise<void>; release: () => void } {
    const entered = deferred();
    const release = deferred();
    const git = gitExceptFor(jobId, async (request, real) => {
      entered.resolve();
      await release.promise;
      return real.commitPatch(request);
    });
    return { git, entered: entered.promise, release: () => release.resolve() };
  }

  /** A workspace: a remote repository whose main branch holds log.txt with one line. */
  async function newWorkspace(): Promise<{ workspaceId: string; repoUrl: string; gitDir: string; lines: string[] }> {
    const workspaceId = `ws-${randomUUID().slice(0, 8)}`;
    const src = await mkdtemp(join(root, 'src-'));
    await writeFile(join(src, 'log.txt'), 'line 0\n');
    const git = (...args: string[]) =>
      run('git', ['-c', 'user.name=test', '-c', 'user.email=test@example.com', ...args], { cwd: src });
    await git('init', '-q', '-b', 'main');
    await git('add', 'log.txt');
    await git('commit', '-q', '-m', 'initial');
    const gitDir = await gitServer.createBareRepo(workspaceId, { fromDir: src });
    return { workspaceId, repoUrl: gitServer.repoUrl(workspaceId), gitDir, lines: ['line 0'] };
  }

  type Workspace = Awaited<ReturnType<typeof newWorkspace>>;

  /** An apply_patch job appending the next line (the workspace's expected content advances). */
  function patchJob(ws: Workspace, diff?: string): JobEnvelope<'apply_patch'> {
    const line = `line ${ws.lines.length}`;
    const job: JobEnvelope<'apply_patch'> = {
      jobId: `job-${randomUUID()}`,
      workspaceId: ws.workspaceId,
      tenantId: TENANT,
      type: 'apply_patch',
      createdAt: '2026-01-01T00:00:00Z',
      payload: {
        repo: { url: ws.repoUrl, branch: 'main' },
        diff: diff ?? appendDiff(ws.lines, line),
        message: `append ${line}`,
      },
    };
    if (diff === undefined) ws.lines.push(line);
    return job;
  }

  async function send(job: JobEnvelope): Promise<void> {
    await enqueueAgentJob(job, { sqs: sqs(), queueUrl: queueUrl() });
  }

  /** Commits on the remote main branch after the initial one, oldest first, as [jobId trailer, subject]. */
  async function remoteCommits(ws: Workspace): Promise<string[]> {
    const { stdout } = await run('git', [
      '--git-dir',
      ws.gitDir,
      'log',
      '--reverse',
      '--format=%(trailers:key=Agent-Job-Id,valueonly,separator=)',
      'main',
    ]);
    return stdout.split('\n').filter((l) => l.trim() !== '');
  }

  async function remoteFile(ws: Workspace): Promise<string> {
    return (await run('git', ['--git-dir', ws.gitDir, 'show', 'main:log.txt'])).stdout;
  }

  const attr = (m: Message, name: string) => m.MessageAttributes?.[name]?.StringValue;

  /**
   * What `dlq redrive` and `workspace unblock --replay` send (docs/decisions.md §2, §26): each DLQ
   * message back to the FIFO queue, in order, with a fresh dedup id and the redrive attribute
   * carrying the token the redrive recorded in the ledger first.
   */
  async function redrive(messages: readonly Message[]): Promise<void> {
    for (const message of messages) {
      const job = JSON.parse(message.Body ?? '{}') as JobEnvelope;
      const token = randomUUID();
      await ledger.authorizeRedrive({ jobId: job.jobId, token, now: Date.now() });
      await sqs().send(
        new SendMessageCommand({
          QueueUrl: queueUrl(),
          MessageBody: message.Body,
          MessageGroupId: messageGroupId(job.workspaceId),
          MessageDeduplicationId: createHash('sha256')
            .update(`${job.jobId}:${job.type}:redrive:${message.MessageId}`)
            .digest('hex'),
          MessageAttributes: Object.fromEntries(
            Object.entries({ ...jobAttributes(job), redrive: token }).map(([k, v]) => [
              k,
              { DataType: 'String', StringValue: v },
            ]),
          ),
        }),
      );
    }
  }
  const eventsOf = async (jobId: string) =>
    (await events.readFrom(0)).events.filter((e) => e.detail['jobId'] === jobId || e.detail['blockedBy'] === jobId);

  /** Fault injection around the real SQS adapter: the first DLQ send fails; back-offs are recorded. */
  function dlqDownOnce(real: QueueOps): { queueOps: QueueOps; backoffs: number[] } {
    const backoffs: number[] = [];
    let down = true;
    const queueOps: QueueOps = {
      send: (url, body, attributes, groupId) => real.send(url, body, attributes, groupId),
      sendToDlq: (url, message, failure) => real.sendToDlq(url, message, failure),
      requeue: (record, delaySeconds, attributes) => real.requeue(record, delaySeconds, attributes),
      changeVisibility: async (record, seconds) => {
        backoffs.push(seconds);
        await real.changeVisibility(record, seconds);
      },
      moveToDlq: async (record, failure) => {
        if (down) {
          down = false;
          throw new Error('DLQ unavailable');
        }
        await real.moveToDlq(record, failure);
      },
    };
    return { queueOps, backoffs };
  }

  it('applies interleaved workspaces in send order, one commit per job, and forwards a pinned run_tests', async () => {
    const workspaces = await Promise.all([newWorkspace(), newWorkspace(), newWorkspace()]);
    const jobs = new Map<string, JobEnvelope[]>(workspaces.map((ws) => [ws.workspaceId, []]));
    for (let round = 0; round < 4; round++) {
      for (const ws of workspaces) {
        const job = patchJob(ws);
        jobs.get(ws.workspaceId)?.push(job);
        await send(job);
      }
    }
    const first = workspaces[0] as Workspace;
    const tests: JobEnvelope = {
      jobId: `job-${randomUUID()}`,
      workspaceId: first.workspaceId,
      tenantId: TENANT,
      type: 'run_tests',
      createdAt: '2026-01-01T00:00:00Z',
      payload: {},
    };
    await send(tests);

    const sends = recordSends(sqs());
    const { responses } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer(deps()),
      concurrency: 2,
    }).finally(() => sends.stop());

    expect(responses.flatMap((r) => r.batchItemFailures)).toEqual([]);
    for (const ws of workspaces) {
      const sent = (jobs.get(ws.workspaceId) ?? []).map((j) => j.jobId);
      expect(await remoteCommits(ws)).toEqual(sent);
      expect(await remoteFile(ws)).toBe(ws.lines.map((l) => `${l}\n`).join(''));
      expect((await ledger.listWorkspaceJobs(ws.workspaceId)).map((j) => [j.jobId, j.status])).toEqual([
        ...sent.map((id) => [id, 'SUCCEEDED']),
        ...(ws === first ? [[tests.jobId, 'FORWARDED']] : []),
      ]);
    }
    const head = (await ledger.getWorkspace(first.workspaceId))?.head;
    const stage = await drain(sqs(), emulators().queueUrls['run-tests'] as string);
    expect(stage).toHaveLength(1);
    expect(JSON.parse(stage[0]?.Body ?? '{}')).toEqual({
      ...tests,
      pin: { sha: head, repoUrl: first.repoUrl, branch: 'main' },
    });
    expect(attr(stage[0] as Message, 'jobId')).toBe(tests.jobId);
    // The stage queue is a fair queue: the forward names the tenant as its group (fauxqs takes it but does not return it).
    expect(sends.to(emulators().queueUrls['run-tests'] as string).map((s) => s.MessageGroupId)).toEqual([TENANT]);
    expect(metrics.filter((m) => m.metric === 'JobSucceeded')).toHaveLength(12);
  });

  it('acknowledges a duplicate delivery without a second commit, and re-forwards a staged job with the same pin', async () => {
    const ws = await newWorkspace();
    const patch = patchJob(ws);
    const tests: JobEnvelope = {
      jobId: `job-${randomUUID()}`,
      workspaceId: ws.workspaceId,
      tenantId: TENANT,
      type: 'run_tests',
      createdAt: '2026-01-01T00:00:00Z',
      payload: {},
    };
    await send(patch);
    await send(tests);
    const handler = createSequencer(deps());
    const arn = await queueArn(sqs(), queueUrl());
    const delivered: Message[] = [];
    // Deliver each message twice, as SQS may: the second delivery of each is a redelivery.
    for (let batch = await receive(sqs(), queueUrl()); batch.length > 0; batch = await receive(sqs(), queueUrl())) {
      expect(await handler({ Records: batch.map((m) => toSqsRecord(m, arn)) })).toEqual({ batchItemFailures: [] });
      expect(await deliver(sqs(), queueUrl(), arn, batch, handler)).toEqual({ batchItemFailures: [] });
      delivered.push(...batch);
    }

    expect(delivered).toHaveLength(2);
    expect(await remoteCommits(ws)).toEqual([patch.jobId]);
    expect(await ledger.getJob(patch.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      attempt: 1,
      result: { alreadyApplied: false },
    });
    const forwarded = await drain(sqs(), emulators().queueUrls['run-tests'] as string);
    const pins = forwarded.map((m) => JSON.parse(m.Body ?? '{}').pin);
    expect(pins).toHaveLength(2);
    expect(pins[1]).toEqual(pins[0]);
    expect(pins[0]).toMatchObject({ sha: (await ledger.getWorkspace(ws.workspaceId))?.head });
  });

  it('leaves a forwarded job that its stage failed to the stage: a late redelivery does not dead-letter it, and reports the recorded outcome again (the stage may have died before its event)', async () => {
    const ws = await newWorkspace();
    const patch = patchJob(ws);
    const pr: JobEnvelope = {
      jobId: `job-${randomUUID()}`,
      workspaceId: ws.workspaceId,
      tenantId: TENANT,
      type: 'open_pr',
      createdAt: '2026-01-01T00:00:00Z',
      payload: { baseBranch: 'main', title: 'agent work' },
    };
    const handler = createSequencer(deps());
    const arn = await queueArn(sqs(), queueUrl());
    await send(patch);
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler });
    await send(pr);
    const forwarded = await receive(sqs(), queueUrl());
    expect(forwarded).toHaveLength(1);
    expect(await deliver(sqs(), queueUrl(), arn, forwarded, handler)).toEqual({ batchItemFailures: [] });
    // The open_pr stage takes the job and fails it (it goes to the stage's DLQ there).
    const pin = (await ledger.getJob(pr.jobId))?.pin;
    const stage = {
      job: pr,
      digest: jobDigest(pr),
      owner: randomUUID(),
      now: Date.now(),
      leaseMs: LEASE_SECONDS * 1000,
      consumer: 'stage' as const,
      pin,
    };
    expect((await ledger.claim(stage)).kind).toBe('claimed');
    const failure = { reason: 'REJECTED_BY_TARGET', message: 'no commits between main and main' };
    await ledger.complete({
      jobId: pr.jobId,
      owner: stage.owner,
      now: Date.now(),
      verdict: { status: 'FAILED', error: failure },
    });

    // The sequencer's acknowledgement of the forward was lost: SQS delivers the FIFO message again.
    expect(await handler({ Records: forwarded.map((m) => toSqsRecord(m, arn)) })).toEqual({ batchItemFailures: [] });

    expect(await drain(sqs(), dlqUrl())).toEqual([]);
    expect(await eventsOf(pr.jobId)).toEqual([
      expect.objectContaining({
        type: 'AgentJobFailed',
        detail: expect.objectContaining({ jobId: pr.jobId, reason: 'REJECTED_BY_TARGET' }),
      }),
    ]);
    expect(await drain(sqs(), emulators().queueUrls['open-pr'] as string)).toHaveLength(1);
    expect(await ledger.getJob(pr.jobId)).toMatchObject({ status: 'FAILED', error: failure, attempt: 1 });
  });

  it('publishes the outcome again when the event was lost after the verdict was recorded (events are at least once)', async () => {
    const ws = await newWorkspace();
    const patch = patchJob(ws);
    await send(patch);
    let failNext = true;
    const flakyBus = {
      publish: async (type: Parameters<JsonlEventLog['publish']>[0], detail: Record<string, unknown>) => {
        if (failNext) {
          failNext = false;
          throw new TransientJobError('event bus unavailable');
        }
        await events.publish(type, detail);
      },
    };
    const { batches } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer({ ...deps(), events: flakyBus }),
    });

    expect(batches).toBe(2);
    expect(await remoteCommits(ws)).toEqual([patch.jobId]);
    expect(await ledger.getJob(patch.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
    expect((await eventsOf(patch.jobId)).map((e) => e.type)).toEqual(['AgentJobSucceeded']);
    expect(metrics.filter((m) => m.metric === 'JobSucceeded')).toHaveLength(1);
  });

  it('never runs a job twice when its visibility expires while it runs', async () => {
    const ws = await newWorkspace();
    const job = patchJob(ws);
    await send(job);
    const held = gitHolding(job.jobId);
    const arn = await queueArn(sqs(), queueUrl());
    const firstBatch = await receive(sqs(), queueUrl());
    const firstRun = deliver(sqs(), queueUrl(), arn, firstBatch, createSequencer(deps({ git: held.git })));
    await held.entered;

    // The visibility timeout runs out while the first worker is still inside git.
    await sqs().send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl(),
        ReceiptHandle: firstBatch[0]?.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const secondBatch = await receive(sqs(), queueUrl());
    expect(secondBatch.map((m) => m.MessageId)).toEqual(firstBatch.map((m) => m.MessageId));
    const second = await deliver(sqs(), queueUrl(), arn, secondBatch, createSequencer(deps()));
    expect(second.batchItemFailures).toEqual([{ itemIdentifier: secondBatch[0]?.MessageId }]);

    held.release();
    expect((await firstRun).batchItemFailures).toEqual([]);
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });
    expect(await remoteCommits(ws)).toEqual([job.jobId]);
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
  });

  it('finds the pushed commit after a crash between the push and the ledger completion', async () => {
    const ws = await newWorkspace();
    const crashing = patchJob(ws);
    const next = patchJob(ws);
    await send(crashing);
    await send(next);
    let crashed = false;
    const crashOnce: Ledger = Object.assign(Object.create(ledger) as DynamoDbLedger, {
      complete: async (input: Parameters<Ledger['complete']>[0]) => {
        if (input.jobId === crashing.jobId && !crashed) {
          crashed = true;
          // The worker dies here (its last act a failed ledger write); by the redelivery its lease has run out.
          clockOffset += LEASE_SECONDS * 1000;
          throw Object.assign(new Error('worker crashed'), { code: 'ECONNRESET' });
        }
        return ledger.complete(input);
      },
    });

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps({ ledger: crashOnce })) });

    expect(crashed).toBe(true);
    expect(await remoteCommits(ws)).toEqual([crashing.jobId, next.jobId]);
    expect(await ledger.getJob(crashing.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      attempt: 2,
      result: { alreadyApplied: true },
    });
    expect(await ledger.getJob(next.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  });

  it('needs no ledger reads on the happy path: five writes per apply_patch', async () => {
    const ws = await newWorkspace();
    await send(patchJob(ws));
    const operations: string[] = [];
    const client = DynamoDBDocumentClient.from(new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb)));
    client.middlewareStack.add(
      (next, context) => async (args) => {
        operations.push(context.commandName ?? 'unknown');
        return next(args);
      },
      { step: 'initialize' },
    );
    const counted = new DynamoDbLedger({ client, tableName: emulators().tableName, retentionDays: 30 });

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps({ ledger: counted })) });
    client.destroy();

    // claim, the branch's binding (one workspace per branch), cursor, head + cursor done, complete
    expect(operations).toEqual([
      'UpdateItemCommand',
      'UpdateItemCommand',
      'UpdateItemCommand',
      'UpdateItemCommand',
      'UpdateItemCommand',
    ]);
  });

  it('applies a claim-checked diff read from the diff store', async () => {
    const ws = await newWorkspace();
    const job = patchJob(ws);
    const { diff, ...payload } = job.payload;
    const diffRef = await new S3DiffStore(emulators().clients.s3, emulators().bucketName).put(
      `${ws.workspaceId}/${job.jobId}`,
      Buffer.from(diff as string),
    );
    await send({ ...job, payload: { ...payload, diffRef } });

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await remoteCommits(ws)).toEqual([job.jobId]);
    expect(await remoteFile(ws)).toBe('line 0\nline 1\n');
  });

  it('keeps the original of a reused jobId and sends the conflicting message to the DLQ', async () => {
    const ws = await newWorkspace();
    const original = patchJob(ws);
    await send(original);
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });
    const reused = { ...original, payload: { ...original.payload, message: 'something else' } };
    // Sent after the dedup window would have passed: a fresh dedup id.
    await sqs().send(
      new SendMessageCommand({
        QueueUrl: queueUrl(),
        MessageBody: JSON.stringify(reused),
        MessageGroupId: messageGroupId(ws.workspaceId),
        MessageDeduplicationId: deduplicationId(`${original.jobId}-later`, 'apply_patch'),
        MessageAttributes: Object.fromEntries(
          Object.entries(jobAttributes(reused)).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
        ),
      }),
    );

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await ledger.getJob(original.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { alreadyApplied: false },
    });
    const dlq = await drain(sqs(), dlqUrl());
    expect(dlq.map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([[original.jobId, 'CONFLICT']]);
    expect(JSON.parse(dlq[0]?.Body ?? '{}')).toEqual(reused);
    expect((await eventsOf(original.jobId)).map((e) => [e.type, e.detail['reason']])).toEqual([
      ['AgentJobSucceeded', undefined],
      ['AgentJobFailed', 'CONFLICT'],
    ]);
    expect(await remoteCommits(ws)).toEqual([original.jobId]);
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
  });

  it('retries a poison message with its back-off when the DLQ send fails', async () => {
    const body = '{"jobId": "not-a-job"}';
    await sqs().send(
      new SendMessageCommand({
        QueueUrl: queueUrl(),
        MessageBody: body,
        MessageGroupId: 'ws#poison',
        MessageDeduplicationId: randomUUID(),
      }),
    );
    const base = deps();
    const { queueOps, backoffs } = dlqDownOnce(base.queueOps);

    const { responses } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer({ ...base, queueOps }),
    });

    expect(responses.map((r) => r.batchItemFailures.length)).toEqual([1, 0]);
    expect(backoffs).toEqual([0]);
    expect((await drain(sqs(), dlqUrl())).map((m) => [m.Body, attr(m, 'reason')])).toEqual([[body, 'INVALID_JOB']]);
    expect(metrics).toEqual([{ metric: 'JobFailed', jobType: undefined }]);
  });

  it('moves a poison message to the DLQ with the reason and acknowledges it', async () => {
    await sqs().send(
      new SendMessageCommand({
        QueueUrl: queueUrl(),
        MessageBody: '{"jobId": not json',
        MessageGroupId: 'ws#poison',
        MessageDeduplicationId: randomUUID(),
      }),
    );

    const { responses } = await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(responses).toEqual([{ batchItemFailures: [] }]);
    const dlq = await drain(sqs(), dlqUrl());
    expect(dlq).toHaveLength(1);
    expect(dlq[0]?.Body).toBe('{"jobId": not json');
    expect(attr(dlq[0] as Message, 'reason')).toBe('INVALID_JOB');
    expect(attr(dlq[0] as Message, 'errorMessage')).toMatch(/not JSON/);
    expect(dlq[0]?.Attributes?.['MessageGroupId']).toBe('ws#poison');
  });

  it('fences the workspace when a patch no longer applies: later jobs are SKIPPED and wait on the DLQ in order', async () => {
    const ws = await newWorkspace();
    const good = patchJob(ws);
    const bad = patchJob(ws, appendDiff(['line that is not there'], 'never'));
    const later = [patchJob(ws), patchJob(ws)];
    for (const job of [good, bad, ...later]) await send(job);

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await remoteCommits(ws)).toEqual([good.jobId]);
    expect(await ledger.getJob(bad.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'PATCH_DOES_NOT_APPLY' },
    });
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: bad.jobId,
      blockedReason: 'PATCH_DOES_NOT_APPLY',
    });
    for (const job of later)
      expect(await ledger.getJob(job.jobId)).toMatchObject({
        status: 'SKIPPED',
        blockedBy: bad.jobId,
        error: { reason: 'SKIPPED' },
      });
    const dlq = await drain(sqs(), dlqUrl());
    expect(dlq.map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([
      [bad.jobId, 'PATCH_DOES_NOT_APPLY'],
      ...later.map((j) => [j.jobId, 'SKIPPED']),
    ]);
    expect(dlq.every((m) => m.Attributes?.['MessageGroupId'] === messageGroupId(ws.workspaceId))).toBe(true);
    // The skipped jobs keep their place in the workspace's order, for a replay.
    expect((await ledger.listWorkspaceJobs(ws.workspaceId)).map((j) => j.jobId)).toEqual(
      [good, bad, ...later].map((j) => j.jobId),
    );
    // The fence goes up before the failure is reported, so no later job can slip through.
    expect((await eventsOf(bad.jobId)).map((e) => e.type)).toEqual([
      'WorkspaceBlocked',
      'AgentJobFailed',
      'AgentJobSkipped',
      'AgentJobSkipped',
    ]);
    expect(metrics.map((m) => m.metric).sort()).toEqual([
      'JobFailed',
      'JobSkipped',
      'JobSkipped',
      'JobSucceeded',
      'WorkspaceBlocked',
    ]);
  });

  it('runs the skipped jobs in their original order when an operator unblocks and redrives them', async () => {
    const ws = await newWorkspace();
    const bad = patchJob(ws, appendDiff(['line that is not there'], 'never'));
    const skipped = [patchJob(ws), patchJob(ws)];
    for (const job of [bad, ...skipped]) await send(job);
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });
    const dlq = await drain(sqs(), dlqUrl());

    // What `workspace unblock --replay` does: lift the fence, send the SKIPPED messages back.
    await ledger.unblockWorkspace(ws.workspaceId, Date.now());
    await redrive(dlq.filter((m) => attr(m, 'reason') === 'SKIPPED'));
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await remoteCommits(ws)).toEqual(skipped.map((j) => j.jobId));
    for (const job of skipped)
      expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 2 });
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'ACTIVE',
      currentJobId: skipped[1]?.jobId,
      currentDone: true,
    });
    expect(await drain(sqs(), dlqUrl())).toEqual([]);
  });

  it('retries with its back-off when the DLQ send after a recorded failure fails, and finishes the move on the redelivery', async () => {
    const ws = await newWorkspace();
    const bad = patchJob(ws, appendDiff(['line that is not there'], 'never'));
    await send(bad);
    const base = deps();
    const { queueOps, backoffs } = dlqDownOnce(base.queueOps);

    const { responses } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer({ ...base, queueOps }),
    });

    expect(responses.map((r) => r.batchItemFailures.length)).toEqual([1, 0]);
    expect(backoffs).toEqual([0]);
    expect(await ledger.getJob(bad.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      error: { reason: 'PATCH_DOES_NOT_APPLY' },
    });
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: bad.jobId });
    expect((await drain(sqs(), dlqUrl())).map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([
      [bad.jobId, 'PATCH_DOES_NOT_APPLY'],
    ]);
    expect((await eventsOf(bad.jobId)).map((e) => e.type)).toEqual(['WorkspaceBlocked', 'AgentJobFailed']);
  });

  it('acknowledges a job cancelled before it ran without running it or moving the cursor', async () => {
    const ws = await newWorkspace();
    const cancelled = patchJob(ws);
    // As the CLI sends: recorded QUEUED first, so a cancel before its turn finds it.
    await ledger.recordQueued({ job: cancelled, digest: jobDigest(cancelled), now: Date.now() });
    await send(cancelled);
    expect(await ledger.cancel(cancelled.jobId, Date.now())).toMatchObject({ cancelled: true, previous: 'QUEUED' });

    const { responses } = await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(responses).toEqual([{ batchItemFailures: [] }]);
    expect(await remoteCommits(ws)).toEqual([]);
    expect(await ledger.getJob(cancelled.jobId)).toMatchObject({ status: 'CANCELLED' });
    expect(await ledger.getWorkspace(ws.workspaceId)).toBeUndefined();
  });

  it('turns a transient error into RETRIES_EXHAUSTED on the last allowed receive and fences the workspace', async () => {
    const ws = await newWorkspace();
    const stuck = patchJob(ws);
    const after = patchJob(ws);
    await send(stuck);
    await send(after);
    let attempts = 0;
    const flakyGit = gitExceptFor(stuck.jobId, async () => {
      attempts++;
      throw new TransientJobError('remote answered 503');
    });

    const { responses } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer(deps({ git: flakyGit })),
    });

    expect(attempts).toBe(5);
    expect(responses.filter((r) => r.batchItemFailures.length > 0)).toHaveLength(4);
    expect(await ledger.getJob(stuck.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'RETRIES_EXHAUSTED' },
    });
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: stuck.jobId });
    expect(await ledger.getJob(after.jobId)).toMatchObject({ status: 'SKIPPED', blockedBy: stuck.jobId });
    expect((await drain(sqs(), dlqUrl())).map((m) => attr(m, 'reason'))).toEqual(['RETRIES_EXHAUSTED', 'SKIPPED']);
    expect(await remoteCommits(ws)).toEqual([]);
  });

  it('recognises as applied, when redriven, a job that pushed its commit and then ran out of retries before recording it', async () => {
    const ws = await newWorkspace();
    const pushed = patchJob(ws);
    const after = patchJob(ws);
    await send(pushed);
    await send(after);
    let attempts = 0;
    // The first attempt's push lands and its worker fails after it (the chaos run r5000: a lease
    // lost to a pause, then a ledger 500 on the last receive); every later attempt fails before git.
    const pushThenFail = gitExceptFor(pushed.jobId, async (request, real) => {
      if (attempts++ === 0) await real.commitPatch(request);
      throw new TransientJobError('remote answered 503');
    });
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps({ git: pushThenFail })) });
    expect(await ledger.getJob(pushed.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'RETRIES_EXHAUSTED' },
    });
    expect(await remoteCommits(ws)).toEqual([pushed.jobId]);

    // The operator's remedy (README, failure reasons): unblock, redrive in order.
    await ledger.unblockWorkspace(ws.workspaceId, Date.now());
    await redrive(await drain(sqs(), dlqUrl()));
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await ledger.getJob(pushed.jobId)).toMatchObject({ status: 'SUCCEEDED', result: { alreadyApplied: true } });
    expect(await ledger.getJob(after.jobId)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await remoteCommits(ws)).toEqual([pushed.jobId, after.jobId]);
  });

  it('fails a job whose error no retry can cure (a 4xx from the ledger) at once, and fences the workspace so no later job runs past it', async () => {
    const ws = await newWorkspace();
    const poisoned = patchJob(ws);
    const after = patchJob(ws);
    await send(poisoned);
    await send(after);
    // Shaped as the AWS SDK throws it; fault injection: dynalite has no way to refuse one item so.
    const refusing: Ledger = Object.assign(Object.create(ledger) as DynamoDbLedger, {
      claim: async (request: Parameters<Ledger['claim']>[0]) => {
        if (request.job.jobId === poisoned.jobId) {
          throw Object.assign(new Error('Item size has exceeded the maximum allowed size'), {
            name: 'ValidationException',
            $fault: 'client',
            $metadata: { httpStatusCode: 400 },
          });
        }
        return ledger.claim(request);
      },
    });

    const { responses } = await driveQueue({
      sqs: sqs(),
      queueUrl: queueUrl(),
      handler: createSequencer(deps({ ledger: refusing })),
    });

    expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: poisoned.jobId,
      blockedReason: 'UNEXPECTED_ERROR',
    });
    expect(await ledger.getJob(after.jobId)).toMatchObject({ status: 'SKIPPED', blockedBy: poisoned.jobId });
    expect((await drain(sqs(), dlqUrl())).map((m) => [attr(m, 'reason'), attr(m, 'errorMessage')])).toEqual([
      [
        'UNEXPECTED_ERROR',
        'ValidationException: Item size has exceeded the maximum allowed size (retrying cannot cure it)',
      ],
      ['SKIPPED', expect.any(String)],
    ]);
    expect(await remoteCommits(ws)).toEqual([]);
  });

  it('fences the workspace when the previous job left the queue without a verdict', async () => {
    const ws = await newWorkspace();
    const lost = patchJob(ws);
    const next = patchJob(ws);
    // A worker took `lost` and died on every delivery until SQS's redrive removed it.
    await ledger.takeWorkspace({
      workspaceId: ws.workspaceId,
      jobId: lost.jobId,
      repo: lost.payload.repo,
      now: Date.now(),
    });
    await send(next);

    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });

    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: lost.jobId,
      blockedReason: 'PREDECESSOR_UNFINISHED',
    });
    expect(await ledger.getJob(next.jobId)).toMatchObject({ status: 'SKIPPED', blockedBy: lost.jobId });
    expect((await drain(sqs(), dlqUrl())).map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([
      [next.jobId, 'SKIPPED'],
    ]);
    expect(await remoteCommits(ws)).toEqual([]);
  });

  /** Makes a received message visible again at once, as SQS does when its visibility or back-off ends. */
  const comeBack = (message: Message | undefined) =>
    sqs().send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: queueUrl(),
        ReceiptHandle: message?.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );

  it('waits for a previous job still at work whose message ran out of receives meanwhile, instead of fencing the workspace by a job that did not fail', async () => {
    const ws = await newWorkspace();
    const slow = patchJob(ws);
    const next = patchJob(ws);
    await send(slow);
    await send(next);
    const held = gitHolding(slow.jobId);
    const arn = await queueArn(sqs(), queueUrl());
    let batch = await receive(sqs(), queueUrl());
    const holder = deliver(sqs(), queueUrl(), arn, batch, createSequencer(deps({ git: held.git })));
    await held.entered;
    // While its worker is inside git, the message comes back on every receive SQS allows: each
    // delivery finds the job leased and backs off, and the queue's redrive policy then moves it to
    // the DLQ, which lets the next job of the FIFO group through.
    for (let receives = 2; receives <= SEQUENCER.maxReceiveCount; receives++) {
      await comeBack(batch[0]);
      batch = await receive(sqs(), queueUrl());
      expect((await deliver(sqs(), queueUrl(), arn, batch, createSequencer(deps()))).batchItemFailures).toEqual([
        { itemIdentifier: batch[0]?.MessageId },
      ]);
    }
    await comeBack(batch[0]);
    batch = await receive(sqs(), queueUrl());
    expect(batch.map((m) => attr(m, 'jobId'))).toEqual([next.jobId]);

    const early = await deliver(sqs(), queueUrl(), arn, batch, createSequencer(deps()));

    expect(early.batchItemFailures).toEqual([{ itemIdentifier: batch[0]?.MessageId }]);
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
    held.release();
    expect((await holder).batchItemFailures).toEqual([]);
    await comeBack(batch[0]);
    await driveQueue({ sqs: sqs(), queueUrl: queueUrl(), handler: createSequencer(deps()) });
    expect(await ledger.getJob(slow.jobId)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await ledger.getJob(next.jobId)).toMatchObject({ status: 'SUCCEEDED' });
    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
    expect(await remoteCommits(ws)).toEqual([slow.jobId, next.jobId]);
    // The redriven copy of the job that then succeeded: no reason, nothing was recorded for it.
    expect((await drain(sqs(), dlqUrl())).map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([
      [slow.jobId, undefined],
    ]);
  });

  it('fences the workspace on its last allowed receive when the previous job is still unfinished then: the wait is bounded', async () => {
    const ws = await newWorkspace();
    const lost = patchJob(ws);
    const next = patchJob(ws);
    // A worker holds `lost` (claimed, the cursor taken) and never finishes it; its message is gone.
    await ledger.claim({
      job: lost,
      digest: jobDigest(lost),
      owner: 'stuck-worker',
      now: Date.now(),
      leaseMs: LEASE_SECONDS * 1000,
      consumer: 'sequencer',
    });
    await ledger.takeWorkspace({
      workspaceId: ws.workspaceId,
      jobId: lost.jobId,
      repo: lost.payload.repo,
      now: Date.now(),
    });
    await send(next);
    const arn = await queueArn(sqs(), queueUrl());

    for (let receives = 1; receives < SEQUENCER.maxReceiveCount; receives++) {
      const batch = await receive(sqs(), queueUrl());
      expect((await deliver(sqs(), queueUrl(), arn, batch, createSequencer(deps()))).batchItemFailures).toEqual([
        { itemIdentifier: batch[0]?.MessageId },
      ]);
      expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({ state: 'ACTIVE' });
      await comeBack(batch[0]);
    }
    const last = await receive(sqs(), queueUrl());
    expect((await deliver(sqs(), queueUrl(), arn, last, createSequencer(deps()))).batchItemFailures).toEqual([]);

    expect(await ledger.getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: lost.jobId,
      blockedReason: 'PREDECESSOR_UNFINISHED',
    });
    expect(await ledger.getJob(next.jobId)).toMatchObject({ status: 'SKIPPED', blockedBy: lost.jobId });
    expect((await drain(sqs(), dlqUrl())).map((m) => [attr(m, 'jobId'), attr(m, 'reason')])).toEqual([
      [next.jobId, 'SKIPPED'],
    ]);
  });
});
