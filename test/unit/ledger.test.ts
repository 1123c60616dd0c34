import { jobDigest, type JobEnvelope } from '../../src/core/envelope';
import { COMMAND_JOB_TYPES, commandStageOf, JOB_TYPE_NAMES, type JobType } from '../../contract/job-types';
import {
  CANCELLABLE_STATUSES,
  cancelRule,
  canTakeWorkspace,
  claimOutcome,
  conflictQueueOf,
  dlqQueueOf,
  isClaimable,
  takeoverStatuses,
  ttlFor,
  workspaceTakeOutcome,
} from '../../src/core/ledger';
import type { JobRecord, JobStatus, WorkspaceRecord, ClaimRequest } from '../../src/core/ports';

const NOW = 1_700_000_000_000;
const job: JobEnvelope = {
  jobId: 'job-1',
  workspaceId: 'ws-1',
  tenantId: 't-1',
  type: 'run_tests',
  createdAt: '2026-01-01T00:00:00Z',
  payload: { command: 'npm test' },
};
const digest = jobDigest(job);
const PIN = { sha: 'a'.repeat(40), repoUrl: 'http://127.0.0.1/r.git', branch: 'main' };

function request(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { job, digest, owner: 'me', now: NOW, leaseMs: 60_000, consumer: 'sequencer', ...overrides };
}

function stored(status: JobStatus, overrides: Partial<JobRecord> = {}): JobRecord {
  return {
    jobId: job.jobId,
    workspaceId: job.workspaceId,
    tenantId: job.tenantId,
    type: job.type,
    status,
    digest,
    attempt: 1,
    createdAt: job.createdAt,
    updatedAt: job.createdAt,
    ttl: 0,
    ...overrides,
  };
}

