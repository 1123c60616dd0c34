import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { eventually } from '../support/eventually';
import { runTestsMessage } from '../support/stage-messages';
import type { StageMessage } from '../../src/core/envelope';
import { commandOf } from '../../src/core/jobs/command-stage';
import type { BuildCompletion, CommandRun } from '../../src/core/ports';
import { LocalTestRunner, localRunEventBody, parseLocalRunEvent } from '../../src/local/test-runner';

/** A real repository with two commits: A (test.sh, a.txt) and B (adds b.txt). */
function makeRepo(root: string): { url: string; shaA: string; shaB: string } {
  const dir = join(root, 'origin');
  const git = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim();
  execFileSync('git', ['init', '--quiet', '--initial-branch=main', dir]);
  git('config', 'user.email', 'test@example.invalid');
  git('config', 'user.name', 'test');
  writeFileSync(join(dir, 'test.sh'), 'echo "files:"; ls -1\n');
  writeFileSync(join(dir, 'a.txt'), 'a\n');
  git('add', '.');
  git('commit', '--quiet', '-m', 'A');
  const shaA = git('rev-parse', 'HEAD');
  writeFileSync(join(dir, 'b.txt'), 'b\n');
  git('add', '.');
  git('commit', '--quiet', '-m', 'B');
  return { url: dir, shaA, shaB: git('rev-parse', 'HEAD') };
}

function stageMessage(jobId: string, repo: { url: string; sha: string }, payload: StageMessage<'run_tests'>['payload'] = {}): StageMessage<'run_tests'> {
  return runTestsMessage({ jobId, payload, pin: { sha: repo.sha, repoUrl: repo.url, branch: 'main' } });
}

/** Run `run` of a job, as the command stage asks for it (its command, its timeout or the default). */
function commandRun(job: StageMessage<'run_tests'>, run = 0): CommandRun {
  return { job, run, command: commandOf(job), timeoutSeconds: job.payload.timeoutSeconds ?? 900 };
}

