import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { eventually } from '../support/eventually';
import { MACHINE_CGROUPS, MACHINE_CONFINES, MACHINE_SANDBOX, isAlive, processesSleeping } from '../support/processes';
import { runTestsMessage } from '../support/stage-messages';
import type { StageMessage } from '../../src/core/envelope';
import { commandOf, runKey } from '../../src/core/jobs/command-stage';
import type { BuildCompletion, CommandRun, TestRunStatus } from '../../src/core/ports';
import { hiddenPaths, type Confinement } from '../../tools/local/confinement';
import { OUTPUT_KEEP_BYTES } from '../../tools/local/state-dir';
import {
  LocalTestRunner,
  localBuildId,
  localRunEventBody,
  parseLocalRunEvent,
  readRunOutput,
  requestStop,
} from '../../tools/local/test-runner';

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

function stageMessage(
  jobId: string,
  repo: { url: string; sha: string },
  payload: StageMessage<'run_tests'>['payload'] = {},
): StageMessage<'run_tests'> {
  return runTestsMessage({ jobId, payload, pin: { sha: repo.sha, repoUrl: repo.url, branch: 'main' } });
}

/** Run `run` of a job, as the command stage asks for it (its command, its timeout or the default). */
function commandRun(job: StageMessage<'run_tests'>, run = 0): CommandRun {
  return {
    job,
    run,
    key: runKey(job, run, FIRST_REQUEST),
    command: commandOf(job),
    timeoutSeconds: job.payload.timeoutSeconds ?? 900,
  };
}

/** When the stage asked for each run's build: one job's runs here, so one time names them all. */
const FIRST_REQUEST = '2026-01-01T00:00:00.000Z';

/** The local build id of run `run` of a run_tests job asked for at FIRST_REQUEST. */
function buildIdOf(jobId: string, run = 0): string {
  return localBuildId({ job: { jobId }, run, key: runKey({ type: 'run_tests', jobId }, run, FIRST_REQUEST) });
}

