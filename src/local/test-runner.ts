/**
 * TestRunner for the local platform: checks out the pinned commit and runs the test command in a
 * child process, at most one run per job. The run is claimed by creating its state file
 * exclusively, and the state file (atomic writes) lets `poll` answer for any run this directory has
 * seen.
 *
 * Isolation, as far as one machine without containers allows (SECURITY.md says what it does not
 * stop):
 * - Each run gets a throw-away directory outside the platform's state directory (under the system
 *   temp directory): `workspace/` (the checkout, the command's cwd), `home/` (HOME), `tmp/` (TMPDIR)
 *   and the output file. No path into the state directory is handed over, and `..` from the
 *   workspace leads to the throw-away directory's parents, not to the platform's files.
 * - The environment is scrubbed: PATH, the locale, CI, the build variables the CodeBuild runner
 *   also sets (contract/runtime-env.ts TEST_BUILD_ENV) and nothing of the platform's.
 * - The runner checks out the pinned commit itself (only that commit, like the buildspec), with a
 *   read-only credential for that one repository that is revoked before the command starts: the
 *   command holds no credential, and the git server refuses it anything (pushes included).
 *
 * Ending a run: the command runs in its own process group with its output going to a file, not a
 * pipe, so nothing it leaves behind can keep the run open. When the command exits or its timeout
 * fires, the runner kills the process group and then every process still carrying the run's
 * marker variable (started by the command, even after `setsid`), and waits until they are gone.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, openSync } from 'node:fs';
import { mkdir, mkdtemp, open, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { ID_PATTERN } from '../../contract/job-types';
import type { StageMessage } from '../core/envelope';
import { ConfigurationError, errorMessage } from '../core/errors';
import type { TestRunner, TestRunStatus } from '../core/ports';
import { LOG_TAIL_BYTES, buildEnvironment, tail, testCommand } from '../core/jobs/run-tests';
import { writeFileAtomic } from './write-atomic';

const run = promisify(execFile);

/** HTTP basic credentials for one checkout. */
export interface CheckoutAuth {
  readonly username: string;
  readonly password: string;
}

export type Checkout = (input: { repoUrl: string; sha: string; dir: string; auth?: CheckoutAuth }) => Promise<void>;

/** Issues a read-only credential for one repository, for the length of one checkout. */
export interface ReadAccess {
  /** undefined: the repository needs no credential (or is not one this issuer serves). */
  grant(repoUrl: string): { readonly auth: CheckoutAuth; revoke(): void } | undefined;
}

export interface LocalTestRunnerOptions {
  /** Holds `runs/<jobId>.json` (state) only: the commands never see it. */
  readonly stateDir: string;
  /** Where the throw-away run directories are made; must not be inside stateDir. @default os.tmpdir() */
  readonly scratchDir?: string;
  /** Puts the pinned commit into `dir`. @default gitCliCheckout */
  readonly checkout?: Checkout;
  /** Read-only credentials for the checkout. @default none (a remote that needs no credential) */
  readonly readAccess?: ReadAccess;
  /** Used when the job gives no timeoutSeconds. @default 900 */
  readonly defaultTimeoutSeconds?: number;
  /** Bytes of output kept. @default LOG_TAIL_BYTES */
  readonly logTailBytes?: number;
}

/** What the state file holds. */
export interface LocalRunState {
  readonly buildId: string;
  readonly jobId: string;
  readonly status: TestRunStatus;
  /** Process group of the running command (its leader's pid). */
  readonly pid?: number;
  readonly startedAt: number;
}

/** The run named by a build id is not known to this state directory. */
export class UnknownBuildError extends Error {
  override readonly name = 'UnknownBuildError';
}

/** Git with no system or user configuration and no prompt: only what the runner passes applies. */
const GIT_ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0' };

/**
 * Fetches exactly the pinned commit (as the CodeBuild buildspec does) and checks it out detached.
 * The credential travels as an HTTP header in git's environment (GIT_CONFIG_*), never in a URL,
 * on a command line or in the checkout's `.git/config`.
 */
export const gitCliCheckout: Checkout = async ({ repoUrl, sha, dir, auth }) => {
  const header = auth ? { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'http.extraHeader', GIT_CONFIG_VALUE_0: `Authorization: Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` } : {};
  const git = (...args: string[]) => run('git', args, { cwd: dir, env: { ...GIT_ENV, ...header } });
  await git('init', '--quiet');
  await git('fetch', '--quiet', '--depth', '1', '--no-tags', repoUrl, sha);
  await git('-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', 'FETCH_HEAD');
};

const BUILD_PREFIX = 'local-';
/** Names the run's processes in their environment, so the ones that left its process group are found. */
const RUN_MARKER = 'AGENT_JOBS_TEST_RUN';

interface ActiveRun {
  state: LocalRunState;
  done: Promise<void>;
  /** Set while the command runs: ends it and everything it started. */
  stop?: () => void;
}