describe('claim rules', () => {
  it('claims an absent record', () => {
    expect(isClaimable(undefined, request())).toBe(true);
    expect(claimOutcome(undefined, request())).toEqual({ kind: 'retry' });
  });

  it('treats a live lease of another owner as busy, never a second execution', () => {
    const record = stored('IN_FLIGHT', { leaseOwner: 'other', leaseUntil: NOW + 1 });
    expect(isClaimable(record, request())).toBe(false);
    expect(claimOutcome(record, request())).toEqual({ kind: 'busy', record });
  });

  it("recognises its own lease: a claim write that applied and was retried (its answer lost) is the caller's claim", () => {
    const record = stored('IN_FLIGHT', { leaseOwner: 'me', leaseUntil: NOW + 60_000 });
    expect(isClaimable(record, request())).toBe(false);
    expect(claimOutcome(record, request())).toEqual({ kind: 'claimed', record });
    expect(claimOutcome(record, request({ owner: 'other' }))).toEqual({ kind: 'busy', record });
  });

  it('takes over an expired lease (the lease end itself counts as expired)', () => {
    expect(isClaimable(stored('IN_FLIGHT', { leaseOwner: 'other', leaseUntil: NOW }), request())).toBe(true);
    expect(isClaimable(stored('IN_FLIGHT', { leaseOwner: 'other', leaseUntil: NOW - 1 }), request())).toBe(true);
  });

  it('reports a finished record with the same digest as a duplicate carrying the stored result', () => {
    const record = stored('SUCCEEDED', { result: { commitSha: 'abc' } });
    expect(claimOutcome(record, request())).toEqual({ kind: 'duplicate', record });
  });

  it('claims a job the producer recorded QUEUED when its turn comes', () => {
    expect(isClaimable(stored('QUEUED', { attempt: 0 }), request())).toBe(true);
    // Only the sequencer: a stage takes nothing the sequencer has not pinned.
    expect(
      isClaimable(
        stored('QUEUED', { attempt: 0 }),
        request({ consumer: 'stage', pin: { sha: 'a'.repeat(40), repoUrl: 'http://127.0.0.1/r.git', branch: 'main' } }),
      ),
    ).toBe(false);
    expect(claimOutcome(stored('QUEUED'), request())).toEqual({ kind: 'retry' });
  });

  it('reports the same jobId with a different request as a conflict, even under an expired lease', () => {
    const other = request({ digest: 'f'.repeat(64) });
    for (const status of ['QUEUED', 'SUCCEEDED', 'IN_FLIGHT', 'FAILED', 'FORWARDED'] as const) {
      const record = stored(status, { leaseUntil: NOW - 1 });
      expect(isClaimable(record, other)).toBe(false);
      expect(claimOutcome(record, other)).toEqual({ kind: 'conflict', record });
    }
  });

  it('acknowledges a cancelled job whatever its digest (a tombstone has none)', () => {
    const record = stored('CANCELLED', { digest: '' });
    expect(claimOutcome(record, request())).toEqual({ kind: 'cancelled', record });
    expect(claimOutcome(record, request({ redriveToken: 't-1' }))).toEqual({ kind: 'cancelled', record });
  });

  it('never runs a FAILED or SKIPPED job again on an ordinary redelivery', () => {
    for (const status of ['FAILED', 'SKIPPED'] as const) {
      const record = stored(status);
      expect(isClaimable(record, request())).toBe(false);
      expect(claimOutcome(record, request())).toEqual({ kind: 'finished', record });
    }
  });

  it("lets the operator's redrive take over a FAILED or SKIPPED job (the ledger holds its token), but not a SUCCEEDED one", () => {
    expect(isClaimable(stored('FAILED', { redriveToken: 't-1' }), request({ redriveToken: 't-1' }))).toBe(true);
    expect(isClaimable(stored('SKIPPED', { redriveToken: 't-1' }), request({ redriveToken: 't-1' }))).toBe(true);
    expect(isClaimable(stored('SUCCEEDED', { redriveToken: 't-1' }), request({ redriveToken: 't-1' }))).toBe(false);
  });

  it('treats a redrive attribute the ledger did not record as an ordinary redelivery: the finished record stands', () => {
    for (const status of ['FAILED', 'SKIPPED'] as const) {
      for (const record of [stored(status), stored(status, { redriveToken: 'the-operators' })]) {
        expect(isClaimable(record, request({ redriveToken: 'forged' }))).toBe(false);
        expect(claimOutcome(record, request({ redriveToken: 'forged' }))).toEqual({ kind: 'finished', record });
      }
    }
  });

  it('lets a stage consumer take a FORWARDED job; the sequencer re-forwards it instead', () => {
    const record = stored('FORWARDED', { pin: PIN });
    expect(isClaimable(record, request({ consumer: 'stage', pin: PIN }))).toBe(true);
    expect(isClaimable(record, request())).toBe(false);
    expect(claimOutcome(record, request())).toEqual({ kind: 'forwarded', record });
  });

  it('leaves a pinned job that a stage consumer is running to the stage', () => {
    const record = stored('IN_FLIGHT', { pin: PIN, leaseOwner: 'stage', leaseUntil: NOW + 1 });
    expect(claimOutcome(record, request())).toEqual({ kind: 'staged', record });
    expect(claimOutcome(record, request({ consumer: 'stage', pin: PIN }))).toEqual({ kind: 'busy', record });
  });

  it('never lets the sequencer claim a pinned job; once its stage lease ran out it is forwarded again with its pin', () => {
    const expired = stored('IN_FLIGHT', { pin: PIN, leaseOwner: 'stage', leaseUntil: NOW });
    // Claiming it would pin it again at whatever the workspace head is now, or fence the workspace.
    expect(isClaimable(expired, request())).toBe(false);
    expect(isClaimable(expired, request({ redriveToken: 't-1' }))).toBe(false);
    expect(claimOutcome(expired, request())).toEqual({ kind: 'forwarded', record: expired });
    expect(isClaimable(expired, request({ consumer: 'stage', pin: PIN }))).toBe(true);
  });

  it('leaves the verdict of a pinned job to its stage: the sequencer reports no outcome of its own', () => {
    for (const status of ['SUCCEEDED', 'FAILED'] as const) {
      const record = stored(status, { pin: PIN, error: { reason: 'REJECTED_BY_TARGET', message: 'no' } });
      expect(claimOutcome(record, request())).toEqual({ kind: 'staged', record });
      expect(claimOutcome(record, request({ consumer: 'stage', pin: PIN }))).toEqual({
        kind: status === 'SUCCEEDED' ? 'duplicate' : 'finished',
        record,
      });
    }
  });

  describe('a stage consumer runs only what the sequencer pinned', () => {
    const forwarded = stored('FORWARDED', { pin: PIN });

    it.each([
      [
        'no record: the sequencer never saw the job',
        undefined,
        request({ consumer: 'stage', pin: PIN }),
        /no record of job job-1/,
      ],
      [
        'a record the sequencer has not pinned',
        stored('IN_FLIGHT', { leaseOwner: 'seq', leaseUntil: NOW - 1 }),
        request({ consumer: 'stage', pin: PIN }),
        /was not pinned by the sequencer/,
      ],
      [
        'another commit',
        forwarded,
        request({ consumer: 'stage', pin: { ...PIN, sha: 'b'.repeat(40) } }),
        /pin\.sha differs/,
      ],
      [
        'another repository',
        forwarded,
        request({ consumer: 'stage', pin: { ...PIN, repoUrl: 'https://evil.example/r.git' } }),
        /pin\.repoUrl differs/,
      ],
      [
        'another branch',
        forwarded,
        request({ consumer: 'stage', pin: { ...PIN, branch: 'other' } }),
        /pin\.branch differs/,
      ],
      [
        'another request under the pinned job id',
        forwarded,
        request({ consumer: 'stage', pin: PIN, digest: 'f'.repeat(64) }),
        /differs from the request the sequencer pinned/,
      ],
      ['no pin at all', forwarded, request({ consumer: 'stage' }), /carries no pin/],
    ])('refuses %s (UNPINNED), redriven or not', (_label, record, req, why) => {
      for (const redriveToken of [undefined, 't-1']) {
        const withToken = record && { ...record, redriveToken: 't-1' };
        expect(isClaimable(withToken, { ...req, redriveToken })).toBe(false);
        expect(claimOutcome(withToken, { ...req, redriveToken })).toEqual({
          kind: 'unpinned',
          why: expect.stringMatching(why),
        });
      }
    });

    it('still acknowledges a stage message of a cancelled job as a no-op', () => {
      const tombstone = stored('CANCELLED', { digest: '' });
      expect(claimOutcome(tombstone, request({ consumer: 'stage', pin: PIN }))).toEqual({
        kind: 'cancelled',
        record: tombstone,
      });
    });
  });

  it('names the statuses a claim may take over', () => {
    expect(takeoverStatuses('sequencer')).toEqual([]);
    expect(takeoverStatuses('stage')).toEqual(['FORWARDED']);
  });

  it('names the DLQ that holds a job: its stage once pinned, else the FIFO queue', () => {
    const pin = { sha: 'a'.repeat(40), repoUrl: 'http://127.0.0.1/r.git', branch: 'main' };
    expect(dlqQueueOf({ type: 'run_tests', pin })).toBe('run-tests');
    expect(dlqQueueOf({ type: 'run_tests' })).toBe('agent-jobs');
    expect(dlqQueueOf({ type: 'apply_patch' })).toBe('agent-jobs');
    expect(conflictQueueOf('open_pr', 'stage')).toBe('open-pr');
    expect(conflictQueueOf('open_pr', 'sequencer')).toBe('agent-jobs');
    expect(conflictQueueOf('open_pr', 'enqueue')).toBeUndefined();
  });

  it('keeps records longer than the retention in days (epoch seconds)', () => {
    expect(ttlFor(NOW, 30)).toBe(NOW / 1000 + 30 * 86_400);
  });
});

