/**
 * TestRunner for the local platform: checks out the pinned commit into a per-job directory and runs
 * the test command in a child process, in its own process group so a timeout kills everything the
 * tests started. At most one run per job: the run is claimed by creating its state file exclusively,
 * and the state file (atomic writes) lets `poll` answer for any run this directory has seen.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ID_PATTERN } from '../../contract/job-types';
import type { StageMessage } from '../core/envelope';
import { errorMessage } from '../core/errors';
import type { TestRunner, TestRunStatus } from '../core/ports';
import { LOG_TAIL_BYTES, buildEnvironment, tail, testCommand } from '../core/jobs/run-tests';
import { writeFileAtomic } from './write-atomic';

const run = promisify(execFile);

export type Checkout = (input: { repoUrl: string; sha: string; dir: string }) => Promise<void>;

export interface LocalTestRunnerOptions {
  /** Holds `runs/<jobId>.json` (state) and `work/<jobId>/` (the checkout, removed after the run). */
  readonly stateDir: string;
  /** Puts the pinned commit into `dir`. @default gitCliCheckout */
  readonly checkout?: Checkout;
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

/** `git clone` + `git checkout <sha>` with the git CLI. */
export const gitCliCheckout: Checkout = async ({ repoUrl, sha, dir }) => {
  const env = { ...process.env, GIT_TERMINAL_PROMPT: '0' };
  await run('git', ['clone', '--quiet', '--no-checkout', repoUrl, dir], { env });
  await run('git', ['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', sha], { cwd: dir, env });
};

const BUILD_PREFIX = 'local-';

interface ActiveRun {
  state: LocalRunState;
  done: Promise<void>;
}

export class LocalTestRunner implements TestRunner {
  private readonly active = new Map<string, ActiveRun>();
  private closed = false;
  private readonly checkout: Checkout;
  private readonly defaultTimeoutSeconds: number;
  private readonly logTailBytes: number;

  constructor(private readonly options: LocalTestRunnerOptions) {
    this.checkout = options.checkout ?? gitCliCheckout;
    this.defaultTimeoutSeconds = options.defaultTimeoutSeconds ?? 900;
    this.logTailBytes = options.logTailBytes ?? LOG_TAIL_BYTES;
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

  /** Kills every running test process group and waits for their state to be written. */
  async close(): Promise<void> {
    this.closed = true;
    for (const { state } of this.active.values()) if (state.pid !== undefined) killGroup(state.pid);
    await Promise.all([...this.active.values()].map((a) => a.done));
  }

  private async execute(job: StageMessage<'run_tests'>, active: ActiveRun): Promise<void> {
    const dir = join(this.options.stateDir, 'work', job.jobId);
    try {
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true });
      try {
        await this.checkout({ repoUrl: job.pin.repoUrl, sha: job.pin.sha, dir });
      } catch (error) {
        await this.finish(active, { state: 'ERROR', status: 'FAILED', message: `checkout of ${job.pin.sha} failed: ${errorMessage(error)}` });
        return;
      }
      if (this.closed) {
        await this.finish(active, { state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down before the tests started' });
        return;
      }
      await this.finish(active, await this.spawnTests(job, dir, active));
    } catch (error) {
      await this.finish(active, { state: 'ERROR', status: 'FAULT', message: errorMessage(error) });
    } finally {
      this.active.delete(active.state.buildId);
      await rm(dir, { recursive: true, force: true });
    }
  }

  private spawnTests(job: StageMessage<'run_tests'>, dir: string, active: ActiveRun): Promise<TestRunStatus> {
    const timeoutMs = (job.payload.timeoutSeconds ?? this.defaultTimeoutSeconds) * 1000;
    const output = new TailBuffer(this.logTailBytes);
    const started = Date.now();
    return new Promise((resolve) => {
      const child = spawn('sh', ['-c', testCommand(job)], {
        cwd: dir,
        // Own process group: the timeout kills the tests and whatever they started, together.
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? dir, LANG: 'C.UTF-8', CI: 'true', ...buildEnvironment(job) },
      });
      const pid = child.pid;
      if (pid !== undefined) active.state = { ...active.state, pid };
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        if (pid !== undefined) killGroup(pid);
      }, timeoutMs);
      child.stdout.on('data', (chunk: Buffer) => output.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => output.push(chunk));
      // The leader exited: end what it left behind, or its open pipes would keep the run alive.
      child.on('exit', () => {
        if (pid !== undefined) killGroup(pid);
      });
      child.on('error', (error) => {
        clearTimeout(timer);
        resolve({ state: 'ERROR', status: 'FAULT', message: `could not start the tests: ${error.message}` });
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        const durationMs = Date.now() - started;
        if (timedOut) {
          resolve({ state: 'ERROR', status: 'TIMED_OUT', message: `no result after ${timeoutMs / 1000}s; last output:\n${output.text()}` });
        } else if (this.closed) {
          resolve({ state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down during the run' });
        } else if (code === 0) {
          resolve({ state: 'PASSED', exitCode: 0, logTail: output.text(), durationMs });
        } else {
          const note = signal ? `\n[killed by ${signal}]` : '';
          resolve({ state: 'FAILED', exitCode: code, logTail: tail(output.text() + note, this.logTailBytes), durationMs });
        }
      });
    });
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

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Keeps the last `maxBytes` of a stream without holding all of it. */
class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    // Compact once twice over the limit, so a chatty test costs O(output), not O(output x chunks).
    if (this.size > 2 * this.maxBytes) {
      const joined = Buffer.concat(this.chunks);
      this.chunks = [joined.subarray(joined.length - this.maxBytes)];
      this.size = this.maxBytes;
    }
  }

  text(): string {
    return tail(Buffer.concat(this.chunks).toString('utf8'), this.maxBytes);
  }
}
