/**
 * A stage's gate in words, as `status`, MCP's job_status and the console show it: what it decided
 * (passed, failed, not run), what it waits for, or that it is still to judge; nothing for a type
 * that requires nothing.
 */
import { jobGate } from '../../tools/operator/views';
import type { JobRecord } from '../../src/core/ports';

const sha = 'a'.repeat(40);
const pin = { sha, repoUrl: 'https://git.example.com/app.git', branch: 'feature' };
const check = (verdict: string) => ({ type: 'run_tests', jobId: 't1', verdict, sha });
type Gated = Parameters<typeof jobGate>[0];
const openPr = (fields: Partial<JobRecord>): Gated => ({ type: 'open_pr', status: 'RUNNING', pin, ...fields });

it('names the passing run, its verdict and commit', () => {
  expect(jobGate(openPr({ status: 'SUCCEEDED', result: { number: 1, gate: [check('tests passed')] } }))).toEqual({
    state: 'passed',
    checks: [check('tests passed')],
    words: `passed: run_tests t1 (tests passed) at ${'a'.repeat(12)}`,
  });
});

it('names the run that failed, and says nothing was done', () => {
  const error = {
    reason: 'REQUIREMENT_FAILED',
    message: 'open_pr requires run_tests to pass',
    gate: [check('tests failed')],
  };
  expect(jobGate(openPr({ status: 'FAILED', error }))?.words).toBe(
    `failed: run_tests t1 (tests failed) at ${'a'.repeat(12)}: nothing was done`,
  );
  // A failure recorded before the gate kept its check still reads: its message says it.
  expect(
    jobGate(openPr({ status: 'FAILED', error: { reason: 'REQUIREMENT_FAILED', message: 'the old words' } }))?.words,
  ).toBe('failed: the old words');
});

it('says what was required when no such job ran at the commit', () => {
  const error = { reason: 'REQUIREMENT_NOT_RUN', message: 'no run' };
  expect(jobGate(openPr({ status: 'FAILED', error }))).toMatchObject({
    state: 'not run',
    words: `not run: no run_tests job at ${'a'.repeat(12)} before it: nothing was done`,
  });
});

it('says what it waits for, then what it will judge before its turn', () => {
  expect(
    jobGate(openPr({ progress: { waitingFor: 'waiting for the verdict of t1 (run_tests, RUNNING)' } })),
  ).toMatchObject({ state: 'waiting', words: 'waiting for the verdict of t1 (run_tests, RUNNING)' });
  const { pin: _pin, ...unpinned } = openPr({ status: 'QUEUED' });
  expect(jobGate(unpinned)).toMatchObject({
    state: 'to judge',
    words: 'requires run_tests to pass at its commit, judged when it runs',
  });
});

it('shows nothing for a type that requires nothing, or a job that ended before its gate', () => {
  expect(jobGate({ type: 'run_tests', status: 'SUCCEEDED', pin, result: { verdict: 'passed' } })).toBeUndefined();
  expect(jobGate(openPr({ status: 'CANCELLED' }))).toBeUndefined();
  expect(
    jobGate(openPr({ status: 'FAILED', error: { reason: 'BASE_NOT_FOUND', message: 'no base' } })),
  ).toBeUndefined();
});
