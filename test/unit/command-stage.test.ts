import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LINT_COMMAND, DEFAULT_TEST_COMMAND } from '../../contract/job-types';
import { BUILD_DUE_MARGIN_SECONDS, BUILD_QUEUED_TIMEOUT_MINUTES } from '../../contract/runtime-env';
import { commandStageMessage, runTestsMessage } from '../support/stage-messages';
import type { StageMessage } from '../../src/core/envelope';
import {
  buildEnvironment,
  buildIdempotencyToken,
  commandOf,
  commandVerdict,
  dueAfterMs,
  runKey,
  tail,
} from '../../src/core/jobs/command-stage';

const sha = 'd'.repeat(40);
const job = (payload: StageMessage<'run_tests'>['payload'] = {}): StageMessage<'run_tests'> =>
  runTestsMessage({ payload, pin: { sha } });

describe('commandVerdict', () => {
  it('turns passed and failed runs into a successful job with the verdict in the words of the stage, the commit and the build', () => {
    expect(
      commandVerdict(
        { state: 'PASSED', exitCode: 0, logTail: 'ok\n', durationMs: 5 },
        { type: 'run_tests', sha },
        'b-1',
      ),
    ).toEqual({
      status: 'SUCCEEDED',
      result: {
        verdict: 'passed',
        summary: 'tests passed',
        exitCode: 0,
        logTail: 'ok\n',
        sha,
        buildId: 'b-1',
        durationMs: 5,
      },
    });
    expect(
      commandVerdict({ state: 'FAILED', exitCode: 1, logTail: '1 failing\n' }, { type: 'run_tests', sha }, 'b-1'),
    ).toEqual({
      status: 'SUCCEEDED',
      result: { verdict: 'failed', summary: 'tests failed', exitCode: 1, logTail: '1 failing\n', sha, buildId: 'b-1' },
    });
  });

  it('fails the job with TEST_RUN_ERROR when the build ended without a verdict, naming the build status', () => {
    expect(
      commandVerdict(
        { state: 'ERROR', status: 'TIMED_OUT', message: 'no result after 60s' },
        { type: 'run_tests', sha },
        'b-1',
      ),
    ).toEqual({
      status: 'FAILED',
      error: { reason: 'TEST_RUN_ERROR', message: 'tests run TIMED_OUT: no result after 60s' },
    });
  });

  it('keeps only the tail of a long log', () => {
    const verdict = commandVerdict(
      { state: 'FAILED', exitCode: 1, logTail: 'x'.repeat(20_000) },
      { type: 'run_tests', sha },
      'b-1',
    );
    expect(verdict.status === 'SUCCEEDED' && Buffer.byteLength(verdict.result.logTail)).toBe(8 * 1024);
  });

  it('refuses a job type that is not a command stage', () => {
    expect(() =>
      commandVerdict({ state: 'PASSED', exitCode: 0, logTail: '' }, { type: 'open_pr', sha }, 'b-1'),
    ).toThrow(/open_pr is not a command stage/);
  });
});

describe('dueAfterMs', () => {
  it("is the build's queued timeout and timeout plus the margin", () => {
    expect(dueAfterMs(2 * 3600)).toBe((BUILD_QUEUED_TIMEOUT_MINUTES * 60 + 2 * 3600 + BUILD_DUE_MARGIN_SECONDS) * 1000);
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

describe('buildEnvironment', () => {
  it('names the repository, the pinned commit, the command, the job, its type, run and run key', () => {
    const message = job({ command: 'make test' });
    expect(
      buildEnvironment({
        job: message,
        run: 2,
        key: 'a1b2c3d4e5f60718',
        command: commandOf(message),
        timeoutSeconds: 60,
      }),
    ).toEqual({
      REPO_URL: 'https://git.example/acme/widgets.git',
      COMMIT_SHA: sha,
      TEST_COMMAND: 'make test',
      JOB_ID: 'job-1',
      JOB_TYPE: 'run_tests',
      JOB_RUN: '2',
      JOB_RUN_KEY: 'a1b2c3d4e5f60718',
    });
    expect(commandOf(job())).toBe(DEFAULT_TEST_COMMAND);
  });
});

describe.each([
  { stage: 'run_tests', command: DEFAULT_TEST_COMMAND, script: 'test', file: 'test.sh' },
  { stage: 'run_lint', command: DEFAULT_LINT_COMMAND, script: 'lint', file: 'lint.sh' },
])('the default command of $stage', ({ command, script, file }) => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'default-command-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const runIn = () => execFileSync('sh', ['-c', `${command} 2>&1`], { cwd: dir, encoding: 'utf8' });

  it(`runs the package.json ${script} script when there is one`, () => {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', scripts: { [script]: 'echo from-npm' } }));
    writeFileSync(join(dir, file), 'echo from-file\n');

    expect(runIn()).toMatch(/from-npm/);
  });

  it(`runs ${file} when package.json has no ${script} script`, () => {
    // The other stage's script is not this one's.
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ name: 'x', scripts: { [script === 'lint' ? 'test' : 'lint']: 'echo wrong-script' } }),
    );
    writeFileSync(join(dir, file), 'echo from-file\n');

    expect(runIn()).toBe('from-file\n');
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
    expect(error.stdout).toMatch(new RegExp(`no ${script} command`));
  });
});

describe('run_lint: a command stage by declaration alone', () => {
  const lint = (payload: StageMessage<'run_lint'>['payload'] = {}) =>
    commandStageMessage('run_lint', { payload, pin: { sha } });

  it('runs its own default command, or the one the job names', () => {
    expect(commandOf(lint())).toBe(DEFAULT_LINT_COMMAND);
    expect(commandOf(lint({ command: 'eslint .' }))).toBe('eslint .');
  });

  it('tells the build its type, so the run key and the idempotency token differ from a run_tests job of the same id', () => {
    const message = lint();
    const requestedAt = '2026-01-01T00:00:00.000Z';
    const key = runKey(message, 0, requestedAt);
    expect(
      buildEnvironment({ job: message, run: 0, key, command: commandOf(message), timeoutSeconds: 60 }),
    ).toMatchObject({ JOB_TYPE: 'run_lint', TEST_COMMAND: DEFAULT_LINT_COMMAND });
    expect(key).not.toBe(runKey(job(), 0, requestedAt));
    expect(buildIdempotencyToken({ key })).not.toBe(buildIdempotencyToken({ key: runKey(job(), 0, requestedAt) }));
  });

  it('reports its verdict in its own words', () => {
    expect(
      commandVerdict({ state: 'FAILED', exitCode: 1, logTail: '3 problems\n' }, { type: 'run_lint', sha }, 'b-1'),
    ).toEqual({
      status: 'SUCCEEDED',
      result: { verdict: 'failed', summary: 'lint failed', exitCode: 1, logTail: '3 problems\n', sha, buildId: 'b-1' },
    });
    expect(
      commandVerdict({ state: 'ERROR', status: 'FAULT', message: 'checkout failed' }, { type: 'run_lint', sha }, 'b-1'),
    ).toEqual({
      status: 'FAILED',
      error: { reason: 'TEST_RUN_ERROR', message: 'lint run FAULT: checkout failed' },
    });
  });
});
