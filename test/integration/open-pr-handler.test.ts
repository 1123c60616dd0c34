/**
 * open_pr against a loopback fake of GitHub's pulls endpoints (test/support/fake-github.ts): the
 * GitHub adapter over real HTTP, then the handler on the shared pipeline with dynalite + fauxqs.
 */
import { randomUUID } from 'node:crypto';
import { Octokit } from '@octokit/core';
import type { SQSRecord } from 'aws-lambda';
import { GitHubPullRequestHost } from '../../src/adapters/github-pr-host';
import type { StageMessage } from '../../src/core/envelope';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DEFERRAL_ATTRIBUTES } from '../../contract/messages';
import { PermanentJobError, TransientJobError } from '../../src/core/errors';
import { withEmulators } from '../support/emulators';
import { recordSends } from '../support/sqs-sends';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';
import { LEASE_SECONDS, quietLogger, stageHarness, type StageHarness } from './staged-harness';
import { createOpenPrHandler } from '../../src/core/jobs/open-pr';

const REPO_URL = 'https://github.com/acme/widgets.git';
const silent = { debug: quietLogger.debug, info: quietLogger.info, warn: quietLogger.warn, error: quietLogger.error };

function hostFor(github: FakeGitHub, token = 'test-token'): GitHubPullRequestHost {
  return new GitHubPullRequestHost(async () => new Octokit({ auth: token, baseUrl: github.url, log: silent }));
}

describe('GitHubPullRequestHost over HTTP', () => {
  let github: FakeGitHub;
  beforeEach(async () => {
    github = await startFakeGitHub({ branches: ['main'] });
  });
  afterEach(() => github.close());

  const input = (head: string) => ({
    repoUrl: REPO_URL,
    head,
    base: 'main',
    title: `Changes from ${head}`,
    body: 'by the agent',
  });

  it('creates the PR once, then finds it, sending the token', async () => {
    const host = hostFor(github);

    const created = await host.findOrCreate(input('agent/ws-1'));
    const found = await host.findOrCreate(input('agent/ws-1'));

    expect(created).toEqual({ number: 1, url: 'https://github.example/acme/widgets/pull/1', created: true });
    expect(found).toEqual({ ...created, created: false });
    expect(github.pulls('acme', 'widgets')).toEqual([
      expect.objectContaining({ head: 'agent/ws-1', base: 'main', body: 'by the agent' }),
    ]);
    expect(new Set(github.authorizations)).toEqual(new Set(['token test-token']));
  });

  it('finds the PR again when a concurrent create makes GitHub answer 422 "already exists"', async () => {
    const host = hostFor(github);
    await host.findOrCreate(input('agent/ws-1'));
    github.hideNextList();

    await expect(host.findOrCreate(input('agent/ws-1'))).resolves.toEqual({
      number: 1,
      url: expect.any(String),
      created: false,
    });
    expect(github.pulls('acme', 'widgets')).toHaveLength(1);
  });

  it("fails permanently with GitHub's message when the base branch does not exist", async () => {
    const error = await hostFor(github)
      .findOrCreate({ ...input('agent/ws-1'), base: 'release' })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentJobError);
    expect((error as Error).message).toMatch(/\(422\): Validation Failed; .*"field":"base".*"code":"invalid"/);
  });

  it('reports a connection dropped after the create as transient; the retry finds the PR instead of opening a second', async () => {
    const host = hostFor(github);
    github.dropNextCreateResponse();

    await expect(host.findOrCreate(input('agent/ws-1'))).rejects.toBeInstanceOf(TransientJobError);
    await expect(host.findOrCreate(input('agent/ws-1'))).resolves.toMatchObject({ number: 1, created: false });
    expect(github.pulls('acme', 'widgets')).toHaveLength(1);
  });
});