/** Alive and not a zombie waiting to be reaped by whatever adopted it. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
}

describe('LocalTestRunner', () => {
  let root: string;
  let repo: { url: string; shaA: string; shaB: string };
  let stateDir: string;
  let runner: LocalTestRunner;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'local-runner-'));
    repo = makeRepo(root);
  });
  beforeEach(() => {
    stateDir = mkdtempSync(join(root, 'state-'));
    runner = new LocalTestRunner({ stateDir });
  });
  afterEach(() => runner.close());
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('runs the default command (test.sh) on the tree of the pinned commit, not the branch head', async () => {
    const { buildId } = await runner.start(commandRun(stageMessage('job-pinned', { url: repo.url, sha: repo.shaA })));

    const status = await runner.whenDone(buildId);

    expect(status).toMatchObject({ state: 'PASSED', exitCode: 0 });
    const logTail = status.state === 'PASSED' ? status.logTail : '';
    expect(logTail.split('\n').filter(Boolean)).toEqual(['files:', 'a.txt', 'test.sh']);
  });

  it('reports failing tests as a FAILED verdict with the exit code and the output', async () => {
    const { buildId } = await runner.start(commandRun(stageMessage('job-fails', { url: repo.url, sha: repo.shaB }, { command: 'echo "2 tests failed" >&2; exit 3' })));

    await expect(runner.whenDone(buildId)).resolves.toMatchObject({ state: 'FAILED', exitCode: 3, logTail: '2 tests failed\n' });
  });

  it('keeps only the tail of a long output', async () => {
    const small = new LocalTestRunner({ stateDir: mkdtempSync(join(root, 'state-')), logTailBytes: 64 });
    const { buildId } = await small.start(commandRun(stageMessage('job-chatty', { url: repo.url, sha: repo.shaB }, { command: 'seq 1 20000' })));

    const status = await small.whenDone(buildId);

    const logTail = status.state === 'PASSED' ? status.logTail : '';
    expect(Buffer.byteLength(logTail)).toBeLessThanOrEqual(64);
    expect(logTail.endsWith('19999\n20000\n')).toBe(true);
  });

  it('starts at most one run per job, also from a second runner on the same state directory', async () => {
    const counter = join(root, 'runs-of-job-once');
    const job = stageMessage('job-once', { url: repo.url, sha: repo.shaB }, { command: `echo run >> ${counter}` });

    const [first, second] = await Promise.all([runner.start(commandRun(job)), runner.start(commandRun(job))]);
    await runner.whenDone(first.buildId);
    const restarted = new LocalTestRunner({ stateDir });
    const third = await restarted.start(commandRun(job));

    expect(second).toEqual(first);
    expect(third).toEqual(first);
    await expect(restarted.poll(first.buildId)).resolves.toMatchObject({ state: 'PASSED' });
    expect(readFileSync(counter, 'utf8')).toBe('run\n');
  });

  it('kills the whole process group on timeout, leaving no orphan', async () => {
    const job = stageMessage('job-hangs', { url: repo.url, sha: repo.shaB }, { command: 'sleep 300 & echo "background $!"; sleep 300', timeoutSeconds: 1 });
    const { buildId } = await runner.start(commandRun(job));

    const status = await runner.whenDone(buildId);

    expect(status).toMatchObject({ state: 'ERROR', status: 'TIMED_OUT' });
    const background = Number(/background (\d+)/.exec(status.state === 'ERROR' ? status.message : '')?.[1]);
    const { pid: leader } = await runner.runState(buildId);
    expect(background).toBeGreaterThan(0);
    expect(leader).toBeGreaterThan(0);
    expect(isAlive(background)).toBe(false);
    expect(isAlive(leader!)).toBe(false);
  });

  it('ends what the tests left running after they exit', async () => {
    const job = stageMessage('job-leaks', { url: repo.url, sha: repo.shaB }, { command: 'sleep 300 >/dev/null 2>&1 & echo "background $!"' });
    const { buildId } = await runner.start(commandRun(job));

    const status = await runner.whenDone(buildId);

    const background = Number(/background (\d+)/.exec(status.state === 'PASSED' ? status.logTail : '')?.[1]);
    expect(background).toBeGreaterThan(0);
    expect(isAlive(background)).toBe(false);
  });

  describe('a command that leaves a setsid\'d process holding its output', () => {
    /** A command whose background process leaves the session, keeps stdout open and says its pid. */
    const escapee = (pidFile: string) => `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 1000' &`;
    const pidIn = (file: string) => Number(readFileSync(file, 'utf8').trim());
    const settled = (buildId: string) =>
      eventually(() => runner.poll(buildId), (status) => status.state !== 'RUNNING', { what: `${buildId} to end`, timeoutMs: 20_000, intervalMs: 200 });

    it('ends the job on timeout and kills that process too', async () => {
      const pidFile = join(root, 'escapee-timeout.pid');
      const { buildId } = await runner.start(commandRun(stageMessage('job-escapes-timeout', { url: repo.url, sha: repo.shaB }, { command: `${escapee(pidFile)} sleep 300`, timeoutSeconds: 1 })));

      expect(await settled(buildId)).toMatchObject({ state: 'ERROR', status: 'TIMED_OUT' });
      expect(isAlive(pidIn(pidFile))).toBe(false);
    });

    it('ends the job when the command exits and kills that process', async () => {
      const pidFile = join(root, 'escapee-exit.pid');
      const { buildId } = await runner.start(commandRun(stageMessage('job-escapes-exit', { url: repo.url, sha: repo.shaB }, { command: `${escapee(pidFile)} while [ ! -s ${pidFile} ]; do sleep 0.05; done; echo done` })));

      expect(await settled(buildId)).toMatchObject({ state: 'PASSED', logTail: 'done\n' });
      expect(isAlive(pidIn(pidFile))).toBe(false);
    });

    it('kills a double-forked daemon (its parent exits at once, it is re-parented)', async () => {
      const pidFile = join(root, 'escapee-daemon.pid');
      const { buildId } = await runner.start(commandRun(stageMessage('job-daemon', { url: repo.url, sha: repo.shaB }, { command: `(${escapee(pidFile)}); while [ ! -s ${pidFile} ]; do sleep 0.05; done` })));

      expect(await settled(buildId)).toMatchObject({ state: 'PASSED' });
      expect(isAlive(pidIn(pidFile))).toBe(false);
    });
  });

  describe('isolation', () => {
    it('runs the command in a throw-away directory outside the state directory, with its own HOME and TMPDIR and a scrubbed environment', async () => {
      process.env.AGENT_JOBS_PLATFORM_SECRET = 'must-not-leak';
      try {
        const { buildId } = await runner.start(
          commandRun(stageMessage('job-where', { url: repo.url, sha: repo.shaB }, { command: 'echo "cwd=$(pwd -P)"; echo "home=$HOME"; echo "tmp=$TMPDIR"; ls -A "$HOME" | wc -l; env | cut -d= -f1 | sort' })),
        );
        const status = await runner.whenDone(buildId);

        const lines = (status.state === 'PASSED' ? status.logTail : JSON.stringify(status)).split('\n').filter(Boolean);
        const value = (key: string) => lines.find((l) => l.startsWith(`${key}=`))?.slice(key.length + 1) ?? '';
        const [cwd, home, tmp] = [value('cwd'), value('home'), value('tmp')];
        for (const dir of [cwd, home, tmp]) {
          expect(dir).toMatch(/agent-jobs-run-/);
          expect(relative(realpathSync(stateDir), dir).startsWith('..')).toBe(true);
          expect(existsSync(dir)).toBe(false); // thrown away after the run
        }
        expect(home).not.toBe(process.env.HOME);
        expect(lines).toContain('0'); // HOME starts empty
        const names = lines.filter((l) => /^[A-Z_][A-Z0-9_]*$/.test(l));
        expect(names).not.toContain('AGENT_JOBS_PLATFORM_SECRET');
        expect(names.filter((n) => !['PWD', 'SHLVL', '_', 'OLDPWD'].includes(n))).toEqual(
          ['AGENT_JOBS_TEST_RUN', 'CI', 'COMMIT_SHA', 'GIT_CONFIG_NOSYSTEM', 'GIT_TERMINAL_PROMPT', 'HOME', 'JOB_ID', 'JOB_RUN', 'JOB_TYPE', 'LANG', 'PATH', 'REPO_URL', 'TEST_COMMAND', 'TMPDIR'],
        );
      } finally {
        delete process.env.AGENT_JOBS_PLATFORM_SECRET;
      }
    });

    it('gives `..` from the workspace no way into the state directory', async () => {
      writeFileSync(join(stateDir, 'platform.json'), '{"secret":"platform"}');
      const tries = ['..', '../..', '../../..', '../../../..'].map((up) => `cat ${up}/platform.json ${up}/runs/*.json 2>/dev/null && exit 0;`).join(' ');
      const { buildId } = await runner.start(commandRun(stageMessage('job-climbs', { url: repo.url, sha: repo.shaB }, { command: `${tries} echo not found; exit 1` })));

      await expect(runner.whenDone(buildId)).resolves.toMatchObject({ state: 'FAILED', exitCode: 1, logTail: 'not found\n' });
    });

    it('refuses a scratch directory inside the state directory', () => {
      expect(() => new LocalTestRunner({ stateDir, scratchDir: join(stateDir, 'work') })).toThrow(/inside its state directory/);
    });
  });

  it('stops a running test on close and records it as STOPPED, not as a verdict', async () => {
    const { buildId } = await runner.start(commandRun(stageMessage('job-closed', { url: repo.url, sha: repo.shaB }, { command: 'sleep 300' })));
    await eventually(() => runner.runState(buildId), (state) => state.pid !== undefined, { what: 'the test process to start', intervalMs: 20 });

    await runner.close();

    await expect(runner.poll(buildId)).resolves.toMatchObject({ state: 'ERROR', status: 'STOPPED' });
    expect(isAlive((await runner.runState(buildId)).pid!)).toBe(false);
  });

  it('reports a commit that cannot be checked out as an infrastructure error', async () => {
    const { buildId } = await runner.start(commandRun(stageMessage('job-bad-sha', { url: repo.url, sha: 'f'.repeat(40) })));

    await expect(runner.whenDone(buildId)).resolves.toMatchObject({ state: 'ERROR', status: 'FAILED', message: expect.stringMatching(/checkout of f{40} failed/) });
  });

  it('answers a poll for a build it never started with a named error, and leaves it out of describe', async () => {
    await expect(runner.poll('local:nobody:0')).rejects.toThrow(/no local run local:nobody:0/);
    await expect(runner.poll('tests:1234')).rejects.toThrow(/not a local build id/);
    await expect(runner.describe(['local:nobody:0', 'tests:1234'])).resolves.toEqual(new Map());
  });

  it("hands the build's end to onFinished once its state is written: the exit is the completion event", async () => {
    const finished: BuildCompletion[] = [];
    const reporting = new LocalTestRunner({ stateDir: mkdtempSync(join(root, 'state-')), onFinished: async (c) => void finished.push(c) });
    const job = stageMessage('job-event', { url: repo.url, sha: repo.shaB }, { command: 'exit 4' });
    const { buildId } = await reporting.start(commandRun(job));

    await reporting.whenDone(buildId);

    expect(finished).toEqual([{ buildId, jobId: 'job-event', jobType: 'run_tests', sha: repo.shaB, status: expect.objectContaining({ state: 'FAILED', exitCode: 4 }) }]);
    await expect(reporting.describe([buildId])).resolves.toEqual(new Map([[buildId, expect.objectContaining({ state: 'FAILED' })]]));
    // What the platform puts on the build-events queue reads back as the same completion.
    expect(parseLocalRunEvent(localRunEventBody(finished[0]!))).toEqual(finished[0]);
    expect(() => parseLocalRunEvent('{"source":"aws.codebuild"}')).toThrow(/not a local build event/);
  });

  it("starts a new build for a job's new run number (an operator's redrive), keeping the first one's state", async () => {
    const counter = join(root, 'runs-of-job-rerun');
    const job = stageMessage('job-rerun', { url: repo.url, sha: repo.shaB }, { command: `echo run >> ${counter}` });

    const first = await runner.start(commandRun(job, 0));
    await runner.whenDone(first.buildId);
    const second = await runner.start(commandRun(job, 1));
    await runner.whenDone(second.buildId);

    expect(second.buildId).not.toBe(first.buildId);
    expect(readFileSync(counter, 'utf8')).toBe('run\nrun\n');
    expect([...(await runner.describe([first.buildId, second.buildId])).values()].map((s) => s.state)).toEqual(['PASSED', 'PASSED']);
  });
});
