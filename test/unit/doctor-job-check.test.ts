/**
 * The doctor's end-to-end check as a pure function of what its jobs became: on a stack, where the
 * CLI cannot make the scratch branch, a missing one is answered with the command that makes it;
 * and whatever the outcome (a failure, an interruption of the wait) the run's clean-up is called
 * with its workspace and jobs. The clean-up leaves what `cancel` refuses (a started apply_patch),
 * saying why, over the in-memory ledger. The local platform runs both for real in
 * test/e2e/doctor.test.ts (there the clean-up cancels a running test run and its build stops).
 */
import {
  checkJobEndToEnd,
  cleanUpScratchRun,
  type Clock,
  type DoctorRun,
  type JobCheckOptions,
} from '../../tools/cli/doctor';
import type { JobRecord } from '../../src/core/ports';
import type { Connection } from '../../tools/operator/connection';
import { claimOf, newJob } from '../support/ledger-contract';
import { MemoryLedger } from '../support/memory-ledger';

const REPO = 'https://github.com/acme/app.git';

function record(jobId: string, status: JobRecord['status'], error?: JobRecord['error']): JobRecord {
  return {
    jobId,
    workspaceId: 'w',
    tenantId: 't',
    type: 'apply_patch',
    status,
    digest: 'd',
    attempt: 1,
    createdAt: '',
    updatedAt: '',
    ttl: 0,
    ...(error && { error }),
  };
}

/** A clock whose sleep moves time on, or rejects as an aborted sleep does. */
function clock(options: { interruptedAt?: number } = {}): Clock {
  let now = 1_000_000;
  let sleeps = 0;
  return {
    now: () => now,
    sleep: async (ms) => {
      sleeps += 1;
      if (sleeps === options.interruptedAt)
        throw Object.assign(new Error('The operation was aborted'), { name: 'AbortError' });
      now += ms;
    },
  };
}

function check(jobs: (jobId: string) => JobRecord | undefined, overrides: Partial<JobCheckOptions> = {}) {
  const cleaned: DoctorRun[] = [];
  const options: JobCheckOptions = {
    repoUrl: REPO,
    branch: 'agent-jobs-doctor',
    send: async () => undefined,
    getJob: async (jobId) => jobs(jobId),
    clock: clock(),
    cleanUp: async (run) => {
      cleaned.push(run);
      return `cleaned up: ${run.jobIds.join(', ')}`;
    },
    timeoutMs: 10_000,
    pollMs: 1_000,
    ...overrides,
  };
  return { cleaned, result: checkJobEndToEnd(options) };
}

test('a missing scratch branch is answered with the one command that creates it, and the run is cleaned up', async () => {
  const { cleaned, result } = check((jobId) =>
    jobId.endsWith('-patch')
      ? record(jobId, 'FAILED', {
          reason: 'BRANCH_NOT_FOUND',
          message: 'branch agent-jobs-doctor does not exist on the remote',
        })
      : record(jobId, 'SKIPPED'),
  );

  const { status, detail } = await result;

  expect(status).toBe('fail');
  expect(detail).toMatch(
    new RegExp(
      `^workspace doctor-\\w+: branch agent-jobs-doctor does not exist on ${REPO}: create it with "git push ${REPO} HEAD:refs/heads/agent-jobs-doctor"`,
    ),
  );
  expect(detail).toMatch(/; cleaned up: doctor-\w+-patch, doctor-\w+-tests$/);
  expect(cleaned).toEqual([
    {
      workspaceId: expect.stringMatching(/^doctor-/),
      jobIds: [`${cleaned[0]?.workspaceId}-patch`, `${cleaned[0]?.workspaceId}-tests`],
    },
  ]);
});

test('an interrupted wait still cleans up, and says it was interrupted', async () => {
  const { cleaned, result } = check((jobId) => record(jobId, 'QUEUED'), { clock: clock({ interruptedAt: 2 }) });

  expect(await result).toMatchObject({
    status: 'fail',
    detail: expect.stringMatching(/^workspace doctor-\w+: interrupted; cleaned up: /),
  });
  expect(cleaned).toHaveLength(1);
});

test('a clean-up that fails is said, the check keeps its own verdict', async () => {
  const passed = (jobId: string) => ({
    ...record(jobId, 'SUCCEEDED'),
    result: { verdict: 'passed', commitSha: 'a'.repeat(40) },
  });
  const { result } = check(passed, { cleanUp: async () => Promise.reject(new Error('ledger unreachable')) });

  expect(await result).toMatchObject({
    status: 'pass',
    detail: expect.stringMatching(/passed; clean-up failed: Error: ledger unreachable$/),
  });
});

test('a scratch branch that cannot be prepared fails the check before anything is sent', async () => {
  const sent: unknown[] = [];
  const { cleaned, result } = check(() => undefined, {
    prepare: async () => Promise.reject(new Error('"a..b" is not a valid branch name')),
    send: async (job) => void sent.push(job),
  });

  expect(await result).toMatchObject({
    status: 'fail',
    detail: 'could not prepare branch agent-jobs-doctor: Error: "a..b" is not a valid branch name',
  });
  expect([sent, cleaned]).toEqual([[], []]);
});

test('the clean-up leaves a started apply_patch to end (cancel refuses it) and says why, with what to do if it fails', async () => {
  const ledger = new MemoryLedger();
  const patch = newJob({
    jobId: 'doctor-x-patch',
    workspaceId: 'doctor-x',
    type: 'apply_patch',
    payload: { repo: { url: REPO, branch: 'agent-jobs-doctor' }, diff: 'd', message: 'm' },
  } as never);
  expect((await ledger.claim(claimOf(patch, { now: Date.now() }))).kind).toBe('claimed');
  // Only the ledger is read: the target and its clients would be needed by a cancel, which is not made.
  const connection: Connection = {
    ledger: async () => ledger,
    target: () => Promise.reject(new Error('no target')),
    clients: () => Promise.reject(new Error('no clients')),
  };

  const cleaned = await cleanUpScratchRun(connection, { workspaceId: 'doctor-x', jobIds: ['doctor-x-patch'] });

  expect(cleaned).toBe(
    'cleaned up: doctor-x-patch left IN_FLIGHT (running (attempt 1): a started apply_patch runs to its end (only a command stage\'s build can be stopped); "dlq dismiss doctor-x-patch" if it fails)',
  );
  expect(await ledger.getJob('doctor-x-patch')).toMatchObject({ status: 'IN_FLIGHT' });
});