const UNCONFINED: Confinement = { kind: 'none', reason: 'this test runs the unconfined path' };
const NAMESPACES: Confinement = {
  kind: 'namespaces',
  reason: 'this test runs the level used where bubblewrap is missing',
};
/** Every level this machine can run: unconfined, namespaces (where it allows them), and its best (the sandbox, where bubblewrap is installed). */
const LEVELS: [string, Confinement | undefined][] = [
  ['unconfined', UNCONFINED],
  ...(MACHINE_CONFINES ? [['in namespaces', NAMESPACES] as [string, Confinement]] : []),
  ['at the best level the machine allows', undefined],
];

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
    const { buildId } = await runner.start(
      commandRun(
        stageMessage('job-fails', { url: repo.url, sha: repo.shaB }, { command: 'echo "2 tests failed" >&2; exit 3' }),
      ),
    );

    await expect(runner.whenDone(buildId)).resolves.toMatchObject({
      state: 'FAILED',
      exitCode: 3,
      logTail: '2 tests failed\n',
    });
  });

  it('keeps only the tail of a long output', async () => {
    const small = new LocalTestRunner({ stateDir: mkdtempSync(join(root, 'state-')), logTailBytes: 64 });
    const { buildId } = await small.start(
      commandRun(stageMessage('job-chatty', { url: repo.url, sha: repo.shaB }, { command: 'seq 1 20000' })),
    );

    const status = await small.whenDone(buildId);

    const logTail = status.state === 'PASSED' ? status.logTail : '';
    expect(Buffer.byteLength(logTail)).toBeLessThanOrEqual(64);
    expect(logTail.endsWith('19999\n20000\n')).toBe(true);
    await small.close();
  });

  it('starts at most one run per job, also from a second runner on the same state directory', async () => {
    // Each run appends to a file outside it: unconfined, as no confined run can.
    const counting = new LocalTestRunner({ stateDir, confinement: UNCONFINED });
    const counter = join(root, 'runs-of-job-once');
    const job = stageMessage('job-once', { url: repo.url, sha: repo.shaB }, { command: `echo run >> ${counter}` });

    const [first, second] = await Promise.all([counting.start(commandRun(job)), counting.start(commandRun(job))]);
    await counting.whenDone(first.buildId);
    const restarted = new LocalTestRunner({ stateDir, confinement: UNCONFINED });
    const third = await restarted.start(commandRun(job));

    expect(second).toEqual(first);
    expect(third).toEqual(first);
    await expect(restarted.poll(first.buildId)).resolves.toMatchObject({ state: 'PASSED' });
    expect(readFileSync(counter, 'utf8')).toBe('run\n');
    await Promise.all([counting.close(), restarted.close()]);
  });

  // What a command leaves running is ended with it, at every level. Pids said from inside a PID
  // namespace mean nothing out here, so each left-behind process is found by a sleep duration no
  // other process has; the command says what it started in its output (a confined one can write
  // nothing outside its run).
  describe.each(LEVELS)('ending what a command leaves behind, %s', (_name, confinement) => {
    let ending: LocalTestRunner;
    let nextTag = 0;
    /** A sleep argument unique to this run of this test file. */
    const sleepTag = () => `300.${process.pid}${++nextTag}`;
    beforeEach(() => {
      ending = new LocalTestRunner({ stateDir, ...(confinement && { confinement }) });
    });
    afterEach(() => ending.close());
    const settled = (buildId: string) =>
      eventually(
        () => ending.poll(buildId),
        (status) => status.state !== 'RUNNING',
        { what: `${buildId} to end`, timeoutMs: 20_000, intervalMs: 200 },
      );
    /** A process that leaves the session and keeps stdout open, then a wait until it said it started (in the run's TMPDIR). */
    const escapee = (tag: string) =>
      `setsid sh -c 'echo > "$TMPDIR/escapee"; exec sleep ${tag}' & while [ ! -e "$TMPDIR/escapee" ]; do sleep 0.05; done; echo escapee started;`;
    const logOf = (status: TestRunStatus) =>
      status.state === 'PASSED' || status.state === 'FAILED'
        ? status.logTail
        : status.state === 'ERROR'
          ? status.message
          : '';

    it('kills the whole process group on timeout, leaving no orphan', async () => {
      const tag = sleepTag();
      const job = stageMessage(
        'job-hangs',
        { url: repo.url, sha: repo.shaB },
        { command: `sleep ${tag} & echo started; sleep 300`, timeoutSeconds: 1 },
      );
      const { buildId } = await ending.start(commandRun(job));

      const status = await ending.whenDone(buildId);

      expect(status).toMatchObject({ state: 'ERROR', status: 'TIMED_OUT' });
      expect(logOf(status)).toContain('started');
      const { pid: leader } = await ending.runState(buildId);
      expect(processesSleeping(tag)).toEqual([]);
      expect(isAlive(leader!)).toBe(false);
    });

    it('ends what the tests left running after they exit', async () => {
      const tag = sleepTag();
      const job = stageMessage(
        'job-leaks',
        { url: repo.url, sha: repo.shaB },
        { command: `sleep ${tag} >/dev/null 2>&1 & echo started` },
      );
      const { buildId } = await ending.start(commandRun(job));

      await expect(ending.whenDone(buildId)).resolves.toMatchObject({ state: 'PASSED', logTail: 'started\n' });
      expect(processesSleeping(tag)).toEqual([]);
    });

    it("ends the job on timeout and kills a setsid'd process holding its output", async () => {
      const tag = sleepTag();
      const { buildId } = await ending.start(
        commandRun(
          stageMessage(
            'job-escapes-timeout',
            { url: repo.url, sha: repo.shaB },
            { command: `${escapee(tag)} sleep 300`, timeoutSeconds: 2 },
          ),
        ),
      );

      const status = await settled(buildId);
      expect(status).toMatchObject({ state: 'ERROR', status: 'TIMED_OUT' });
      expect(logOf(status)).toContain('escapee started');
      expect(processesSleeping(tag)).toEqual([]);
    });

    it("ends the job when the command exits and kills a setsid'd process holding its output", async () => {
      const tag = sleepTag();
      const { buildId } = await ending.start(
        commandRun(
          stageMessage('job-escapes-exit', { url: repo.url, sha: repo.shaB }, { command: `${escapee(tag)} echo done` }),
        ),
      );

      expect(await settled(buildId)).toMatchObject({ state: 'PASSED', logTail: 'escapee started\ndone\n' });
      expect(processesSleeping(tag)).toEqual([]);
    });

    it('kills a double-forked daemon (its parent exits at once, it is re-parented)', async () => {
      const tag = sleepTag();
      const { buildId } = await ending.start(
        commandRun(
          stageMessage(
            'job-daemon',
            { url: repo.url, sha: repo.shaB },
            {
              command: `(setsid sh -c 'echo > "$TMPDIR/escapee"; exec sleep ${tag}' &); while [ ! -e "$TMPDIR/escapee" ]; do sleep 0.05; done`,
            },
          ),
        ),
      );

      expect(await settled(buildId)).toMatchObject({ state: 'PASSED' });
      expect(processesSleeping(tag)).toEqual([]);
    });
  });

  describe('isolation', () => {
    it('runs the command in a throw-away directory outside the state directory, with its own HOME and TMPDIR and a scrubbed environment', async () => {
      process.env.AGENT_JOBS_PLATFORM_SECRET = 'must-not-leak';
      try {
        const { buildId } = await runner.start(
          commandRun(
            stageMessage(
              'job-where',
              { url: repo.url, sha: repo.shaB },
              {
                command:
                  'echo "cwd=$(pwd -P)"; echo "home=$HOME"; echo "tmp=$TMPDIR"; ls -A "$HOME" | wc -l; env | cut -d= -f1 | sort',
              },
            ),
          ),
        );
        const status = await runner.whenDone(buildId);

        const lines = (status.state === 'PASSED' ? status.logTail : JSON.stringify(status)).split('\n').filter(Boolean);
        const value = (key: string) => lines.find((l) => l.startsWith(`${key}=`))?.slice(key.length + 1) ?? '';
        const [cwd, home, tmp] = [value('cwd'), value('home'), value('tmp')];
        if ((await runner.isolation()).confinement.kind === 'sandbox') {
          // Its own tmpfs: no path of the host's.
          expect([cwd, home, tmp]).toEqual(['/tmp/workspace', '/tmp/home', '/tmp']);
        } else {
          for (const dir of [cwd, home, tmp]) {
            expect(dir).toMatch(/agent-jobs-runs-\w+\/run-/);
            expect(relative(realpathSync(stateDir), dir).startsWith('..')).toBe(true);
            expect(existsSync(dir)).toBe(false); // thrown away after the run
          }
        }
        expect(home).not.toBe(process.env.HOME);
        expect(lines).toContain('0'); // HOME starts empty
        const names = lines.filter((l) => /^[A-Z_][A-Z0-9_]*$/.test(l));
        expect(names).not.toContain('AGENT_JOBS_PLATFORM_SECRET');
        expect(names.filter((n) => !['PWD', 'SHLVL', '_', 'OLDPWD'].includes(n))).toEqual([
          'AGENT_JOBS_TEST_RUN',
          'CI',
          'COMMIT_SHA',
          'GIT_CONFIG_NOSYSTEM',
          'GIT_TERMINAL_PROMPT',
          'HOME',
          'JOB_ID',
          'JOB_RUN',
          'JOB_RUN_KEY',
          'JOB_TYPE',
          'LANG',
          'PATH',
          'REPO_URL',
          'TEST_COMMAND',
          'TMPDIR',
        ]);
      } finally {
        delete process.env.AGENT_JOBS_PLATFORM_SECRET;
      }
    });

    it('gives `..` from the workspace no way into the state directory', async () => {
      writeFileSync(join(stateDir, 'platform.json'), '{"secret":"platform"}');
      const tries = ['..', '../..', '../../..', '../../../..']
        .map((up) => `cat ${up}/platform.json ${up}/runs/*.json 2>/dev/null && exit 0;`)
        .join(' ');
      const { buildId } = await runner.start(
        commandRun(
          stageMessage('job-climbs', { url: repo.url, sha: repo.shaB }, { command: `${tries} echo not found; exit 1` }),
        ),
      );

      await expect(runner.whenDone(buildId)).resolves.toMatchObject({
        state: 'FAILED',
        exitCode: 1,
        logTail: 'not found\n',
      });
    });

    (MACHINE_CONFINES ? it.each(LEVELS.slice(1)) : it.skip.each(LEVELS.slice(1)))(
      'confines the command %s: no absolute path reaches the state directories, another run or the real HOME, and it sees only its own processes',
      async (_level, confinement) => {
        // Outside /tmp (which a sandbox replaces anyway) and readable by every user: only the confinement hides it.
        const secretDir = mkdtempSync(join('/var/tmp', 'agent-jobs-secret-'));
        chmodSync(secretDir, 0o755);
        writeFileSync(join(secretDir, 'platform.json'), '{"secret":"platform"}', { mode: 0o644 });
        writeFileSync(join(stateDir, 'secret.json'), '{}');
        // Another platform's directory of runs, beside this runner's in the scratch directory.
        const neighbours = join(tmpdir(), `agent-jobs-runs-${randomBytes(8).toString('hex')}`);
        mkdirSync(join(neighbours, `run-${randomBytes(8).toString('hex')}`), { recursive: true });
        const confined = new LocalTestRunner({
          stateDir,
          confidential: [secretDir],
          ...(confinement && { confinement }),
        });
        try {
          // Another run is in progress while the command looks around.
          const tag = `300.${process.pid}0`;
          const other = await confined.start(
            commandRun(
              stageMessage('job-other-run', { url: repo.url, sha: repo.shaB }, { command: `exec sleep ${tag}` }),
            ),
          );
          await eventually(
            async () => processesSleeping(tag),
            (pids) => pids.length === 1,
            { what: 'the other run to start', intervalMs: 50 },
          );
          const otherRun = (await confined.runState(other.buildId)).runDir;
          const reached = (what: string, command: string) =>
            `if ${command} >/dev/null 2>&1; then echo "REACHED ${what}"; fi;`;
          const command = [
            reached('platform file', `cat ${join(secretDir, 'platform.json')}`),
            reached('runner state', `cat ${join(stateDir, 'secret.json')}`),
            reached('platform process', `kill -0 ${process.pid}`),
            reached('unmount', `umount ${secretDir}`),
            reached('new namespace', 'unshare --user --map-root-user true'),
            reached('other run', `ls -A ${otherRun}/workspace`),
            // Not even the names: no directory of runs but its own where the runners make them.
            reached(
              'names of other runs',
              `own=$(basename "$(dirname "$(dirname "$PWD")")"); ls -A ${tmpdir()} | grep '^agent-jobs-runs-' | grep -qvx "$own"`,
            ),
            reached('name of another run', `ls -A ${neighbours}`),
            // HOME, or the credentials in it: empty from inside, however full from outside.
            ...hiddenPaths([])
              .filter((p) => existsSync(p))
              .map((p) => reached(p, `if [ -d ${p} ]; then [ -n "$(ls -A ${p})" ]; else [ -s ${p} ]; fi`)),
            'echo looked around',
          ].join(' ');
          const { buildId } = await confined.start(
            commandRun(stageMessage('job-confined', { url: repo.url, sha: repo.shaB }, { command })),
          );
          const status = await confined.whenDone(buildId);

          expect(otherRun).toMatch(/agent-jobs-runs-\w+\/run-/);
          expect(existsSync(join(otherRun!, 'workspace'))).toBe(true);
          expect(status).toMatchObject({ state: 'PASSED', logTail: 'looked around\n' });
          expect((await confined.poll(other.buildId)).state).toBe('RUNNING');
        } finally {
          await confined.close();
          rmSync(secretDir, { recursive: true, force: true });
          rmSync(neighbours, { recursive: true, force: true });
        }
      },
    );

    it('refuses a scratch directory inside the state directory', () => {
      expect(() => new LocalTestRunner({ stateDir, scratchDir: join(stateDir, 'work') })).toThrow(
        /inside its state directory/,
      );
    });
  });

  // Small limits, so that reaching them is quick and cheap: the hostile suite
  // (test/hostile/sandbox-limits.test.ts) reaches the catalog's own through the platform.
  describe('limits', () => {
    const small = { processes: 64, memoryMiB: 192, diskMiB: 32, cpuSeconds: 1, outputMiB: 1 };
    let limited: LocalTestRunner;
    beforeEach(() => {
      limited = new LocalTestRunner({ stateDir, limitsOf: () => small });
    });
    afterEach(() => limited.close());
    const runOf = async (jobId: string, command: string) =>
      limited.whenDone(
        (await limited.start(commandRun(stageMessage(jobId, { url: repo.url, sha: repo.shaB }, { command })))).buildId,
      );
    const reached = (limit: RegExp) => ({
      state: 'ERROR',
      status: 'LIMIT_REACHED',
      message: expect.stringMatching(limit),
    });

    (MACHINE_CGROUPS ? it : it.skip)('ends a fork flood at the process limit, and every process of it', async () => {
      const tag = `300.${process.pid}9`;
      await expect(runOf('job-forks', `for i in $(seq 1 500); do sleep ${tag} & done; wait`)).resolves.toMatchObject(
        reached(/process limit \(64\)/),
      );
      expect(processesSleeping(tag)).toEqual([]);
    });

    (MACHINE_CGROUPS ? it : it.skip)('ends a run at its memory limit', async () => {
      const allocate = `node -e "const kept = []; for (let i = 0; i < 16; i++) kept.push(Buffer.alloc(32 * 1024 * 1024, 1))"`;
      await expect(runOf('job-memory', allocate)).resolves.toMatchObject(reached(/memory limit \(192 MiB/));
    });

    (MACHINE_CGROUPS ? it : it.skip)('ends a busy loop at its CPU time limit', async () => {
      await expect(runOf('job-cpu', 'while :; do :; done')).resolves.toMatchObject(reached(/CPU time limit \(1 s\)/));
    });

    (MACHINE_SANDBOX ? it : it.skip)(
      'stops a disk fill at the disk limit (the sandbox), checkout and /tmp together',
      async () => {
        await expect(runOf('job-disk', 'dd if=/dev/zero of="$TMPDIR/fill" bs=1M count=64')).resolves.toMatchObject(
          reached(/disk limit \(32 MiB/),
        );
      },
    );

    it('ends a run that prints more than its output limit, keeping the output up to it and its last lines before the cut', async () => {
      const status = await runOf('job-chatty', 'i=0; while :; do i=$((i+1)); echo "line $i"; done');
      expect(status).toMatchObject(reached(/output limit \(1 MiB\)/));
      // The end of what was kept, as any other run's: the lines printed just before the cut.
      expect(status).toMatchObject({ message: expect.stringMatching(/; last output:\n(line \d+\n)+(line \d*)?$/) });
      expect(Buffer.byteLength((await readRunOutput(stateDir, buildIdOf('job-chatty'))) ?? '')).toBeLessThanOrEqual(
        OUTPUT_KEEP_BYTES + 100,
      );
    });

    it('passes a run that stays under every limit', async () => {
      await expect(
        runOf(
          'job-within',
          'for i in 1 2 3; do sleep 0.1 & done; wait; head -c 100000 /dev/zero > "$TMPDIR/f"; echo fine',
        ),
      ).resolves.toMatchObject({ state: 'PASSED', logTail: 'fine\n' });
    });
  });

  it('stops a running test on close and records it as STOPPED, not as a verdict', async () => {
    const { buildId } = await runner.start(
      commandRun(stageMessage('job-closed', { url: repo.url, sha: repo.shaB }, { command: 'sleep 300' })),
    );
    await eventually(
      () => runner.runState(buildId),
      (state) => state.pid !== undefined,
      { what: 'the test process to start', intervalMs: 20 },
    );

    await runner.close();

    await expect(runner.poll(buildId)).resolves.toMatchObject({ state: 'ERROR', status: 'STOPPED' });
    expect(isAlive((await runner.runState(buildId)).pid!)).toBe(false);
  });

  it('ends a run whose job was cancelled (stop) and records it STOPPED as cancelled, with what it printed, not as a verdict', async () => {
    const { buildId } = await runner.start(
      commandRun(
        stageMessage('job-cancelled', { url: repo.url, sha: repo.shaB }, { command: 'echo started; sleep 300' }),
      ),
    );
    // Its output so far, where the runner writes it while the command runs.
    const printed = () =>
      readFileSync(
        join(
          stateDir,
          'runs',
          `job-cancelled.0.${runKey({ type: 'run_tests', jobId: 'job-cancelled' }, 0, FIRST_REQUEST)}.out`,
        ),
        'utf8',
      );
    await eventually(printed, (text) => text === 'started\n', { what: 'the command to print', intervalMs: 20 });

    await runner.stop(buildId);

    await expect(runner.whenDone(buildId)).resolves.toMatchObject({
      state: 'ERROR',
      status: 'STOPPED',
      message: expect.stringMatching(/^cancelled by the operator .*last output:\nstarted\n$/s),
    });
    expect(isAlive((await runner.runState(buildId)).pid!)).toBe(false);
    // A stop of a run that has ended (a cancel sent again, the reconciler after the CLI) changes nothing.
    await runner.stop(buildId);
    await expect(runner.poll(buildId)).resolves.toMatchObject({ status: 'STOPPED' });
  });

  it('a stop requested from another process (the CLI) ends the run; one requested before the command starts keeps it from starting', async () => {
    const running = await runner.start(
      commandRun(stageMessage('job-asked', { url: repo.url, sha: repo.shaB }, { command: 'sleep 300' })),
    );
    await eventually(
      () => runner.runState(running.buildId),
      (state) => state.pid !== undefined,
      { what: 'the test process to start', intervalMs: 20 },
    );
    await requestStop(stateDir, running.buildId);
    await expect(runner.whenDone(running.buildId)).resolves.toMatchObject({
      state: 'ERROR',
      status: 'STOPPED',
      message: expect.stringMatching(/^cancelled by the operator/),
    });

    const early = buildIdOf('job-early');
    await requestStop(stateDir, early);
    const { buildId } = await runner.start(
      commandRun(stageMessage('job-early', { url: repo.url, sha: repo.shaB }, { command: 'echo must not run' })),
    );
    expect(buildId).toBe(early);
    await expect(runner.whenDone(buildId)).resolves.toMatchObject({
      state: 'ERROR',
      status: 'STOPPED',
      message: expect.stringMatching(/before its command started$/),
    });
  });

  it('reports a commit that cannot be checked out as an infrastructure error', async () => {
    const { buildId } = await runner.start(
      commandRun(stageMessage('job-bad-sha', { url: repo.url, sha: 'f'.repeat(40) })),
    );

    await expect(runner.whenDone(buildId)).resolves.toMatchObject({
      state: 'ERROR',
      status: 'FAILED',
      message: expect.stringMatching(/checkout of f{40} failed/),
    });
  });

  it('answers a poll for a build it never started with a named error, and leaves it out of describe', async () => {
    await expect(runner.poll(buildIdOf('nobody'))).rejects.toThrow(`no local run ${buildIdOf('nobody')}`);
    await expect(runner.poll('tests:1234')).rejects.toThrow(/not a local build id/);
    // An earlier version's id (no run key) is not one of this runner's either.
    await expect(runner.poll('local:nobody:0')).rejects.toThrow(/not a local build id/);
    await expect(runner.describe([buildIdOf('nobody'), 'tests:1234'])).resolves.toEqual(new Map());
  });

  it('runs a job sent again under the same id and run number (another start request, another key) as a run of its own', async () => {
    const repoAt = { url: repo.url, sha: repo.shaB };
    const first = await runner.start(commandRun(stageMessage('job-again', repoAt, { command: 'echo first; exit 1' })));
    await expect(runner.whenDone(first.buildId)).resolves.toMatchObject({ state: 'FAILED', logTail: 'first\n' });

    const again = stageMessage('job-again', repoAt, { command: 'echo again' });
    const second = await runner.start({ ...commandRun(again), key: runKey(again, 0, '2026-01-02T00:00:00.000Z') });

    expect(second.buildId).not.toBe(first.buildId);
    await expect(runner.whenDone(second.buildId)).resolves.toMatchObject({ state: 'PASSED', logTail: 'again\n' });
    await expect(readRunOutput(stateDir, second.buildId)).resolves.toBe('again\n');
    await expect(runner.poll(first.buildId)).resolves.toMatchObject({ state: 'FAILED' });
  });

  it("hands the build's end to onFinished once its state is written: the exit is the completion event", async () => {
    const finished: BuildCompletion[] = [];
    const reporting = new LocalTestRunner({
      stateDir: mkdtempSync(join(root, 'state-')),
      onFinished: async (c) => void finished.push(c),
    });
    const job = stageMessage('job-event', { url: repo.url, sha: repo.shaB }, { command: 'exit 4' });
    const { buildId } = await reporting.start(commandRun(job));

    await reporting.whenDone(buildId);

    expect(finished).toEqual([
      {
        buildId,
        jobId: 'job-event',
        jobType: 'run_tests',
        sha: repo.shaB,
        status: expect.objectContaining({ state: 'FAILED', exitCode: 4 }),
      },
    ]);
    await expect(reporting.describe([buildId])).resolves.toEqual(
      new Map([[buildId, expect.objectContaining({ state: 'FAILED' })]]),
    );
    // What the platform puts on the build-events queue reads back as the same completion.
    expect(parseLocalRunEvent(localRunEventBody(finished[0]!))).toEqual(finished[0]);
    expect(() => parseLocalRunEvent('{"source":"aws.codebuild"}')).toThrow(/not a local build event/);
    await reporting.close();
  });

  it("starts a new build for a job's new run number (an operator's redrive), keeping the first one's state", async () => {
    // Each run appends to a file outside it: unconfined, as no confined run can.
    const counting = new LocalTestRunner({ stateDir, confinement: UNCONFINED });
    const counter = join(root, 'runs-of-job-rerun');
    const job = stageMessage('job-rerun', { url: repo.url, sha: repo.shaB }, { command: `echo run >> ${counter}` });

    const first = await counting.start(commandRun(job, 0));
    await counting.whenDone(first.buildId);
    const second = await counting.start(commandRun(job, 1));
    await counting.whenDone(second.buildId);

    expect(second.buildId).not.toBe(first.buildId);
    expect(readFileSync(counter, 'utf8')).toBe('run\nrun\n');
    expect([...(await counting.describe([first.buildId, second.buildId])).values()].map((s) => s.state)).toEqual([
      'PASSED',
      'PASSED',
    ]);
    await counting.close();
  });
});
