import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runTestsMessage } from '../support/stage-messages';
import type { StageMessage } from '../../src/core/envelope';
import { PermanentJobError } from '../../src/core/errors';
import { DEFAULT_TEST_COMMAND, TestRunError, buildEnvironment, mustYield, tail, testResult } from '../../src/core/jobs/run-tests';

const sha = 'd'.repeat(40);
const job = (payload: StageMessage<'run_tests'>['payload'] = {}): StageMessage<'run_tests'> => runTestsMessage({ payload, pin: { sha } });

describe('testResult', () => {
  it('turns passed and failed runs into a successful job with the verdict, the commit and the build', () => {
    expect(testResult({ state: 'PASSED', exitCode: 0, logTail: 'ok\n', durationMs: 5 }, job(), 'b-1')).toEqual({
      verdict: 'passed',
      exitCode: 0,
      logTail: 'ok\n',
      sha,
      buildId: 'b-1',
      durationMs: 5,
    });
    expect(testResult({ state: 'FAILED', exitCode: 1, logTail: '1 failing\n' }, job(), 'b-1')).toEqual({ verdict: 'failed', exitCode: 1, logTail: '1 failing\n', sha, buildId: 'b-1' });
  });

  it('fails the job permanently when the run ended without a verdict, naming the build status', () => {
    const run = () => testResult({ state: 'ERROR', status: 'TIMED_OUT', message: 'no result after 60s' }, job(), 'b-1');

    expect(run).toThrow(TestRunError);
    expect(run).toThrow(PermanentJobError);
    expect(run).toThrow('test run TIMED_OUT: no result after 60s');
  });
});

describe('tail', () => {
  it('keeps the last bytes without splitting a character', () => {
    expect(tail('abcdef', 3)).toBe('def');
    expect(tail('short', 100)).toBe('short');
    // 'é' is two bytes: a cut inside it drops the whole character.
    expect(tail('aéb', 2)).toBe('b');
    expect(tail('aéb', 3)).toBe('éb');
  });
});

describe('mustYield', () => {
  const policy = { pollIntervalMs: 20_000, reserveMs: 30_000 };

  it('waits while another poll interval still leaves the reserve', () => {
    expect(mustYield(50_000, policy)).toBe(false);
    expect(mustYield(49_999, policy)).toBe(true);
  });
});

describe('buildEnvironment', () => {
  it('names the repository, the pinned commit, the command and the job', () => {
    expect(buildEnvironment(job({ command: 'make test' }))).toEqual({
      REPO_URL: 'https://git.example/acme/widgets.git',
      COMMIT_SHA: sha,
      TEST_COMMAND: 'make test',
      JOB_ID: 'job-1',
    });
    expect(buildEnvironment(job()).TEST_COMMAND).toBe(DEFAULT_TEST_COMMAND);
  });
});

describe('DEFAULT_TEST_COMMAND', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'default-command-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const runIn = () => execFileSync('sh', ['-c', `${DEFAULT_TEST_COMMAND} 2>&1`], { cwd: dir, encoding: 'utf8' });

  it('runs the package.json test script when there is one', () => {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', scripts: { test: 'echo from-npm' } }));
    writeFileSync(join(dir, 'test.sh'), 'echo from-test-sh\n');

    expect(runIn()).toMatch(/from-npm/);
  });

  it('runs test.sh when package.json has no test script', () => {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x' }));
    writeFileSync(join(dir, 'test.sh'), 'echo from-test-sh\n');

    expect(runIn()).toBe('from-test-sh\n');
  });

  it('exits 2 with a message when there is nothing to run', () => {
    const error = (() => {
      try {
        runIn();
      } catch (e) {
        return e as { status: number; stdout: string };
      }
      throw new Error('expected a failure');
    })();

    expect(error.status).toBe(2);
    expect(error.stdout).toMatch(/no test command/);
  });
});