describe('workspace cursor rules', () => {
  const ws = (overrides: Partial<WorkspaceRecord>): WorkspaceRecord => ({
    workspaceId: 'ws-1',
    state: 'ACTIVE',
    seq: 3,
    updatedAt: '',
    ...overrides,
  });

  it('takes a new or settled workspace', () => {
    expect(canTakeWorkspace(undefined)).toBe(true);
    expect(canTakeWorkspace(ws({ currentJobId: 'a', currentDone: true }))).toBe(true);
    expect(canTakeWorkspace(ws({ currentJobId: 'a', currentDone: false }))).toBe(false);
    expect(canTakeWorkspace(ws({ state: 'BLOCKED', currentDone: true }))).toBe(false);
  });

  it('skips on a BLOCKED workspace', () => {
    const record = ws({ state: 'BLOCKED', blockedBy: 'a', currentDone: true });
    expect(workspaceTakeOutcome(record, 'b')).toEqual({ kind: 'blocked', workspace: record });
  });

  it('lets the job that holds the cursor run again (redelivery after a crash)', () => {
    const record = ws({ currentJobId: 'a', currentDone: false });
    expect(workspaceTakeOutcome(record, 'a')).toEqual({ kind: 'taken', workspace: record });
  });

  it('names the unfinished predecessor so the workspace is fenced', () => {
    const record = ws({ currentJobId: 'a', currentDone: false });
    expect(workspaceTakeOutcome(record, 'b')).toEqual({
      kind: 'predecessorUnfinished',
      workspace: record,
      predecessor: 'a',
    });
  });

  describe('binding to one repository and branch', () => {
    const repo = { url: 'https://git.example.com/acme/app.git', branch: 'agent/ws-1' };
    const bound = ws({ repo, currentJobId: 'a', currentDone: true });

    it('takes a job naming the bound repository and branch, or none (a staged job), or a workspace not bound yet', () => {
      expect(canTakeWorkspace(bound, repo)).toBe(true);
      expect(canTakeWorkspace(bound)).toBe(true);
      expect(canTakeWorkspace(ws({ currentDone: true }), { url: 'https://other.example/x.git', branch: 'b' })).toBe(
        true,
      );
    });

    it.each([
      ['another repository', { ...repo, url: 'https://git.example.com/acme/other.git' }],
      ['another branch', { ...repo, branch: 'main' }],
    ])('refuses %s as a mismatch, before BLOCKED or an unfinished predecessor', (_label, other) => {
      expect(canTakeWorkspace(bound, other)).toBe(false);
      for (const record of [
        bound,
        ws({ repo, state: 'BLOCKED', blockedBy: 'x', currentDone: true }),
        ws({ repo, currentJobId: 'a', currentDone: false }),
      ]) {
        expect(workspaceTakeOutcome(record, 'b', other)).toEqual({ kind: 'mismatch', workspace: record });
      }
    });
  });

  it('asks to retry when the record became takeable between the write and the read', () => {
    expect(workspaceTakeOutcome(ws({ currentJobId: 'a', currentDone: true }), 'b')).toEqual({ kind: 'retry' });
  });
});

