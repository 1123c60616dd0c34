/**
 * The DynamoDB ledger against dynalite: the conditional writes and the reads after a refused
 * condition, under real concurrency.
 */
import { randomUUID } from 'node:crypto';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { jobDigest, type JobEnvelope } from '../../src/core/envelope';
import { LeaseLostError } from '../../src/core/errors';
import { withEmulators } from '../support/emulators';
import type { ClaimRequest } from '../../src/core/ports';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const LEASE_MS = 60_000;
const PIN = { sha: 'a'.repeat(40), repoUrl: 'http://127.0.0.1:1/r.git', branch: 'main' };

describe('DynamoDbLedger on dynalite', () => {
  const emulators = withEmulators();
  let ledger: DynamoDbLedger;

  beforeAll(() => {
    ledger = new DynamoDbLedger({ client: emulators().clients.dynamodb, tableName: emulators().tableName, retentionDays: 30 });
  });

  function newJob(overrides: Partial<JobEnvelope> = {}): JobEnvelope {
    return {
      jobId: `job-${randomUUID()}`,
      workspaceId: `ws-${randomUUID()}`,
      tenantId: 'tenant-1',
      type: 'run_tests',
      createdAt: '2026-01-01T00:00:00Z',
      payload: { command: 'npm test' },
      ...overrides,
    } as JobEnvelope;
  }

  function claimOf(job: JobEnvelope, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
    return { job, digest: jobDigest(job), owner: randomUUID(), now: NOW, leaseMs: LEASE_MS, consumer: 'sequencer', redrive: false, ...overrides };
  }

  it('lets exactly one of 20 concurrent claims win; the others see a live lease', async () => {
    const job = newJob();
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => ledger.claim(claimOf(job))));
    expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);
    expect(outcomes.filter((o) => o.kind === 'busy')).toHaveLength(19);
    expect((await ledger.getJob(job.jobId))?.attempt).toBe(1);
  });

  it('lets a worker take over an expired lease and fences the old owner out of complete', async () => {
    const job = newJob();
    const first = claimOf(job);
    expect((await ledger.claim(first)).kind).toBe('claimed');
    const second = claimOf(job, { now: NOW + LEASE_MS });
    const takeover = await ledger.claim(second);
    expect(takeover.kind).toBe('claimed');
    expect(takeover.kind === 'claimed' && takeover.record.attempt).toBe(2);

    await expect(ledger.complete({ jobId: job.jobId, owner: first.owner, now: NOW, verdict: { status: 'SUCCEEDED', result: { by: 'first' } } })).rejects.toBeInstanceOf(LeaseLostError);
    await expect(ledger.heartbeat({ jobId: job.jobId, owner: first.owner, leaseUntil: NOW + 2 * LEASE_MS, now: NOW })).rejects.toBeInstanceOf(LeaseLostError);
    const done = await ledger.complete({ jobId: job.jobId, owner: second.owner, now: NOW + 1, verdict: { status: 'SUCCEEDED', result: { by: 'second' } } });
    expect(done).toMatchObject({ status: 'SUCCEEDED', result: { by: 'second' }, leaseOwner: second.owner, attempt: 2 });
    expect(done.ttl).toBe(Math.floor((NOW + LEASE_MS) / 1000) + 30 * 86_400);
  });

  it('extends a lease with a heartbeat so no one takes the job over', async () => {
    const job = newJob();
    const first = claimOf(job);
    await ledger.claim(first);
    await ledger.heartbeat({ jobId: job.jobId, owner: first.owner, leaseUntil: NOW + 3 * LEASE_MS, now: NOW });
    expect((await ledger.claim(claimOf(job, { now: NOW + 2 * LEASE_MS }))).kind).toBe('busy');
  });

  it('answers a redelivery of a finished job with the stored result, and a reused jobId with a conflict', async () => {
    const job = newJob();
    const claim = claimOf(job);
    await ledger.claim(claim);
    await ledger.complete({ jobId: job.jobId, owner: claim.owner, now: NOW, verdict: { status: 'SUCCEEDED', result: { exitCode: 0 } } });

    const again = await ledger.claim(claimOf(job, { now: NOW + 10 * LEASE_MS }));
    expect(again).toMatchObject({ kind: 'duplicate', record: { result: { exitCode: 0 } } });
    const reused = await ledger.claim(claimOf({ ...job, payload: { command: 'rm -rf /' } } as JobEnvelope));
    expect(reused).toMatchObject({ kind: 'conflict', record: { status: 'SUCCEEDED' } });
    expect(await ledger.getJob(job.jobId)).toMatchObject({ digest: jobDigest(job), result: { exitCode: 0 } });
  });

  it('cancels a job not yet seen (its delivery is then a no-op) but never a running one', async () => {
    const unseen = newJob();
    expect(await ledger.cancel(unseen.jobId, NOW)).toEqual({ cancelled: true });
    expect((await ledger.claim(claimOf(unseen))).kind).toBe('cancelled');

    const running = newJob();
    await ledger.claim(claimOf(running));
    expect(await ledger.cancel(running.jobId, NOW)).toMatchObject({ cancelled: false, record: { status: 'IN_FLIGHT' } });
  });

  it('takes a SKIPPED job over only for a redriven delivery', async () => {
    const job = newJob();
    const claim = claimOf(job);
    await ledger.claim(claim);
    await ledger.complete({ jobId: job.jobId, owner: claim.owner, now: NOW, verdict: { status: 'SKIPPED', blockedBy: 'job-0', error: { reason: 'SKIPPED', message: 'blocked' } } });

    expect((await ledger.claim(claimOf(job))).kind).toBe('finished');
    const redriven = await ledger.claim(claimOf(job, { redrive: true }));
    expect(redriven.kind).toBe('claimed');
    expect(redriven.kind === 'claimed' && redriven.record).not.toHaveProperty('blockedBy');
  });

  it('keeps the progress of a run for a takeover of its expired lease, and drops it when a redrive runs a FAILED job again', async () => {
    const job = newJob();
    const first = claimOf(job);
    await ledger.claim(first);
    const progress = { buildId: 'build-1' };
    await ledger.recordProgress({ jobId: job.jobId, owner: first.owner, progress, now: NOW });
    const resumed = await ledger.claim(claimOf(job, { now: NOW + LEASE_MS, redrive: true }));
    expect(resumed).toMatchObject({ kind: 'claimed', record: { progress, attempt: 2 } });

    const failedBy = resumed.kind === 'claimed' ? resumed.record.leaseOwner : undefined;
    await ledger.complete({ jobId: job.jobId, owner: failedBy ?? '', now: NOW, verdict: { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: 'FAULT' } } });
    expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'FAILED', progress });
    expect((await ledger.claim(claimOf(job))).kind).toBe('finished');
    const rerun = await ledger.claim(claimOf(job, { consumer: 'stage', redrive: true }));
    expect(rerun).toMatchObject({ kind: 'claimed', record: { status: 'IN_FLIGHT', attempt: 3 } });
    expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('progress');
    expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('error');
  });

  it('hands a FORWARDED job to the stage consumer with its pin and place kept', async () => {
    const job = newJob();
    const claim = claimOf(job);
    await ledger.claim(claim);
    await ledger.complete({ jobId: job.jobId, owner: claim.owner, now: NOW, verdict: { status: 'FORWARDED', pin: PIN }, workspace: { workspaceId: job.workspaceId, seq: 7 } });

    expect(await ledger.claim(claimOf(job))).toMatchObject({ kind: 'forwarded', record: { pin: PIN } });
    const staged = await ledger.claim(claimOf(job, { consumer: 'stage' }));
    expect(staged).toMatchObject({ kind: 'claimed', record: { status: 'IN_FLIGHT', pin: PIN, wsSeq: 7, attempt: 2 } });
  });

  it('moves the workspace cursor in order, fences on an unfinished predecessor and lists jobs in order', async () => {
    const workspaceId = `ws-${randomUUID()}`;
    const repo = { url: 'http://127.0.0.1:1/r.git', branch: 'main' };
    const jobs = ['a', 'b', 'c'].map((id) => newJob({ jobId: `${id}-${randomUUID()}`, workspaceId }));
    const [a, b, c] = jobs as [JobEnvelope, JobEnvelope, JobEnvelope];

    const takeA = await ledger.takeWorkspace({ workspaceId, jobId: a.jobId, repo, now: NOW });
    expect(takeA).toMatchObject({ kind: 'taken', workspace: { seq: 1, currentJobId: a.jobId, currentDone: false, state: 'ACTIVE', repo } });
    // A redelivery of the job holding the cursor runs again without moving it.
    expect(await ledger.takeWorkspace({ workspaceId, jobId: a.jobId, now: NOW })).toMatchObject({ kind: 'taken', workspace: { seq: 1 } });
    // b finds a unfinished: a left the queue without a verdict.
    expect(await ledger.takeWorkspace({ workspaceId, jobId: b.jobId, now: NOW })).toMatchObject({ kind: 'predecessorUnfinished', predecessor: a.jobId });

    await ledger.finishWorkspaceJob({ workspaceId, jobId: a.jobId, head: 'b'.repeat(40), now: NOW });
    expect(await ledger.takeWorkspace({ workspaceId, jobId: b.jobId, now: NOW })).toMatchObject({ kind: 'taken', workspace: { seq: 2, head: 'b'.repeat(40) } });
    await expect(ledger.finishWorkspaceJob({ workspaceId, jobId: a.jobId, now: NOW })).rejects.toBeInstanceOf(LeaseLostError);

    await ledger.blockWorkspace({ workspaceId, blockedBy: b.jobId, reason: 'PATCH_DOES_NOT_APPLY', now: NOW });
    expect(await ledger.takeWorkspace({ workspaceId, jobId: c.jobId, now: NOW })).toMatchObject({ kind: 'blocked', workspace: { blockedBy: b.jobId } });
    expect(await ledger.unblockWorkspace(workspaceId, NOW)).toMatchObject({ state: 'ACTIVE', currentDone: true });
    expect(await ledger.takeWorkspace({ workspaceId, jobId: c.jobId, now: NOW })).toMatchObject({ kind: 'taken', workspace: { seq: 3 } });

    // Completed in reverse order: the index still lists them in the workspace's order.
    for (const [index, job] of [...jobs.entries()].reverse()) {
      const claim = claimOf(job);
      await ledger.claim(claim);
      await ledger.complete({ jobId: job.jobId, owner: claim.owner, now: NOW, verdict: { status: 'SUCCEEDED', result: {} }, workspace: { workspaceId, seq: index + 1 } });
    }
    expect((await ledger.listWorkspaceJobs(workspaceId)).map((j) => j.jobId)).toEqual(jobs.map((j) => j.jobId));
  });
});
