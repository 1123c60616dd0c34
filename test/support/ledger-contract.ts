/**
 * The ledger contract: one set of cases every Ledger must pass. test/integration/ledger.test.ts runs
 * it against DynamoDbLedger on the emulator of its lane (dynalite, or DynamoDB Local), and
 * test/unit/memory-ledger.test.ts against the in-memory ledger the unit tests use, so the fake
 * cannot drift from the adapter it stands in for.
 *
 * Every case uses fresh job and workspace ids: the cases share one table.
 */
import { randomUUID } from 'node:crypto';
import { jobDigest, type JobEnvelope } from '../../src/core/envelope';
import { LeaseLostError } from '../../src/core/errors';
import type { ClaimRequest, JobVerdict, Ledger } from '../../src/core/ports';

export interface LedgerUnderTest {
  readonly ledger: Ledger;
  /** Runs `between` once, right after the next refused claim write (a race: before the record is read, where it is). */
  onNextRefusedClaim(between: () => Promise<void>): void;
}

/**
 * How the ledger under test learns the record that refused a claim: from the refusal itself
 * (DynamoDB returns the item its condition saw, atomically), or by reading it after the refusal
 * (an emulator that returns none, and the in-memory ledger that mirrors it). A write between the
 * refusal and the read is then seen; with the refused item it never is.
 */
export type RefusedClaimSees = 'the refused item' | 'a read after the refusal';

const NOW = Date.parse('2026-01-01T00:00:00Z');
const LEASE_MS = 60_000;
const PIN = { sha: 'a'.repeat(40), repoUrl: 'http://127.0.0.1:1/r.git', branch: 'main' };
const FAILED: JobVerdict = { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: 'FAULT' } };
const SKIPPED: JobVerdict = { status: 'SKIPPED', blockedBy: 'job-0', error: { reason: 'SKIPPED', message: 'blocked' } };