describe('cancel rules (cancelRule)', () => {
  const LIVE = { leaseOwner: 'stage-worker', leaseUntil: NOW + 1 };
  const EXPIRED = { leaseOwner: 'stage-worker', leaseUntil: NOW };
  const BUILD = { progress: { buildId: 'b-1' } };
  const of = (type: JobType, status: JobStatus, overrides: Partial<JobRecord> = {}) =>
    cancelRule({ ...stored(status, overrides), type }, NOW);
  const otherTypes = JOB_TYPE_NAMES.filter((type) => commandStageOf(type) === undefined);

  it.each(JOB_TYPE_NAMES.map((type) => [type]))(
    '%s: a job that has not started is cancelled; a finished one is refused, naming its status',
    (type) => {
      for (const status of CANCELLABLE_STATUSES) expect(of(type, status)).toEqual({ kind: 'notStarted' });
      for (const status of ['SUCCEEDED', 'FAILED', 'CANCELLED'] as const)
        expect(of(type, status, { pin: PIN, ...BUILD })).toEqual({ kind: 'refused', why: `${status} already` });
    },
  );

  it.each(COMMAND_JOB_TYPES.map((type) => [type]))(
    '%s taken by its stage: RUNNING or with its build recorded, its build is stopped; with no live lease, cancelled with none to stop',
    (type) => {
      expect(of(type, 'RUNNING', { pin: PIN, ...BUILD })).toEqual({ kind: 'stopBuild', buildId: 'b-1' });
      expect(of(type, 'IN_FLIGHT', { pin: PIN, ...LIVE, ...BUILD })).toEqual({ kind: 'stopBuild', buildId: 'b-1' });
      expect(of(type, 'IN_FLIGHT', { pin: PIN, ...EXPIRED, progress: { startRequestedAt: 'then' } })).toEqual({
        kind: 'stopBuild',
      });
    },
  );

  it.each(COMMAND_JOB_TYPES.map((type) => [type]))(
    '%s: refused while its build is being started (nothing names the build yet) or while the sequencer pins it',
    (type) => {
      expect(of(type, 'IN_FLIGHT', { pin: PIN, ...LIVE, progress: { startRequestedAt: 'now' } })).toEqual({
        kind: 'refused',
        why: expect.stringMatching(/^starting its build \(attempt 1\): cancel again in a moment/),
      });
      expect(of(type, 'IN_FLIGHT', { ...EXPIRED })).toEqual({
        kind: 'refused',
        why: 'being pinned by the sequencer: cancel again in a moment',
      });
    },
  );

  it.each(otherTypes.map((type) => [type]))(
    '%s, once started, runs to its end: refused, whatever its lease',
    (type) => {
      for (const lease of [LIVE, EXPIRED]) {
        const rule = of(type, 'IN_FLIGHT', { pin: PIN, ...lease });
        expect(rule).toEqual({
          kind: 'refused',
          why: expect.stringMatching(new RegExp(`^running \\(attempt 1\\): a started ${type} runs to its end`)),
        });
      }
    },
  );
});