export class LocalTestRunner implements TestRunner {
  private readonly active = new Map<string, ActiveRun>();
  private closed = false;
  private readonly checkout: Checkout;
  private readonly scratchDir: string;
  private readonly defaultTimeoutSeconds: number;
  private readonly logTailBytes: number;

  constructor(private readonly options: LocalTestRunnerOptions) {
    this.checkout = options.checkout ?? gitCliCheckout;
    this.defaultTimeoutSeconds = options.defaultTimeoutSeconds ?? 900;
    this.logTailBytes = options.logTailBytes ?? LOG_TAIL_BYTES;
    this.scratchDir = resolve(options.scratchDir ?? tmpdir());
    if (isInside(this.scratchDir, resolve(options.stateDir))) {
      throw new ConfigurationError(`the test runner's scratch directory ${this.scratchDir} is inside its state directory ${options.stateDir}: test commands would reach it`);
    }
  }

  async start(job: StageMessage<'run_tests'>): Promise<{ buildId: string }> {
    const buildId = `${BUILD_PREFIX}${job.jobId}`;
    if (this.active.has(buildId)) return { buildId };
    const state: LocalRunState = { buildId, jobId: job.jobId, status: { state: 'RUNNING' }, startedAt: Date.now() };
    await mkdir(join(this.options.stateDir, 'runs'), { recursive: true });
    try {
      // Exclusive create: a second start for the job (another delivery, a restart) finds it taken.
      await writeFile(this.statePath(job.jobId), JSON.stringify(state), { flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { buildId };
      throw error;
    }
    const active: ActiveRun = { state, done: Promise.resolve() };
    this.active.set(buildId, active);
    // Only a state file that cannot be written rejects: poll then reports the run as lost (STOPPED).
    active.done = this.execute(job, active).catch(() => undefined);
    return { buildId };
  }

  async poll(buildId: string): Promise<TestRunStatus> {
    const active = this.active.get(buildId);
    if (active) return active.state.status;
    const state = await this.readState(buildId);
    // RUNNING on disk but not here: the process that ran it is gone, and so is the run.
    if (state.status.state === 'RUNNING') {
      return { state: 'ERROR', status: 'STOPPED', message: 'the local test runner restarted while this run was in progress' };
    }
    return state.status;
  }

  /** The run's recorded state (pid, timing) for the CLI and tests. */
  async runState(buildId: string): Promise<LocalRunState> {
    return this.active.get(buildId)?.state ?? this.readState(buildId);
  }

  /** Resolves when the run has finished (immediately for a run this instance is not running). */
  async whenDone(buildId: string): Promise<TestRunStatus> {
    await this.active.get(buildId)?.done;
    return this.poll(buildId);
  }

  /** Ends every running test and what it started, and waits for their state to be written. */
  async close(): Promise<void> {
    this.closed = true;
    for (const run of this.active.values()) run.stop?.();
    await Promise.all([...this.active.values()].map((a) => a.done));
  }

  private async execute(job: StageMessage<'run_tests'>, active: ActiveRun): Promise<void> {
    const runDir = await mkdtemp(join(this.scratchDir, 'agent-jobs-run-'));
    const dirs = { workspace: join(runDir, 'workspace'), home: join(runDir, 'home'), tmp: join(runDir, 'tmp') };
    try {
      await Promise.all(Object.values(dirs).map((d) => mkdir(d)));
      const access = this.options.readAccess?.grant(job.pin.repoUrl);
      try {
        await this.checkout({ repoUrl: job.pin.repoUrl, sha: job.pin.sha, dir: dirs.workspace, ...(access && { auth: access.auth }) });
      } catch (error) {
        await this.finish(active, { state: 'ERROR', status: 'FAILED', message: `checkout of ${job.pin.sha} failed: ${errorMessage(error)}` });
        return;
      } finally {
        // The command never holds a credential: the checkout's ends here.
        access?.revoke();
      }
      if (this.closed) {
        await this.finish(active, { state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down before the tests started' });
        return;
      }
      await this.finish(active, await this.runCommand(job, runDir, dirs, active));
    } catch (error) {
      await this.finish(active, { state: 'ERROR', status: 'FAULT', message: errorMessage(error) });
    } finally {
      this.active.delete(active.state.buildId);
      await rm(runDir, { recursive: true, force: true, maxRetries: 3 });
    }
  }

  private async runCommand(job: StageMessage<'run_tests'>, runDir: string, dirs: { workspace: string; home: string; tmp: string }, active: ActiveRun): Promise<TestRunStatus> {
    const timeoutMs = (job.payload.timeoutSeconds ?? this.defaultTimeoutSeconds) * 1000;
    const marker = randomBytes(16).toString('hex');
    const outputPath = join(runDir, 'output.log');
    // A file, not a pipe: a process the command leaves behind cannot hold the run open by its output.
    const output = openSync(outputPath, 'a', 0o600);
    const started = Date.now();
    let ended: 'exit' | 'timeout' | 'stop' | undefined;
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null } | Error>((done) => {
      let child: ReturnType<typeof spawn>;
      try {
        child = spawn('sh', ['-c', testCommand(job)], {
          cwd: dirs.workspace,
          // Own process group (a new session): the first thing killed when the run ends.
          detached: true,
          stdio: ['ignore', output, output],
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            HOME: dirs.home,
            TMPDIR: dirs.tmp,
            LANG: 'C.UTF-8',
            CI: 'true',
            GIT_CONFIG_NOSYSTEM: '1',
            GIT_TERMINAL_PROMPT: '0',
            [RUN_MARKER]: marker,
            ...buildEnvironment(job),
          },
        });
      } catch (error) {
        done(error as Error);
        return;
      }
      const pid = child.pid;
      if (pid !== undefined) active.state = { ...active.state, pid };
      const end = (why: 'timeout' | 'stop') => {
        ended ??= why;
        if (pid !== undefined) killGroup(pid);
      };
      active.stop = () => end('stop');
      const timer = setTimeout(() => end('timeout'), timeoutMs);
      child.once('error', (error) => {
        clearTimeout(timer);
        done(error);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        ended ??= 'exit';
        done({ code, signal });
      });
    });
    closeSync(output);
    active.stop = undefined;
    // Whatever the command left behind ends with it, setsid'd or not.
    if (active.state.pid !== undefined) killGroup(active.state.pid);
    await endMarkedProcesses(marker);
    const durationMs = Date.now() - started;
    const log = await readTail(outputPath, this.logTailBytes);
    if (exit instanceof Error) return { state: 'ERROR', status: 'FAULT', message: `could not start the tests: ${exit.message}` };
    if (ended === 'timeout') return { state: 'ERROR', status: 'TIMED_OUT', message: `no result after ${timeoutMs / 1000}s; last output:\n${log}` };
    if (ended === 'stop' || this.closed) return { state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down during the run' };
    if (exit.code === 0) return { state: 'PASSED', exitCode: 0, logTail: log, durationMs };
    const note = exit.signal ? `\n[killed by ${exit.signal}]` : '';
    return { state: 'FAILED', exitCode: exit.code, logTail: tail(log + note, this.logTailBytes), durationMs };
  }

  private async finish(active: ActiveRun, status: TestRunStatus): Promise<void> {
    active.state = { ...active.state, status };
    await writeFileAtomic(this.statePath(active.state.jobId), JSON.stringify(active.state));
  }

  private async readState(buildId: string): Promise<LocalRunState> {
    const jobId = buildId.startsWith(BUILD_PREFIX) ? buildId.slice(BUILD_PREFIX.length) : '';
    if (!ID_PATTERN.test(jobId)) throw new UnknownBuildError(`${buildId} is not a local build id`);
    try {
      return JSON.parse(await readFile(this.statePath(jobId), 'utf8')) as LocalRunState;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UnknownBuildError(`no local run ${buildId}`);
      throw error;
    }
  }

  private statePath(jobId: string): string {
    return join(this.options.stateDir, 'runs', `${jobId}.json`);
  }
}

function isInside(dir: string, parent: string): boolean {
  const path = relative(parent, dir);
  return path === '' || (!path.startsWith('..') && !isAbsolute(path));
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * Kills every process whose environment carries the run's marker: what the command started, also
 * after it left the process group (`setsid`, a daemon's double fork). Stopped first, then killed,
 * round after round, so a process cannot fork faster than it is ended; resolves once none is left.
 * Linux only (/proc); elsewhere the process group is all there is. A process that clears its own
 * environment before it detaches escapes this (SECURITY.md).
 */
async function endMarkedProcesses(marker: string, rounds = 50): Promise<void> {
  const tag = `${RUN_MARKER}=${marker}`;
  for (let round = 0; round < rounds; round++) {
    const marked = await markedProcesses(tag);
    if (marked.length === 0) return;
    for (const pid of marked) signal(pid, 'SIGSTOP');
    for (const pid of marked) signal(pid, 'SIGKILL');
    await sleep(20);
  }
}

async function markedProcesses(tag: string): Promise<number[]> {
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return [];
  }
  const found = await Promise.all(
    entries
      .filter((e) => /^\d+$/.test(e))
      .map(async (pid) => {
        // Unreadable (gone, or another user's): not ours. A zombie's environment reads empty.
        const environ = await readFile(`/proc/${pid}/environ`, 'latin1').catch(() => '');
        return environ.split('\0').includes(tag) ? [Number(pid)] : [];
      }),
  );
  return found.flat().filter((pid) => pid !== process.pid);
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone in between.
  }
}

/** The last `maxBytes` of the output file. */
async function readTail(path: string, maxBytes: number): Promise<string> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    const length = Math.min(size, maxBytes * 2);
    const buffer = Buffer.alloc(length);
    await file.read(buffer, 0, length, size - length);
    return tail(buffer.toString('utf8'), maxBytes);
  } finally {
    await file.close();
  }
}