export function newJob(overrides: Partial<JobEnvelope> = {}): JobEnvelope {
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

export function claimOf(job: JobEnvelope, overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return {
    job,
    digest: jobDigest(job),
    owner: randomUUID(),
    now: NOW,
    leaseMs: LEASE_MS,
    consumer: 'sequencer',
    ...overrides,
  };
}

/** A job the sequencer pinned, claimed by its stage with build `buildId` recorded and RUNNING until `dueAt`. */
export async function runningJob(ledger: Ledger, buildId: string, dueAt: number): Promise<JobEnvelope> {
  const job = newJob();
  const pinning = claimOf(job);
  await ledger.claim(pinning);
  await ledger.complete({
    jobId: job.jobId,
    owner: pinning.owner,
    now: NOW,
    verdict: { status: 'FORWARDED', pin: PIN },
  });
  const stage = claimOf(job, { consumer: 'stage', pin: PIN });
  expect((await ledger.claim(stage)).kind).toBe('claimed');
  await ledger.recordProgress({ jobId: job.jobId, owner: stage.owner, progress: { buildId }, now: NOW });
  await ledger.complete({
    jobId: job.jobId,
    owner: stage.owner,
    now: NOW,
    verdict: { status: 'RUNNING', dueAt, stageMessage: JSON.stringify({ ...job, pin: PIN }) },
  });
  return job;
}

export function describeLedgerContract(name: string, sees: RefusedClaimSees, setup: () => LedgerUnderTest): void {
  describe(`ledger contract: ${name}`, () => {
    let subject: LedgerUnderTest;
    let ledger: Ledger;

    beforeAll(() => {
      subject = setup();
      ledger = subject.ledger;
    });

    /** The operator's redrive of `job`: a token recorded on the job (when it is FAILED or SKIPPED), then a claim carrying it. */
    async function redriven(job: JobEnvelope, overrides: Partial<ClaimRequest> = {}): Promise<ClaimRequest> {
      const token = randomUUID();
      await ledger.authorizeRedrive({ jobId: job.jobId, token, now: NOW });
      return claimOf(job, { ...overrides, redriveToken: token });
    }

    /** Claims the job and records `verdict` for it; returns the claim. */
    async function settle(
      job: JobEnvelope,
      verdict: JobVerdict,
      workspace?: { workspaceId: string; seq: number },
    ): Promise<ClaimRequest> {
      const claim = claimOf(job);
      expect((await ledger.claim(claim)).kind).toBe('claimed');
      await ledger.complete({ jobId: job.jobId, owner: claim.owner, now: NOW, verdict, workspace });
      return claim;
    }

    describe('claim', () => {
      it('lets exactly one of 20 concurrent claims win; the others see a live lease', async () => {
        const job = newJob();
        const outcomes = await Promise.all(Array.from({ length: 20 }, () => ledger.claim(claimOf(job))));
        expect(outcomes.filter((o) => o.kind === 'claimed')).toHaveLength(1);
        expect(outcomes.filter((o) => o.kind === 'busy')).toHaveLength(19);
        expect(await ledger.getJob(job.jobId)).toMatchObject({
          status: 'IN_FLIGHT',
          attempt: 1,
          digest: jobDigest(job),
          workspaceId: job.workspaceId,
          type: job.type,
        });
      });

      it('takes over an expired lease and fences the old owner out of every write', async () => {
        const job = newJob();
        const first = claimOf(job);
        await ledger.claim(first);
        const second = claimOf(job, { now: NOW + LEASE_MS });
        expect(await ledger.claim(second)).toMatchObject({
          kind: 'claimed',
          record: { attempt: 2, leaseOwner: second.owner, leaseUntil: NOW + 2 * LEASE_MS },
        });

        const stale = { jobId: job.jobId, owner: first.owner, now: NOW };
        await expect(
          ledger.complete({ ...stale, verdict: { status: 'SUCCEEDED', result: { by: 'first' } } }),
        ).rejects.toBeInstanceOf(LeaseLostError);
        await expect(ledger.heartbeat({ ...stale, leaseUntil: NOW + 3 * LEASE_MS })).rejects.toBeInstanceOf(
          LeaseLostError,
        );
        await expect(ledger.release(stale)).rejects.toBeInstanceOf(LeaseLostError);
        await expect(ledger.recordProgress({ ...stale, progress: { buildId: 'b' } })).rejects.toBeInstanceOf(
          LeaseLostError,
        );
        const done = await ledger.complete({
          jobId: job.jobId,
          owner: second.owner,
          now: NOW + 1,
          verdict: { status: 'SUCCEEDED', result: { by: 'second' } },
        });
        expect(done).toMatchObject({
          status: 'SUCCEEDED',
          result: { by: 'second' },
          leaseOwner: second.owner,
          attempt: 2,
        });
        expect(done).not.toHaveProperty('leaseUntil');
        expect(done.ttl).toBe(Math.floor((NOW + LEASE_MS) / 1000) + 30 * 86_400);
      });

      it("records each attempt's start: the claim's time, again at a takeover and at a redrive, never at a heartbeat or a verdict", async () => {
        const job = newJob();
        const first = claimOf(job);
        expect(await ledger.claim(first)).toMatchObject({
          kind: 'claimed',
          record: { startedAt: new Date(NOW).toISOString() },
        });
        await ledger.heartbeat({
          jobId: job.jobId,
          owner: first.owner,
          leaseUntil: NOW + LEASE_MS + 10,
          now: NOW + 10,
        });
        const second = claimOf(job, { now: NOW + 2 * LEASE_MS });
        expect(await ledger.claim(second)).toMatchObject({
          kind: 'claimed',
          record: { startedAt: new Date(NOW + 2 * LEASE_MS).toISOString() },
        });
        const failed = await ledger.complete({
          jobId: job.jobId,
          owner: second.owner,
          now: NOW + 2 * LEASE_MS + 50,
          verdict: FAILED,
        });
        expect(failed).toMatchObject({
          startedAt: new Date(NOW + 2 * LEASE_MS).toISOString(),
          updatedAt: new Date(NOW + 2 * LEASE_MS + 50).toISOString(),
        });
        const rerun = await ledger.claim(await redriven(job, { now: NOW + 10 * LEASE_MS }));
        expect(rerun).toMatchObject({
          kind: 'claimed',
          record: { startedAt: new Date(NOW + 10 * LEASE_MS).toISOString(), createdAt: job.createdAt },
        });
      });

      it('keeps the turns a job had before when it is run again at a new one, in order', async () => {
        const job = newJob();
        await settle(job, SKIPPED, { workspaceId: job.workspaceId, seq: 2 });
        for (const [seq, previousSeq] of [
          [6, 2],
          [9, 6],
        ] as const) {
          const rerun = await redriven(job);
          expect(await ledger.claim(rerun)).toMatchObject({ kind: 'claimed', record: { wsSeq: previousSeq } });
          await ledger.complete({
            jobId: job.jobId,
            owner: rerun.owner,
            now: NOW,
            verdict: SKIPPED,
            workspace: { workspaceId: job.workspaceId, seq, previousSeq },
          });
        }
        expect(await ledger.getJob(job.jobId)).toMatchObject({ wsSeq: 9, earlierSeqs: [2, 6] });
        const page = await ledger.pageWorkspaceJobs(job.workspaceId, { order: 'oldest', limit: 10 });
        expect(page.jobs.map((j) => [j.jobId, j.wsSeq])).toEqual([[job.jobId, 9]]);
      });

      it('extends a lease with a heartbeat so no one takes the job over', async () => {
        const job = newJob();
        const first = claimOf(job);
        await ledger.claim(first);
        await ledger.heartbeat({ jobId: job.jobId, owner: first.owner, leaseUntil: NOW + 3 * LEASE_MS, now: NOW });
        expect((await ledger.claim(claimOf(job, { now: NOW + 2 * LEASE_MS }))).kind).toBe('busy');
      });

      it('lets the next delivery claim at once after a release', async () => {
        const job = newJob();
        const first = claimOf(job);
        await ledger.claim(first);
        await ledger.release({ jobId: job.jobId, owner: first.owner, now: NOW + 5 });
        expect(await ledger.claim(claimOf(job, { now: NOW + 5 }))).toMatchObject({
          kind: 'claimed',
          record: { attempt: 2 },
        });
      });

      it('answers a redelivery of a finished job with the stored result, and a reused jobId with a conflict', async () => {
        const job = newJob();
        await settle(job, { status: 'SUCCEEDED', result: { exitCode: 0 } });

        expect(await ledger.claim(claimOf(job, { now: NOW + 10 * LEASE_MS }))).toMatchObject({
          kind: 'duplicate',
          record: { result: { exitCode: 0 } },
        });
        expect((await ledger.claim(await redriven(job))).kind).toBe('duplicate');
        const reused = await ledger.claim(claimOf({ ...job, payload: { command: 'rm -rf /' } } as JobEnvelope));
        expect(reused).toMatchObject({ kind: 'conflict', record: { status: 'SUCCEEDED' } });
        expect(await ledger.getJob(job.jobId)).toMatchObject({ digest: jobDigest(job), result: { exitCode: 0 } });
      });

      it('reports a different request under the same jobId as a conflict whatever the record, even under an expired lease', async () => {
        const job = newJob();
        const other = { ...job, payload: { command: 'other' } } as JobEnvelope;
        await ledger.claim(claimOf(job));
        expect((await ledger.claim(claimOf(other, { now: NOW + 2 * LEASE_MS }))).kind).toBe('conflict');
        const failed = newJob();
        await settle(failed, FAILED);
        expect((await ledger.claim(await redriven({ ...failed, payload: {} } as JobEnvelope))).kind).toBe('conflict');
      });

      it('never runs a FAILED or SKIPPED job again on an ordinary redelivery; a redrive runs it afresh', async () => {
        for (const verdict of [FAILED, SKIPPED]) {
          const job = newJob();
          const first = await settle(job, verdict);
          expect(await ledger.claim(claimOf(job))).toMatchObject({
            kind: 'finished',
            record: { status: verdict.status },
          });
          // Never pinned by the sequencer: no stage consumer may take it.
          expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN }))).kind).toBe('unpinned');

          const rerun = await ledger.claim(await redriven(job));
          expect(rerun).toMatchObject({ kind: 'claimed', record: { status: 'IN_FLIGHT', attempt: 2 } });
          expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('error');
          expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('blockedBy');
          await expect(
            ledger.complete({ jobId: job.jobId, owner: first.owner, now: NOW, verdict }),
          ).rejects.toBeInstanceOf(LeaseLostError);
        }
      });

      it('reruns a FAILED or SKIPPED job only for a claim carrying the token its redrive recorded, which the claim consumes', async () => {
        for (const verdict of [FAILED, SKIPPED]) {
          const job = newJob();
          await settle(job, verdict);
          expect(await ledger.authorizeRedrive({ jobId: job.jobId, token: 'the-operators', now: NOW })).toMatchObject({
            status: verdict.status,
            redriveToken: 'the-operators',
          });

          // The attribute without the recorded token (a forgery, or a stale copy) is an ordinary redelivery.
          expect((await ledger.claim(claimOf(job, { redriveToken: 'forged' }))).kind).toBe('finished');
          expect(await ledger.getJob(job.jobId)).toMatchObject({
            status: verdict.status,
            attempt: 1,
            error: { reason: verdict.status === 'FAILED' ? 'TEST_RUN_ERROR' : 'SKIPPED' },
          });

          const rerun = await ledger.claim(claimOf(job, { redriveToken: 'the-operators' }));
          expect(rerun).toMatchObject({ kind: 'claimed', record: { attempt: 2 } });
          expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('redriveToken');
        }
      });

      it('records a redrive only for a FAILED or SKIPPED job', async () => {
        const succeeded = newJob();
        await settle(succeeded, { status: 'SUCCEEDED', result: {} });
        const running = newJob();
        await ledger.claim(claimOf(running));

        for (const job of [succeeded, running, newJob()])
          expect(await ledger.authorizeRedrive({ jobId: job.jobId, token: 't', now: NOW })).toBeUndefined();
        expect(await ledger.getJob(succeeded.jobId)).not.toHaveProperty('redriveToken');
        expect(await ledger.getJob(running.jobId)).not.toHaveProperty('redriveToken');
      });

      it('keeps the progress of a run for a takeover of its expired lease, and drops it when a redrive runs a FAILED job again', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        const first = claimOf(job, { consumer: 'stage', pin: PIN });
        await ledger.claim(first);
        const progress = { buildId: 'build-1' };
        await ledger.recordProgress({ jobId: job.jobId, owner: first.owner, progress, now: NOW });
        const resumed = await ledger.claim(await redriven(job, { consumer: 'stage', pin: PIN, now: NOW + LEASE_MS }));
        // The stage's second attempt (pinning by the sequencer is not one).
        expect(resumed).toMatchObject({ kind: 'claimed', record: { progress, attempt: 2 } });

        const failedBy = resumed.kind === 'claimed' ? resumed.record.leaseOwner : undefined;
        await ledger.complete({ jobId: job.jobId, owner: failedBy ?? '', now: NOW, verdict: FAILED });
        expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'FAILED', progress });
        const rerun = await ledger.claim(await redriven(job, { consumer: 'stage', pin: PIN }));
        expect(rerun).toMatchObject({ kind: 'claimed', record: { status: 'IN_FLIGHT', attempt: 3 } });
        expect(rerun.kind === 'claimed' && rerun.record).not.toHaveProperty('progress');
      });

      it('hands a FORWARDED job to the stage consumer with its pin and place kept; the sequencer re-forwards it', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN }, { workspaceId: job.workspaceId, seq: 7 });

        expect(await ledger.claim(claimOf(job))).toMatchObject({ kind: 'forwarded', record: { pin: PIN } });
        // Pinning is not an attempt at the job: its stage counts its own.
        expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'FORWARDED', attempt: 0 });
        const staged = await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN }));
        expect(staged).toMatchObject({
          kind: 'claimed',
          record: { status: 'IN_FLIGHT', pin: PIN, wsSeq: 7, attempt: 1 },
        });
      });

      it('leaves a pinned job its stage consumer took to the stage, running or finished', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        const stage = claimOf(job, { consumer: 'stage', pin: PIN });
        await ledger.claim(stage);
        expect((await ledger.claim(claimOf(job))).kind).toBe('staged');
        expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN }))).kind).toBe('busy');

        await ledger.complete({
          jobId: job.jobId,
          owner: stage.owner,
          now: NOW,
          verdict: { status: 'SUCCEEDED', result: { verdict: 'passed' } },
        });
        expect(await ledger.claim(claimOf(job))).toMatchObject({
          kind: 'staged',
          record: { status: 'SUCCEEDED', pin: PIN },
        });
        expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN }))).kind).toBe('duplicate');
      });

      it('lets a stage consumer take only what the sequencer pinned: no record, another pin or another request is unpinned and changes nothing', async () => {
        const unseen = newJob();
        expect(await ledger.claim(claimOf(unseen, { consumer: 'stage', pin: PIN }))).toMatchObject({
          kind: 'unpinned',
          why: expect.stringMatching(/never pinned/),
        });
        expect(await ledger.getJob(unseen.jobId)).toBeUndefined();

        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        const before = await ledger.getJob(job.jobId);
        for (const [claim, why] of [
          [claimOf(job, { consumer: 'stage', pin: { ...PIN, sha: 'b'.repeat(40) } }), /pin\.sha differs/],
          [
            claimOf(job, { consumer: 'stage', pin: { ...PIN, repoUrl: 'http://127.0.0.1:2/other.git' } }),
            /pin\.repoUrl differs/,
          ],
          [claimOf(job, { consumer: 'stage', pin: { ...PIN, branch: 'other' } }), /pin\.branch differs/],
          [
            claimOf({ ...job, payload: { command: 'forged' } } as JobEnvelope, { consumer: 'stage', pin: PIN }),
            /differs from the request/,
          ],
          [claimOf(job, { consumer: 'stage' }), /carries no pin/],
          [
            claimOf(job, { consumer: 'stage', pin: { ...PIN, sha: 'b'.repeat(40) }, redriveToken: 'any' }),
            /pin\.sha differs/,
          ],
        ] as const) {
          expect(await ledger.claim(claim)).toMatchObject({ kind: 'unpinned', why: expect.stringMatching(why) });
        }
        expect(await ledger.getJob(job.jobId)).toEqual(before);
      });

      it('never lets the sequencer take a pinned job back from its stage, even after the stage lease ran out: it re-forwards it', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        const stage = claimOf(job, { consumer: 'stage', pin: PIN });
        await ledger.claim(stage);

        const late = await ledger.claim(claimOf(job, { now: NOW + LEASE_MS }));

        expect(late).toMatchObject({
          kind: 'forwarded',
          record: { status: 'IN_FLIGHT', pin: PIN, leaseOwner: stage.owner },
        });
        expect((await ledger.claim(await redriven(job, { now: NOW + LEASE_MS }))).kind).toBe('forwarded');
        // The stage takes its own expired lease over, pin and place kept.
        expect(await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN, now: NOW + LEASE_MS }))).toMatchObject({
          kind: 'claimed',
          record: { pin: PIN, attempt: 2 },
        });
      });

      /** A job under a live lease, and a second claim of it whose refusal `race` follows at once. */
      async function claimRefusedThen(race: (job: JobEnvelope, holder: ClaimRequest) => Promise<void>) {
        const job = newJob();
        const holder = claimOf(job);
        await ledger.claim(holder);
        subject.onNextRefusedClaim(() => race(job, holder));
        return { job, holder, outcome: await ledger.claim(claimOf(job)) };
      }
      const release = (job: JobEnvelope, holder: ClaimRequest) =>
        ledger.release({ jobId: job.jobId, owner: holder.owner, now: NOW });
      const succeed = async (job: JobEnvelope, holder: ClaimRequest) => {
        await ledger.complete({
          jobId: job.jobId,
          owner: holder.owner,
          now: NOW,
          verdict: { status: 'SUCCEEDED', result: { raced: true } },
        });
      };

      if (sees === 'a read after the refusal') {
        it('claims a record that became claimable between the refused write and the read', async () => {
          const { outcome } = await claimRefusedThen(release);
          expect(outcome).toMatchObject({ kind: 'claimed', record: { attempt: 2 } });
        });

        it('reports the verdict written between the refused write and the read', async () => {
          const { outcome } = await claimRefusedThen(succeed);
          expect(outcome).toMatchObject({ kind: 'duplicate', record: { result: { raced: true } } });
        });
      } else {
        it('answers a refused claim from the record as its condition saw it, not as a release right after left it', async () => {
          const { job, holder, outcome } = await claimRefusedThen(release);
          expect(outcome).toMatchObject({
            kind: 'busy',
            record: { leaseOwner: holder.owner, leaseUntil: NOW + LEASE_MS },
          });
          expect(await ledger.claim(claimOf(job))).toMatchObject({ kind: 'claimed', record: { attempt: 2 } });
        });

        it('reports the live lease that refused a claim, not the verdict written right after', async () => {
          const { job, holder, outcome } = await claimRefusedThen(succeed);
          expect(outcome).toMatchObject({ kind: 'busy', record: { status: 'IN_FLIGHT', leaseOwner: holder.owner } });
          expect(await ledger.claim(claimOf(job))).toMatchObject({
            kind: 'duplicate',
            record: { result: { raced: true } },
          });
        });
      }
    });

    describe('queued', () => {
      it('records a job QUEUED before it is sent; its claim takes the record, a resend finds it, another request conflicts', async () => {
        const job = newJob();
        expect(await ledger.recordQueued({ job, digest: jobDigest(job), now: NOW })).toMatchObject({
          kind: 'queued',
          record: { status: 'QUEUED', attempt: 0 },
        });
        expect(await ledger.recordQueued({ job, digest: jobDigest(job), now: NOW + 1 })).toMatchObject({
          kind: 'known',
          record: { status: 'QUEUED' },
        });

        const other = { ...job, payload: { command: 'rm -rf /' } } as JobEnvelope;
        expect(await ledger.claim(claimOf(other))).toMatchObject({ kind: 'conflict', record: { status: 'QUEUED' } });
        expect(await ledger.claim(claimOf(job))).toMatchObject({
          kind: 'claimed',
          record: { status: 'IN_FLIGHT', attempt: 1 },
        });
        expect(await ledger.recordQueued({ job, digest: jobDigest(job), now: NOW + 2 })).toMatchObject({
          kind: 'known',
          record: { status: 'IN_FLIGHT' },
        });
      });
    });

    describe('cancel', () => {
      it('cancels a QUEUED job (its delivery is then a no-op) and knows no job it was never told of', async () => {
        const queued = newJob();
        await ledger.recordQueued({ job: queued, digest: jobDigest(queued), now: NOW });
        expect(await ledger.cancel(queued.jobId, NOW)).toMatchObject({
          cancelled: true,
          previous: 'QUEUED',
          record: { status: 'CANCELLED', jobId: queued.jobId },
        });
        expect((await ledger.claim(claimOf(queued))).kind).toBe('cancelled');
        expect((await ledger.claim(await redriven(queued, { consumer: 'stage', pin: PIN }))).kind).toBe('cancelled');

        const unknown = `never-${randomUUID()}`;
        expect(await ledger.cancel(unknown, NOW)).toEqual({ cancelled: false, record: undefined });
        expect(await ledger.getJob(unknown)).toBeUndefined();
      });

      it('cancels a FORWARDED job before its stage takes it', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        expect(await ledger.cancel(job.jobId, NOW)).toMatchObject({ cancelled: true, previous: 'FORWARDED' });
        expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN }))).kind).toBe('cancelled');
        // A late FIFO redelivery is acknowledged as well.
        expect((await ledger.claim(claimOf(job))).kind).toBe('cancelled');
      });

      it('cancels a SKIPPED job, never a running or finished one', async () => {
        const skipped = newJob();
        await settle(skipped, SKIPPED);
        expect(await ledger.cancel(skipped.jobId, NOW)).toMatchObject({ cancelled: true, previous: 'SKIPPED' });
        expect((await ledger.claim(await redriven(skipped))).kind).toBe('cancelled');

        const running = newJob();
        await ledger.claim(claimOf(running));
        expect(await ledger.cancel(running.jobId, NOW)).toMatchObject({
          cancelled: false,
          record: { status: 'IN_FLIGHT' },
        });
        const done = newJob();
        await settle(done, { status: 'SUCCEEDED', result: {} });
        expect(await ledger.cancel(done.jobId, NOW)).toMatchObject({
          cancelled: false,
          record: { status: 'SUCCEEDED' },
        });
      });
    });

    describe('dismiss', () => {
      const dismissal = { by: 'alice', reason: 'dealt with', at: new Date(NOW).toISOString() };
      const onDlqList = async (jobId: string) =>
        (await ledger.listDlq()).some((e) => e.kind === 'job' && e.record.jobId === jobId);

      it('records a FAILED job as dealt with, once: it leaves the DLQ list, keeps its failure, and is never redriven', async () => {
        const job = newJob();
        await settle(job, FAILED);
        expect(await onDlqList(job.jobId)).toBe(true);

        const first = await ledger.dismiss({ jobId: job.jobId, dismissal, now: NOW });
        const retried = await ledger.dismiss({
          jobId: job.jobId,
          dismissal: { ...dismissal, by: 'bob' },
          now: NOW + 1,
        });

        expect(first).toMatchObject({
          kind: 'dismissed',
          record: { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR' }, dismissed: dismissal },
        });
        expect(retried).toMatchObject({ kind: 'already', record: { dismissed: dismissal } });
        expect(await onDlqList(job.jobId)).toBe(false);
        expect(await ledger.authorizeRedrive({ jobId: job.jobId, token: 't', now: NOW })).toBeUndefined();
      });

      it('revokes a redrive on its way: its delivery is an ordinary redelivery of a finished job', async () => {
        const job = newJob();
        await settle(job, FAILED);
        const redrive = await redriven(job);
        await ledger.dismiss({ jobId: job.jobId, dismissal, now: NOW });
        expect((await ledger.claim(redrive)).kind).toBe('finished');
      });

      it('refuses what is not a reported failure: a SKIPPED or SUCCEEDED job, a failure still being reported, an unknown id', async () => {
        const skipped = newJob();
        await settle(skipped, SKIPPED);
        expect(await ledger.dismiss({ jobId: skipped.jobId, dismissal, now: NOW })).toMatchObject({
          kind: 'refused',
          record: { status: 'SKIPPED' },
        });
        const done = newJob();
        await settle(done, { status: 'SUCCEEDED', result: {} });
        expect(await ledger.dismiss({ jobId: done.jobId, dismissal, now: NOW })).toMatchObject({
          kind: 'refused',
          record: { status: 'SUCCEEDED' },
        });
        const reporting = await runningJob(ledger, 'b-1', NOW);
        await ledger.finishBuild({
          jobId: reporting.jobId,
          buildId: 'b-1',
          verdict: FAILED as Extract<JobVerdict, { status: 'FAILED' }>,
          now: NOW,
          reportBy: NOW + 1_000,
        });
        expect(await ledger.dismiss({ jobId: reporting.jobId, dismissal, now: NOW })).toMatchObject({
          kind: 'refused',
          record: { status: 'FAILED' },
        });
        await ledger.markReported({ jobId: reporting.jobId, buildId: 'b-1', now: NOW });
        expect((await ledger.dismiss({ jobId: reporting.jobId, dismissal, now: NOW })).kind).toBe('dismissed');
        expect(await ledger.dismiss({ jobId: `never-${randomUUID()}`, dismissal, now: NOW })).toEqual({
          kind: 'refused',
          record: undefined,
        });
      });
    });

    describe('command-stage builds', () => {
      const running = (buildId: string, dueAt: number) => runningJob(ledger, buildId, dueAt);
      const dueIds = async (now: number, ids: readonly string[]) =>
        (await ledger.listDue(now, 100)).map((r) => r.jobId).filter((id) => ids.includes(id));
      const PASSED: Extract<JobVerdict, { status: 'SUCCEEDED' }> = {
        status: 'SUCCEEDED',
        result: { verdict: 'passed' },
      };

      it('records the verdict once, fenced on the recorded build and RUNNING; the job stays due until reported', async () => {
        const job = await running('b-1', NOW + 10_000);
        expect(await ledger.getJob(job.jobId)).toMatchObject({
          status: 'RUNNING',
          dueAt: NOW + 10_000,
          progress: { buildId: 'b-1' },
        });

        expect(
          await ledger.finishBuild({
            jobId: job.jobId,
            buildId: 'b-other',
            verdict: PASSED,
            now: NOW,
            reportBy: NOW + 500,
          }),
        ).toMatchObject({ kind: 'refused', record: { status: 'RUNNING' } });
        expect(
          await ledger.finishBuild({
            jobId: job.jobId,
            buildId: 'b-1',
            verdict: PASSED,
            now: NOW,
            reportBy: NOW + 500,
          }),
        ).toMatchObject({ kind: 'finished', record: { status: 'SUCCEEDED', result: PASSED.result, dueAt: NOW + 500 } });
        expect(
          await ledger.finishBuild({
            jobId: job.jobId,
            buildId: 'b-1',
            verdict: FAILED as typeof PASSED,
            now: NOW,
            reportBy: NOW,
          }),
        ).toMatchObject({ kind: 'refused', record: { status: 'SUCCEEDED' } });
        expect(await dueIds(NOW + 500, [job.jobId])).toEqual([job.jobId]);

        await ledger.markReported({ jobId: job.jobId, buildId: 'b-1', now: NOW + 1 });
        const reported = await ledger.getJob(job.jobId);
        expect(reported).toMatchObject({ status: 'SUCCEEDED', reportedAt: new Date(NOW + 1).toISOString() });
        expect(reported?.dueAt).toBeUndefined();
        expect(await dueIds(NOW + 10 ** 9, [job.jobId])).toEqual([]);
        expect(
          await ledger.finishBuild({ jobId: 'job-unknown', buildId: 'b-1', verdict: PASSED, now: NOW, reportBy: NOW }),
        ).toEqual({ kind: 'refused', record: undefined });
      });

      it('lists due jobs by due time, and a postponed one only once due again', async () => {
        const late = await running('b-late', NOW + 2_000);
        const early = await running('b-early', NOW + 1_000);
        const notYet = await running('b-not-yet', NOW + 9_000);
        const ids = [late.jobId, early.jobId, notYet.jobId];
        expect(await dueIds(NOW + 2_000, ids)).toEqual([early.jobId, late.jobId]);

        await ledger.postponeDue({ jobId: early.jobId, buildId: 'b-early', dueAt: NOW + 5_000, now: NOW + 2_000 });
        await ledger.postponeDue({ jobId: late.jobId, buildId: 'b-stale', dueAt: NOW + 5_000, now: NOW + 2_000 });
        expect(await dueIds(NOW + 2_000, ids)).toEqual([late.jobId]);
        expect(await dueIds(NOW + 5_000, ids)).toEqual([late.jobId, early.jobId]);
      });

      it("a redrive of a FAILED build's job starts a new run: run + 1, the old build and its completion state dropped", async () => {
        const job = await running('b-1', NOW);
        await ledger.finishBuild({
          jobId: job.jobId,
          buildId: 'b-1',
          verdict: FAILED as typeof PASSED,
          now: NOW,
          reportBy: NOW,
        });
        await ledger.markReported({ jobId: job.jobId, buildId: 'b-1', now: NOW });
        const redrive = await redriven(job, { consumer: 'stage', pin: PIN });

        const claimed = await ledger.claim(redrive);

        expect(claimed).toMatchObject({ kind: 'claimed', record: { status: 'IN_FLIGHT', run: 1 } });
        const record = claimed.kind === 'claimed' ? claimed.record : undefined;
        expect([record?.progress, record?.dueAt, record?.stageMessage, record?.reportedAt, record?.error]).toEqual([
          undefined,
          undefined,
          undefined,
          undefined,
          undefined,
        ]);
        // The old run's build can no longer record anything.
        expect(
          (await ledger.finishBuild({ jobId: job.jobId, buildId: 'b-1', verdict: PASSED, now: NOW, reportBy: NOW }))
            .kind,
        ).toBe('refused');
      });

      it('cancels a RUNNING job once: due for the stop of its build, and no completion, postponement or delivery after it changes it', async () => {
        const job = await running('b-1', NOW + 10_000);

        expect(await ledger.cancel(job.jobId, NOW + 1)).toMatchObject({
          cancelled: true,
          previous: 'RUNNING',
          record: { status: 'CANCELLED', progress: { buildId: 'b-1' }, dueAt: NOW + 1 },
        });

        // The build's completion (its event, or the reconciler's) arrives after the cancel: refused.
        expect(
          await ledger.finishBuild({
            jobId: job.jobId,
            buildId: 'b-1',
            verdict: PASSED,
            now: NOW + 2,
            reportBy: NOW + 2,
          }),
        ).toMatchObject({ kind: 'refused', record: { status: 'CANCELLED' } });
        await ledger.postponeDue({ jobId: job.jobId, buildId: 'b-1', dueAt: NOW + 99_000, now: NOW + 2 });
        expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN, now: NOW + 3 }))).kind).toBe(
          'cancelled',
        );
        // A cancel sent again changes nothing.
        expect(await ledger.cancel(job.jobId, NOW + 4)).toMatchObject({
          cancelled: false,
          record: { status: 'CANCELLED', updatedAt: new Date(NOW + 1).toISOString() },
        });
        expect(await dueIds(NOW + 5, [job.jobId])).toEqual([job.jobId]);
        expect((await ledger.listOpenJobs(job.workspaceId)).map((j) => j.jobId)).toEqual([]);

        await ledger.markBuildStopped({ jobId: job.jobId, now: NOW + 6 });
        expect(await dueIds(Number.MAX_SAFE_INTEGER, [job.jobId])).toEqual([]);
        expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'CANCELLED', progress: { buildId: 'b-1' } });
      });

      it('a build that finished before the cancel keeps its verdict: the cancel is refused', async () => {
        const job = await running('b-1', NOW + 10_000);
        await ledger.finishBuild({
          jobId: job.jobId,
          buildId: 'b-1',
          verdict: PASSED,
          now: NOW + 1,
          reportBy: NOW + 1,
        });

        expect(await ledger.cancel(job.jobId, NOW + 2)).toMatchObject({
          cancelled: false,
          record: { status: 'SUCCEEDED' },
        });
        await ledger.markBuildStopped({ jobId: job.jobId, now: NOW + 3 });
        expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', dueAt: NOW + 1 });
      });

      it('a stage starting a build: refused until the build is recorded, then cancelled and the stage fenced out; with no live lease, cancelled', async () => {
        const job = newJob();
        await settle(job, { status: 'FORWARDED', pin: PIN });
        const stage = claimOf(job, { consumer: 'stage', pin: PIN });
        await ledger.claim(stage);
        expect(await ledger.cancel(job.jobId, NOW + 1)).toMatchObject({
          cancelled: false,
          record: { status: 'IN_FLIGHT' },
        });

        await ledger.recordProgress({
          jobId: job.jobId,
          owner: stage.owner,
          progress: { buildId: 'b-1' },
          now: NOW + 2,
        });
        expect(await ledger.cancel(job.jobId, NOW + 3)).toMatchObject({
          cancelled: true,
          previous: 'IN_FLIGHT',
          record: { status: 'CANCELLED', progress: { buildId: 'b-1' } },
        });
        const stageMessage = JSON.stringify({ ...job, pin: PIN });
        await expect(
          ledger.complete({
            jobId: job.jobId,
            owner: stage.owner,
            now: NOW + 4,
            verdict: { status: 'RUNNING', dueAt: NOW + 9, stageMessage },
          }),
        ).rejects.toBeInstanceOf(LeaseLostError);

        // Its lease ran out (a retry, a wait for a build slot): nobody is starting a build.
        const waiting = newJob();
        await settle(waiting, { status: 'FORWARDED', pin: PIN });
        await ledger.claim(claimOf(waiting, { consumer: 'stage', pin: PIN }));
        expect(await ledger.cancel(waiting.jobId, NOW + LEASE_MS + 1)).toMatchObject({
          cancelled: true,
          previous: 'IN_FLIGHT',
        });
        expect(
          (await ledger.claim(claimOf(waiting, { consumer: 'stage', pin: PIN, now: NOW + LEASE_MS + 2 }))).kind,
        ).toBe('cancelled');
      });

      it('a stage delivery of a RUNNING job is acknowledged as running, never claimed', async () => {
        const job = await running('b-1', NOW + 1_000);
        expect((await ledger.claim(claimOf(job, { consumer: 'stage', pin: PIN, now: NOW + LEASE_MS * 10 }))).kind).toBe(
          'running',
        );
        expect((await ledger.claim(await redriven(job, { consumer: 'stage', pin: PIN }))).kind).toBe('running');
        expect((await ledger.claim(claimOf(job))).kind).toBe('staged');
      });
    });

    describe('unfinished jobs', () => {
      it('lists the jobs without an outcome (QUEUED, IN_FLIGHT, FORWARDED), oldest first, and nothing else', async () => {
        const queued = newJob({ createdAt: '2025-12-30T00:00:00Z' });
        await ledger.recordQueued({ job: queued, digest: jobDigest(queued), now: NOW });
        const running = newJob({ createdAt: '2025-12-31T00:00:00Z' });
        await ledger.claim(claimOf(running));
        const forwarded = newJob({ createdAt: '2025-12-31T00:00:01Z' });
        await settle(forwarded, { status: 'FORWARDED', pin: PIN }, { workspaceId: forwarded.workspaceId, seq: 1 });
        const finished = [newJob(), newJob(), newJob()];
        await settle(finished[0]!, { status: 'SUCCEEDED', result: {} });
        await settle(finished[1]!, FAILED);
        await settle(finished[2]!, SKIPPED);
        await ledger.cancel(`job-${randomUUID()}`, NOW);
        await ledger.takeWorkspace({ workspaceId: running.workspaceId, jobId: running.jobId, now: NOW });

        const listed = await ledger.listUnfinished();

        const ids = listed.map((j) => j.jobId);
        expect(ids.filter((id) => [queued.jobId, running.jobId, forwarded.jobId].includes(id))).toEqual([
          queued.jobId,
          running.jobId,
          forwarded.jobId,
        ]);
        for (const job of finished) expect(ids).not.toContain(job.jobId);
        expect(listed.every((j) => ['QUEUED', 'IN_FLIGHT', 'FORWARDED'].includes(j.status))).toBe(true);
        expect(listed.find((j) => j.jobId === forwarded.jobId)).toMatchObject({
          status: 'FORWARDED',
          pin: PIN,
          workspaceId: forwarded.workspaceId,
        });
      });
    });

    describe('conflicts', () => {
      it('records each distinct conflicting request once, beside the original, and lists the ones on a DLQ', async () => {
        const job = newJob();
        await settle(job, { status: 'SUCCEEDED', result: {} });
        const other = { ...job, payload: { command: 'other' } } as JobEnvelope;
        const third = { ...job, payload: { command: 'third' } } as JobEnvelope;

        await ledger.recordConflict({ job: other, digest: jobDigest(other), seenBy: 'enqueue', now: NOW });
        await ledger.recordConflict({ job: other, digest: jobDigest(other), seenBy: 'enqueue', now: NOW + 1 });
        await ledger.recordConflict({ job: third, digest: jobDigest(third), seenBy: 'sequencer', now: NOW + 2 });

        expect(await ledger.getConflicts(job.jobId)).toEqual([
          expect.objectContaining({ jobId: job.jobId, seenBy: 'enqueue', at: new Date(NOW).toISOString() }),
          expect.objectContaining({ jobId: job.jobId, seenBy: 'sequencer', at: new Date(NOW + 2).toISOString() }),
        ]);
        expect(await ledger.getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', digest: jobDigest(job) });
        const onDlq = (await ledger.listDlq()).filter((e) => e.kind === 'conflict' && e.attempt.jobId === job.jobId);
        expect(onDlq).toEqual([{ kind: 'conflict', attempt: expect.objectContaining({ seenBy: 'sequencer' }) }]);
        expect(await ledger.getConflicts(`never-${randomUUID()}`)).toEqual([]);
        const never = `never-${randomUUID()}`;
        const many = await ledger.getConflictsOf([never, job.jobId]);
        expect([...many.keys()]).toEqual([job.jobId]);
        expect(many.get(job.jobId)).toEqual(await ledger.getConflicts(job.jobId));
      });
    });

    describe('lists', () => {
      it('lists a workspace, its unfinished jobs, and the jobs waiting on a DLQ until a redrive or a cancel takes them off', async () => {
        const workspaceId = `ws-${randomUUID()}`;
        const [queued, running, forwarded, done, failed, skipped] = ['q', 'r', 'f', 'd', 'x', 's'].map((id) =>
          newJob({ jobId: `${id}-${randomUUID()}`, workspaceId }),
        ) as [JobEnvelope, JobEnvelope, JobEnvelope, JobEnvelope, JobEnvelope, JobEnvelope];
        await ledger.recordQueued({ job: queued, digest: jobDigest(queued), now: NOW });
        await ledger.claim(claimOf(running));
        await settle(forwarded, { status: 'FORWARDED', pin: PIN });
        await settle(done, { status: 'SUCCEEDED', result: {} });
        await settle(failed, FAILED);
        await settle(skipped, SKIPPED);
        await ledger.takeWorkspace({ workspaceId, jobId: queued.jobId, now: NOW });

        const ids = (records: readonly { jobId: string }[]) => records.map((r) => r.jobId).sort();
        expect(ids(await ledger.listOpenJobs(workspaceId))).toEqual(ids([queued, running, forwarded]));
        const dlqJobs = async () =>
          (await ledger.listDlq()).flatMap((e) =>
            e.kind === 'job' && e.record.workspaceId === workspaceId ? [e.record] : [],
          );
        expect(ids(await dlqJobs())).toEqual(ids([failed, skipped]));
        expect((await ledger.listWorkspaces()).filter((w) => w.workspaceId === workspaceId)).toEqual([
          expect.objectContaining({ workspaceId, state: 'ACTIVE' }),
        ]);

        // A redriven delivery takes the FAILED job off the DLQ list; a cancel takes the SKIPPED one off.
        expect((await ledger.claim(await redriven(failed))).kind).toBe('claimed');
        await ledger.cancel(skipped.jobId, NOW);
        expect(await dlqJobs()).toEqual([]);
        expect(ids(await ledger.listOpenJobs(workspaceId))).toEqual(ids([queued, running, forwarded, failed]));
        expect(await ledger.listOpenJobs(`ws-${randomUUID()}`)).toEqual([]);
      });
    });

    describe('a cancel before the turn', () => {
      it("keeps a job cancelled while QUEUED on its workspace's open list, which alone shows it; a job cancelled after its turn leaves it", async () => {
        const workspaceId = `ws-${randomUUID()}`;
        const [queued, forwarded, open] = ['q', 'f', 'o'].map((id) =>
          newJob({ jobId: `${id}-${randomUUID()}`, workspaceId }),
        ) as [JobEnvelope, JobEnvelope, JobEnvelope];
        await ledger.recordQueued({ job: queued, digest: jobDigest(queued), now: NOW });
        await ledger.recordQueued({ job: open, digest: jobDigest(open), now: NOW });
        await settle(forwarded, { status: 'FORWARDED', pin: PIN });

        expect(await ledger.cancel(queued.jobId, NOW + 1)).toMatchObject({ cancelled: true, previous: 'QUEUED' });
        expect(await ledger.cancel(forwarded.jobId, NOW + 1)).toMatchObject({ cancelled: true, previous: 'FORWARDED' });

        const listed = (await ledger.listOpenJobs(workspaceId)).map((j) => [j.jobId, j.status]).sort();
        expect(listed).toEqual(
          [
            [open.jobId, 'QUEUED'],
            [queued.jobId, 'CANCELLED'],
          ].sort(),
        );
      });
    });

    describe('workspace cursor', () => {
      it('moves in order, fences on an unfinished predecessor and lists jobs in the order taken', async () => {
        const workspaceId = `ws-${randomUUID()}`;
        const repo = { url: 'http://127.0.0.1:1/r.git', branch: 'main' };
        const jobs = ['a', 'b', 'c'].map((id) => newJob({ jobId: `${id}-${randomUUID()}`, workspaceId }));
        const [a, b, c] = jobs as [JobEnvelope, JobEnvelope, JobEnvelope];

        expect(await ledger.takeWorkspace({ workspaceId, jobId: a.jobId, repo, now: NOW })).toMatchObject({
          kind: 'taken',
          workspace: { seq: 1, currentJobId: a.jobId, currentDone: false, state: 'ACTIVE', repo },
        });
        // A redelivery of the job holding the cursor runs again without moving it.
        expect(await ledger.takeWorkspace({ workspaceId, jobId: a.jobId, now: NOW })).toMatchObject({
          kind: 'taken',
          workspace: { seq: 1 },
        });
        // b finds a unfinished: a left the queue without a verdict.
        expect(await ledger.takeWorkspace({ workspaceId, jobId: b.jobId, now: NOW })).toMatchObject({
          kind: 'predecessorUnfinished',
          predecessor: a.jobId,
        });

        await ledger.finishWorkspaceJob({ workspaceId, jobId: a.jobId, head: 'b'.repeat(40), now: NOW });
        const other = { url: 'http://127.0.0.1:2/other.git', branch: 'other' };
        // Bound to its first repository and branch: a job naming another never takes the cursor.
        expect(await ledger.takeWorkspace({ workspaceId, jobId: b.jobId, repo: other, now: NOW })).toMatchObject({
          kind: 'mismatch',
          workspace: { seq: 1, currentJobId: a.jobId, repo },
        });
        expect(await ledger.takeWorkspace({ workspaceId, jobId: b.jobId, repo, now: NOW })).toMatchObject({
          kind: 'taken',
          workspace: { seq: 2, head: 'b'.repeat(40), repo },
        });
        await expect(ledger.finishWorkspaceJob({ workspaceId, jobId: a.jobId, now: NOW })).rejects.toBeInstanceOf(
          LeaseLostError,
        );

        await ledger.blockWorkspace({ workspaceId, blockedBy: b.jobId, reason: 'PATCH_DOES_NOT_APPLY', now: NOW });
        expect(await ledger.takeWorkspace({ workspaceId, jobId: c.jobId, now: NOW })).toMatchObject({
          kind: 'blocked',
          workspace: { blockedBy: b.jobId, blockedReason: 'PATCH_DOES_NOT_APPLY' },
        });
        expect(await ledger.nextWorkspaceSeq(workspaceId, NOW)).toBe(3);
        const unblocked = await ledger.unblockWorkspace(workspaceId, NOW);
        expect(unblocked).toMatchObject({ state: 'ACTIVE', currentDone: true, seq: 3 });
        expect(unblocked).not.toHaveProperty('blockedBy');
        expect(await ledger.takeWorkspace({ workspaceId, jobId: c.jobId, now: NOW })).toMatchObject({
          kind: 'taken',
          workspace: { seq: 4 },
        });

        // Completed in reverse order: the index still lists them in the workspace's order.
        for (const [index, job] of [...jobs.entries()].reverse())
          await settle(job, { status: 'SUCCEEDED', result: {} }, { workspaceId, seq: index + 1 });
        expect((await ledger.listWorkspaceJobs(workspaceId)).map((j) => j.jobId)).toEqual(jobs.map((j) => j.jobId));
        expect(await ledger.listWorkspaceJobs(`ws-${randomUUID()}`)).toEqual([]);
      });

      it("pages a workspace's jobs in either order from a sequence number, saying whether more follow", async () => {
        const workspaceId = `ws-${randomUUID()}`;
        const jobs = Array.from({ length: 5 }, () => newJob({ workspaceId }));
        // Settled out of order, as stages finish: the pages follow the sequence numbers.
        for (const index of [3, 0, 4, 1, 2])
          await settle(
            jobs[index] as JobEnvelope,
            { status: 'SUCCEEDED', result: {} },
            { workspaceId, seq: index + 1 },
          );
        const ids = (page: { jobs: { jobId: string }[] }) => page.jobs.map((j) => j.jobId);
        const all = jobs.map((j) => j.jobId);

        const first = await ledger.pageWorkspaceJobs(workspaceId, { order: 'oldest', limit: 2 });
        expect({ ids: ids(first), more: first.more }).toEqual({ ids: all.slice(0, 2), more: true });
        const last = await ledger.pageWorkspaceJobs(workspaceId, { order: 'oldest', after: 4, limit: 2 });
        expect({ ids: ids(last), more: last.more }).toEqual({ ids: all.slice(4), more: false });
        const newest = await ledger.pageWorkspaceJobs(workspaceId, { order: 'newest', limit: 3 });
        expect({ ids: ids(newest), more: newest.more }).toEqual({ ids: [...all].reverse().slice(0, 3), more: true });
        const older = await ledger.pageWorkspaceJobs(workspaceId, { order: 'newest', after: 3, limit: 2 });
        expect({ ids: ids(older), more: older.more }).toEqual({ ids: [all[1], all[0]], more: false });
        expect(await ledger.pageWorkspaceJobs(`ws-${randomUUID()}`, { order: 'oldest', limit: 10 })).toEqual({
          jobs: [],
          more: false,
        });
      });

      it('fences a workspace it has never seen, and refuses to unblock one that does not exist', async () => {
        const workspaceId = `ws-${randomUUID()}`;
        await ledger.blockWorkspace({ workspaceId, blockedBy: 'job-x', reason: 'PREDECESSOR_UNFINISHED', now: NOW });
        expect(await ledger.getWorkspace(workspaceId)).toMatchObject({ state: 'BLOCKED', blockedBy: 'job-x', seq: 0 });
        await expect(ledger.unblockWorkspace(`ws-${randomUUID()}`, NOW)).rejects.toThrow();
      });
    });

    describe('branch binding (one workspace per repository branch)', () => {
      const branchOf = (name: string) => ({ url: `http://127.0.0.1:1/${name}.git`, branch: 'agent/work' });

      it('binds a branch to the first workspace that asks; that workspace again is bound, any other (a case variant of its id too) is refused with the holder', async () => {
        const workspaceId = `ws-${randomUUID()}`;
        const repo = branchOf(`r-${randomUUID()}`);

        expect(await ledger.bindBranch({ repo, workspaceId, jobId: 'job-1', now: NOW })).toEqual({ kind: 'bound' });
        expect(await ledger.bindBranch({ repo, workspaceId, jobId: 'job-2', now: NOW + 1 })).toEqual({ kind: 'bound' });
        for (const other of [workspaceId.toUpperCase(), `ws-${randomUUID()}`]) {
          expect(await ledger.bindBranch({ repo, workspaceId: other, jobId: 'job-3', now: NOW + 2 })).toEqual({
            kind: 'taken',
            holder: { workspaceId, jobId: 'job-1' },
          });
        }
      });

      it('takes every spelling of one repository branch for the same binding (".git", a trailing "/", letter case)', async () => {
        const name = `r-${randomUUID()}`;
        const repo = branchOf(name);
        await ledger.bindBranch({ repo, workspaceId: 'ws-holder', jobId: 'job-1', now: NOW });
        for (const spelled of [
          { url: repo.url.replace(/\.git$/, ''), branch: repo.branch },
          { url: `${repo.url}/`, branch: repo.branch },
          { url: repo.url.replace(name, name.toUpperCase()), branch: repo.branch },
          { url: repo.url, branch: 'Agent/Work' },
        ]) {
          expect(
            await ledger.bindBranch({ repo: spelled, workspaceId: 'ws-other', jobId: 'job-2', now: NOW }),
          ).toMatchObject({ kind: 'taken', holder: { workspaceId: 'ws-holder' } });
        }
        // Another branch of the repository is another binding.
        expect(
          await ledger.bindBranch({
            repo: { ...repo, branch: 'agent/other' },
            workspaceId: 'ws-other',
            jobId: 'job-2',
            now: NOW,
          }),
        ).toEqual({ kind: 'bound' });
      });

      it('releases a binding only for the job that made it', async () => {
        const repo = branchOf(`r-${randomUUID()}`);
        await ledger.bindBranch({ repo, workspaceId: 'ws-a', jobId: 'job-1', now: NOW });

        await ledger.releaseBranch({ repo, workspaceId: 'ws-a', jobId: 'job-2' });
        expect(await ledger.bindBranch({ repo, workspaceId: 'ws-b', jobId: 'job-3', now: NOW })).toMatchObject({
          kind: 'taken',
        });

        await ledger.releaseBranch({ repo, workspaceId: 'ws-a', jobId: 'job-1' });
        expect(await ledger.bindBranch({ repo, workspaceId: 'ws-b', jobId: 'job-3', now: NOW })).toEqual({
          kind: 'bound',
        });
      });

      it('hands over a binding whose workspace was bound to another branch since (a claim its first job never completed)', async () => {
        const stale = branchOf(`stale-${randomUUID()}`);
        const elsewhere = branchOf(`elsewhere-${randomUUID()}`);
        const holder = `ws-${randomUUID()}`;
        await ledger.bindBranch({ repo: stale, workspaceId: holder, jobId: 'job-lost', now: NOW });
        expect(
          await ledger.bindBranch({ repo: stale, workspaceId: 'ws-next', jobId: 'job-2', now: NOW }),
        ).toMatchObject({ kind: 'taken' });

        // The holder's next job named another branch, and the workspace was bound to that one.
        await ledger.bindBranch({ repo: elsewhere, workspaceId: holder, jobId: 'job-next', now: NOW });
        await ledger.takeWorkspace({ workspaceId: holder, jobId: 'job-next', repo: elsewhere, now: NOW });

        expect(await ledger.bindBranch({ repo: stale, workspaceId: 'ws-next', jobId: 'job-2', now: NOW })).toEqual({
          kind: 'bound',
        });
        expect(
          await ledger.bindBranch({ repo: elsewhere, workspaceId: 'ws-next', jobId: 'job-2', now: NOW }),
        ).toMatchObject({ kind: 'taken', holder: { workspaceId: holder } });
      });
    });
  });
}