describe('open_pr handler (pipeline + a DynamoDB emulator + fauxqs + fake GitHub)', () => {
  const emulators = withEmulators();
  let github: FakeGitHub;
  let h: StageHarness;

  beforeEach(async () => {
    github = await startFakeGitHub({ branches: ['main'] });
    h = stageHarness(emulators(), 'open_pr');
  });
  afterEach(() => github.close());

  function handler() {
    // One host per handler, as per container: it keeps GitHub's limits.
    const run = createOpenPrHandler({
      ...h.deps,
      host: new GitHubPullRequestHost(
        async () => new Octokit({ auth: 'test-token', baseUrl: github.url, log: silent }),
        { clock: { now: () => h.now } },
      ),
    });
    return (records: SQSRecord[]) => run({ Records: records });
  }

  function job(
    payload: StageMessage<'open_pr'>['payload'] = { baseBranch: 'main', title: 'Agent changes' },
  ): StageMessage<'open_pr'> {
    return {
      jobId: `job-${randomUUID().slice(0, 8)}`,
      workspaceId: 'ws-1',
      tenantId: 't-1',
      type: 'open_pr',
      createdAt: '2026-11-29T11:00:00.000Z',
      payload,
      pin: { sha: 'c'.repeat(40), repoUrl: REPO_URL, branch: 'agent/ws-1' },
    };
  }

  it('opens the PR of the workspace branch and records number and URL in the ledger and the event', async () => {
    const message = job();
    await h.forward(message);

    expect((await h.deliver(handler())).failed).toBe(false);

    // The checks it required, passed at its commit (the harness records them: catalog `requires`).
    const gate = [
      { type: 'run_tests', jobId: `${message.jobId}.run_tests`, verdict: 'run_tests passed', sha: 'c'.repeat(40) },
    ];
    const result = {
      number: 1,
      url: 'https://github.example/acme/widgets/pull/1',
      created: true,
      head: 'agent/ws-1',
      sha: 'c'.repeat(40),
      gate,
    };
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'SUCCEEDED', result });
    expect(h.events).toEqual([
      { type: 'AgentJobSucceeded', detail: expect.objectContaining({ jobId: message.jobId, result }) },
    ]);
  });

  it('repairs a crash after the create on the next delivery, without a second PR', async () => {
    const message = job();
    await h.forward(message);
    github.dropNextCreateResponse();

    const first = await h.deliver(handler());
    // The failed worker's lease runs out before anyone may take the job over.
    h.now += (LEASE_SECONDS + 1) * 1000;
    const second = await h.deliver(handler());

    expect(first.failed).toBe(true);
    expect(second).toEqual({ failed: false, receiveCount: 2 });
    expect(github.pulls('acme', 'widgets')).toHaveLength(1);
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { number: 1, created: false },
    });
    expect(h.events.map((e) => e.type)).toEqual(['AgentJobSucceeded']);
  });

  it('acknowledges a duplicate delivery of an opened PR without calling GitHub', async () => {
    const message = job();
    await h.forward(message);
    await h.deliver(handler());
    const requests = github.authorizations.length;
    await h.sendRaw(JSON.stringify(message));

    expect((await h.deliver(handler())).failed).toBe(false);
    expect(github.authorizations).toHaveLength(requests);
  });

  it('fails a PR GitHub refuses permanently: ledger FAILED, DLQ with the reason, AgentJobFailed', async () => {
    const message = job({ baseBranch: 'release', title: 'Agent changes' });
    await h.forward(message);
    const sends = recordSends(emulators().clients.sqs);

    expect((await h.deliver(handler()).finally(() => sends.stop())).failed).toBe(false);

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'FAILED',
      error: { reason: 'REJECTED_BY_TARGET' },
    });
    // The DLQ copy keeps the tenant's fair-queue group (from the tenantId attribute: fauxqs returns no group).
    expect(sends.to(emulators().dlqUrls['open-pr'] as string).map((s) => s.MessageGroupId)).toEqual([message.tenantId]);
    const dead = (await h.dlqMessages()).find((m) => m.MessageAttributes?.['jobId']?.StringValue === message.jobId);
    expect(dead?.MessageAttributes?.['reason']?.StringValue).toBe('REJECTED_BY_TARGET');
    expect(h.events).toEqual([
      { type: 'AgentJobFailed', detail: expect.objectContaining({ reason: 'REJECTED_BY_TARGET' }) },
    ]);
  });

  it('a 403 with retry-after: 30 (a secondary rate limit) brings the next attempt no earlier than 30 s later, without spending a receive', async () => {
    const message = job();
    await h.forward(message);
    const queueUrl = emulators().queueUrls['open-pr'] as string;
    github.failNext(
      'POST',
      403,
      { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.' },
      { 'retry-after': '30' },
    );
    const sends = recordSends(emulators().clients.sqs);
    const posts = () => github.requests.filter((r) => r.method === 'POST').length;

    const first = await h.deliver(handler()).finally(() => sends.stop());

    // This delivery is acknowledged; the job's next attempt is a copy SQS holds back for 30 s (the
    // harness's back-off is zero, so a retry on the usual back-off would be visible at once).
    expect(first.failed).toBe(false);
    const [copy] = sends.to(queueUrl);
    expect(copy).toMatchObject({
      DelaySeconds: 30,
      MessageBody: JSON.stringify(message),
      MessageGroupId: message.tenantId,
    });
    expect(Number(copy?.MessageAttributes?.[DEFERRAL_ATTRIBUTES.until]?.StringValue)).toBe(h.now + 30_000);
    expect(copy?.MessageAttributes?.[DEFERRAL_ATTRIBUTES.failedReceives]?.StringValue).toBe('0');
    const { Attributes } = await emulators().clients.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'],
      }),
    );
    expect(Attributes).toMatchObject({ ApproximateNumberOfMessages: '0', ApproximateNumberOfMessagesDelayed: '1' });
    // Nothing failed: the lease is released for the copy, GitHub was asked once, nothing reported.
    expect(await h.ledger.getJob(message.jobId)).toMatchObject({ status: 'IN_FLIGHT', leaseUntil: h.now });
    expect(posts()).toBe(1);
    expect(h.events).toEqual([]);
  });

  it("keeps GitHub's time in the container: no request goes out before it, the next job waits too", async () => {
    const limited = job();
    const other = { ...job(), jobId: `${job().jobId}-other` };
    await h.forward(limited);
    const run = handler();
    github.failNext(
      'GET',
      429,
      { message: 'API rate limit exceeded' },
      { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(Math.floor(h.now / 1000) + 600) },
    );
    expect((await h.deliver(run)).failed).toBe(false);
    const requests = github.requests.length;

    await h.forward(other);
    expect((await h.deliver(run)).failed).toBe(false);

    expect(github.requests).toHaveLength(requests);
    expect(await h.ledger.getJob(other.jobId)).toMatchObject({ status: 'IN_FLIGHT' });
  });

  it('retries a GitHub outage and succeeds on the next delivery', async () => {
    const message = job();
    await h.forward(message);
    github.failNext('GET', 503, { message: 'Service Unavailable' });

    expect((await h.deliver(handler())).failed).toBe(true);
    h.now += (LEASE_SECONDS + 1) * 1000;
    expect((await h.deliver(handler())).failed).toBe(false);

    expect(await h.ledger.getJob(message.jobId)).toMatchObject({
      status: 'SUCCEEDED',
      result: { number: 1, created: true },
    });
  });
});
