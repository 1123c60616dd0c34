/**
 * The command runner of the local platform: checks out the pinned commit and runs a command
 * stage's command in a child process. At most one build per job and run number: the build is
 * claimed by creating its state file exclusively, and the state file (atomic writes) lets
 * `describe` answer for any build this directory has seen. The child process's exit is the
 * build's completion event: `onFinished` hands it to the platform, which puts it on the
 * build-events queue, the same path CodeBuild's events take on AWS.
 *
 * Isolation (confinement.ts says what each level stops; SECURITY.md what it does not):
 * - Each run gets a throw-away directory outside the platform's state directory (under the system
 *   temp directory): `workspace/` (the checkout), `home/` and `tmp/`. No path into the state
 *   directory is handed over, and `..` from the workspace leads to the directory of runs, not to
 *   the platform's files. The scratch directory is hidden from the command but for its own run:
 *   it lists no other run's directory, of this runner or another.
 * - The command runs at the best level the machine allows (run-launcher.ts): in a bubblewrap
 *   sandbox, with the checkout copied into a private tmpfs of the run's disk limit, its own network
 *   and PID namespace; else in namespaces of its own; else unconfined, with a warning at start.
 * - Its resources are bounded by the job type's limits (contract/job-types.ts): processes, memory,
 *   CPU time through the run's cgroup, disk through the sandbox's tmpfs, output here. A run that
 *   reaches one is ended at once and fails with TEST_RUN_ERROR naming the limit.
 * - The environment is scrubbed: PATH, the locale, CI, the build variables the CodeBuild runner
 *   also sets (contract/runtime-env.ts TEST_BUILD_ENV) and nothing of the platform's.
 * - The runner checks out the pinned commit itself (only that commit, like the buildspec), with a
 *   read-only credential for that one repository that is revoked before the command starts: the
 *   command holds no credential, and the git server refuses it anything (pushes included).
 *
 * A build is `local:<jobId>:<run>:<key>`, its files `runs/<jobId>.<run>.<key>.*`: the run's key
 * (CommandRun.key) keeps a job sent again under the same id, once an in-memory ledger forgot the
 * first, from ever meeting the first's run record or output.
 *
 * Ending a run: the command's output comes through a pipe the runner counts, to a file in the
 * state directory (`runs/<jobId>.<run>.<key>.out`, kept at the end as `.log`, its last bytes). When the
 * command exits, times out or reaches a limit, the runner kills its process group, its cgroup's
 * processes and every process still carrying the run's marker variable (started by the command,
 * even after `setsid`), and waits until they are gone. A run never outlives the platform: its
 * sandbox or namespaces die with it; and what a killed platform's runs left (their processes,
 * cgroups and directories, recorded in their state before the command started) is ended and
 * removed at the next start, before any new run (takeOrphanedRuns).
 *
 * Cancelling a run (decisions §33): `stop` and `requestStop` leave a stop request beside the run's
 * state (`runs/<jobId>.<run>.<key>.stop`), which the CLI can write from its own process; the runner looks
 * for it before the command starts and while it runs (with its limits), and ends the run as it ends
 * one at a limit, recording it STOPPED. Its completion then finds the job CANCELLED and changes nothing.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { access, copyFile, mkdir, open, readFile, readdir, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import * as z from 'zod/mini';
import '../../contract/zod-english';
import { commandLimitsOf, ID_PATTERN, type CommandLimits } from '../../contract/job-types';
import { readBuildEvent } from '../../src/core/build-completion';
import { ConfigurationError, RetryAfterError, errorMessage } from '../../src/core/errors';
import type {
  BuildCompletion,
  BuildStopper,
  CommandRun,
  FinishedRunStatus,
  TestRunner,
  TestRunStatus,
} from '../../src/core/ports';
import { LOG_TAIL_BYTES, buildEnvironment, tail } from '../../src/core/jobs/command-stage';
import { OUTPUT_KEEP_BYTES } from './state-dir';
import { endProcesses, planRunGroup, removeLeftRunGroup, type RunGroupDirs } from './cgroups';
import { isInside, type Confinement, type Isolation, type ResourceControl } from './confinement';
import { launchRun, NO_USAGE, probeIsolation, type LaunchedRun, type RunSample } from './run-launcher';
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
  /** Holds `runs/<jobId>.<run>.<key>.json` (state) only: the commands never see it. */
  readonly stateDir: string;
  /**
   * Where the runner makes its directory of throw-away runs (`agent-jobs-runs-*`, hidden from every
   * command but its own run); must not be inside stateDir. @default os.tmpdir()
   */
  readonly scratchDir?: string;
  /** Puts the pinned commit into `dir`. @default gitCliCheckout */
  readonly checkout?: Checkout;
  /** Read-only credentials for the checkout. @default none (a remote that needs no credential) */
  readonly readAccess?: ReadAccess;
  /**
   * More directories no command may reach (the platform's whole state directory); the runner's own
   * state directory, its scratch directory and the real HOME are always hidden.
   */
  readonly confidential?: readonly string[];
  /** How commands are confined. @default the best level probeIsolation finds this machine allows */
  readonly confinement?: Confinement;
  /** How their resources are bounded. @default cgroups where probeIsolation finds them, else per-process limits */
  readonly resources?: ResourceControl;
  /** What one run of a job type may use. @default commandLimitsOf (the job type's declaration) */
  readonly limitsOf?: (jobType: string) => CommandLimits;
  /** Bytes of output kept in the run's state (its verdict's log tail). @default LOG_TAIL_BYTES */
  readonly logTailBytes?: number;
  /** Bytes of output kept in `runs/<jobId>.<run>.<key>.log` for `agent-jobs logs`: the end of it. @default OUTPUT_KEEP_BYTES */
  readonly outputKeepBytes?: number;
  /**
   * Builds that may run at once: a start beyond it is refused as CodeBuild refuses one beyond the
   * account's concurrent-build quota (a RetryAfterError the pipeline turns into a wait), so the
   * local platform shows the same back-pressure. @default no limit
   */
  readonly maxConcurrentBuilds?: number;
  /**
   * Called once a build has finished and its state is written: the build's completion event. A
   * rejection is ignored here (the reconciler finds the build from its state file later).
   */
  readonly onFinished?: (completion: BuildCompletion) => Promise<void>;
}

/** What the state file holds. */
export interface LocalRunState {
  readonly buildId: string;
  readonly jobId: string;
  readonly jobType: string;
  readonly sha: string;
  readonly run: number;
  readonly status: TestRunStatus;
  /** Process group of the running command (its leader's pid). */
  readonly pid?: number;
  /** The run's directory, recorded before it is made: removed at start if its platform died. */
  readonly runDir?: string;
  /** The value of the run's marker variable: what carries it is ended at start if its platform died. */
  readonly marker?: string;
  /** The run's cgroup: ended and removed at start if its platform died. */
  readonly cgroup?: RunGroupDirs;
  readonly startedAt: number;
}

/** The run named by a build id is not known to this state directory. */
export class UnknownBuildError extends Error {
  override readonly name = 'UnknownBuildError';
}

/** Git with no system or user configuration and no prompt: only what the runner passes applies. */
const GIT_ENV = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_TERMINAL_PROMPT: '0',
};

/**
 * Fetches exactly the pinned commit (as the CodeBuild buildspec does) and checks it out detached.
 * The credential travels as an HTTP header in git's environment (GIT_CONFIG_*), never in a URL,
 * on a command line or in the checkout's `.git/config`.
 */
export const gitCliCheckout: Checkout = async ({ repoUrl, sha, dir, auth }) => {
  const header = auth
    ? {
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'http.extraHeader',
        GIT_CONFIG_VALUE_0: `Authorization: Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`,
      }
    : {};
  const git = (...args: string[]) => run('git', args, { cwd: dir, env: { ...GIT_ENV, ...header } });
  await git('init', '--quiet');
  await git('fetch', '--quiet', '--depth', '1', '--no-tags', repoUrl, sha);
  await git('-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', 'FETCH_HEAD');
};

const RESTARTED = 'the local test runner restarted while this run was in progress';

/** `local:<jobId>:<run>:<key>`: the job id never holds a colon (ID_PATTERN), the key is hex. */
const BUILD_ID = /^local:([^:]+):(\d+):([0-9a-f]{16})$/;

/** `runs/<jobId>.<run>.<key>.<extension>`; throws UnknownBuildError for an id that is not a local build's. */
function runFile(stateDir: string, buildId: string, extension: 'json' | 'log' | 'out' | 'stop'): string {
  const match = BUILD_ID.exec(buildId);
  if (!match?.[1] || !ID_PATTERN.test(match[1])) throw new UnknownBuildError(`${buildId} is not a local build id`);
  return join(stateDir, 'runs', `${match[1]}.${match[2]}.${match[3]}.${extension}`);
}

/**
 * The output a finished local run kept (at most OUTPUT_KEEP_BYTES, the end), from the runner's
 * state directory; undefined for a run that kept none (still running, never started, or older).
 */
export async function readRunOutput(stateDir: string, buildId: string): Promise<string | undefined> {
  return readFile(runFile(stateDir, buildId, 'log'), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
}

/** The last `maxBytes` a run still running has printed; undefined for a run that is not printing (ended, or not started). */
export async function readRunningOutput(
  stateDir: string,
  buildId: string,
  maxBytes: number,
): Promise<string | undefined> {
  return readTail(runFile(stateDir, buildId, 'out'), maxBytes).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
}

/** A piece of a run's output read from an offset: what it printed from there, and where the next read starts. */
export interface OutputPiece {
  readonly text: string;
  readonly nextOffset: number;
  /** Bytes before `offset`'s place that were no longer kept (a long output cut to its end): not shown. */
  readonly skipped: number;
}

/** Bytes read per piece: what a follower holds at once, however long the output. */
const PIECE_BYTES = 64 * 1024;

/**
 * What a local run printed from byte `offset` of its output, at most PIECE_BYTES: from the output
 * file while it runs, from the kept output once it ended (whose first bytes may be cut: those are
 * counted in `skipped`). Reads nothing when neither is there yet (the run has not started).
 */
export async function readRunOutputFrom(stateDir: string, buildId: string, offset: number): Promise<OutputPiece> {
  const running = await readPiece(runFile(stateDir, buildId, 'out'), offset, 0);
  if (running) return running;
  const cut = await readCutMarker(runFile(stateDir, buildId, 'log'));
  const kept = await readPiece(
    runFile(stateDir, buildId, 'log'),
    Math.max(offset, cut.cutBytes),
    cut.cutBytes - cut.markerBytes,
  );
  if (!kept) return { text: '', nextOffset: offset, skipped: 0 };
  return { ...kept, skipped: Math.max(0, cut.cutBytes - offset) };
}

/** Up to PIECE_BYTES of `path` from the output's byte `offset`, the file starting at output byte `base`; undefined when there is no file. */
async function readPiece(path: string, offset: number, base: number): Promise<OutputPiece | undefined> {
  let file;
  try {
    file = await open(path, 'r');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const { size } = await file.stat();
    const at = offset - base;
    const buffer = Buffer.alloc(Math.max(0, Math.min(PIECE_BYTES, size - at)));
    const { bytesRead } = await file.read(buffer, 0, buffer.length, at);
    // A character cut at the end of the piece is read whole with the next one.
    const whole = completeUtf8(buffer.subarray(0, bytesRead));
    return { text: whole.toString('utf8'), nextOffset: offset + whole.length, skipped: 0 };
  } finally {
    await file.close();
  }
}

/** The kept output's cut: how many bytes of the output it lacks, and how long its marker line is (keepOutput writes both). */
async function readCutMarker(path: string): Promise<{ cutBytes: number; markerBytes: number }> {
  const head = (await readPiece(path, 0, 0).catch(() => undefined))?.text.slice(0, 200) ?? '';
  const match = /^\[the first (\d+) bytes of the output were not kept\]\n/.exec(head);
  return match?.[1]
    ? { cutBytes: Number(match[1]), markerBytes: Buffer.byteLength(match[0]) }
    : { cutBytes: 0, markerBytes: 0 };
}

/** `bytes` without a UTF-8 sequence cut at its end. */
function completeUtf8(bytes: Buffer): Buffer {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const byte = bytes[bytes.length - back] ?? 0;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return length > back ? bytes.subarray(0, bytes.length - back) : bytes;
  }
  return bytes;
}

/**
 * Asks for the run's end (its job was cancelled): the runner that runs it, in this process or the
 * platform's, ends it within a moment; a run that has ended, or not started, is left as it is
 * (one that has not started its command yet never does).
 */
export async function requestStop(stateDir: string, buildId: string): Promise<void> {
  const path = runFile(stateDir, buildId, 'stop');
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, '', { mode: 0o600 });
}

const CANCELLED = 'cancelled by the operator (agent-jobs cancel): the run was ended';

export function localBuildId(
  run: Pick<CommandRun, 'run' | 'key'> & { readonly job: Pick<CommandRun['job'], 'jobId'> },
): string {
  return `local:${run.job.jobId}:${run.run}:${run.key}`;
}

/**
 * The local builds of a job that started at or after `since` (epoch ms, the job's creation), by
 * run number: an earlier job's under the same id, left by a platform whose ledger forgot it, is
 * not this job's.
 */
export async function buildsOfJob(
  stateDir: string,
  jobId: string,
  since: number,
): Promise<{ readonly buildId: string; readonly run: number }[]> {
  const builds = (await readRunStates(stateDir, `${jobId}.`)).filter(
    (state) => state.jobId === jobId && state.startedAt >= since,
  );
  return builds
    .sort((a, b) => a.run - b.run || a.startedAt - b.startedAt)
    .map(({ buildId, run }) => ({ buildId, run }));
}

/**
 * The run states in `runs/` whose file names start with `prefix`. A state file of another version
 * (or cut short) is no run this runner knows: skipped.
 */
async function readRunStates(stateDir: string, prefix = ''): Promise<LocalRunState[]> {
  const files = await readdir(join(stateDir, 'runs')).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const states: LocalRunState[] = [];
  for (const file of files.filter((f) => f.startsWith(prefix) && f.endsWith('.json'))) {
    const parsed = localRunState.safeParse(
      parseJsonOrUndefined(await readFile(join(stateDir, 'runs', file), 'utf8').catch(() => '')),
    );
    if (parsed.success) states.push(parsed.data);
  }
  return states;
}

/** Names the run's processes in their environment, so the ones that left its process group are found. */
const RUN_MARKER = 'AGENT_JOBS_TEST_RUN';

interface ActiveRun {
  state: LocalRunState;
  done: Promise<void>;
  /** Set while the command runs: ends it and everything it started (a shutdown, or a cancel). */
  stop?: (why: 'stop' | 'cancel') => void;
}

export class LocalTestRunner implements TestRunner, BuildStopper {
  private readonly active = new Map<string, ActiveRun>();
  /** Starts between their quota check and their place in `active`. */
  private starting = 0;
  private closed = false;
  private readonly checkout: Checkout;
  private readonly scratchDir: string;
  private readonly logTailBytes: number;
  private readonly outputKeepBytes: number;
  private isolationFound?: Promise<Isolation>;
  /** This runner's directory of runs (`agent-jobs-runs-<random>`), made on first use and removed on close. */
  private readonly runsDir: string;
  private runsDirMade?: Promise<unknown>;
  private readonly limitsOf: (jobType: string) => CommandLimits;

  constructor(private readonly options: LocalTestRunnerOptions) {
    this.checkout = options.checkout ?? gitCliCheckout;
    this.logTailBytes = options.logTailBytes ?? LOG_TAIL_BYTES;
    this.outputKeepBytes = options.outputKeepBytes ?? OUTPUT_KEEP_BYTES;
    this.scratchDir = resolve(options.scratchDir ?? tmpdir());
    if (isInside(this.scratchDir, resolve(options.stateDir))) {
      throw new ConfigurationError(
        `the test runner's scratch directory ${this.scratchDir} is inside its state directory ${options.stateDir}: test commands would reach it`,
      );
    }
    this.runsDir = join(this.scratchDir, `${RUNS_DIR_PREFIX}${randomBytes(8).toString('hex')}`);
    this.limitsOf = options.limitsOf ?? commandLimitsOf;
  }

  async start(run: CommandRun): Promise<{ buildId: string }> {
    const { job } = run;
    const buildId = localBuildId(run);
    if (this.active.has(buildId)) return { buildId };
    const quota = this.options.maxConcurrentBuilds;
    // Starts still writing their state file hold a place too: two concurrent starts never both pass.
    if (quota !== undefined && this.active.size + this.starting >= quota) {
      throw new RetryAfterError(
        'build-quota',
        `the local test runner runs at most ${quota} builds at once (maxConcurrentBuilds)`,
      );
    }
    const state: LocalRunState = {
      buildId,
      jobId: job.jobId,
      jobType: job.type,
      sha: job.pin.sha,
      run: run.run,
      status: { state: 'RUNNING' },
      startedAt: Date.now(),
    };
    this.starting += 1;
    try {
      await mkdir(join(this.options.stateDir, 'runs'), { recursive: true });
      // Exclusive create: a second start for the run (another delivery, a restart) finds it taken.
      await writeFile(this.statePath(buildId), JSON.stringify(state), { flag: 'wx' });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') return { buildId };
      throw error;
    } finally {
      this.starting -= 1;
    }
    const active: ActiveRun = { state, done: Promise.resolve() };
    this.active.set(buildId, active);
    // Only a state file that cannot be written rejects: poll then reports the run as lost (STOPPED).
    active.done = this.execute(run, active).catch(() => undefined);
    return { buildId };
  }

  /** The state of builds this directory has seen; unknown ids are absent. */
  async describe(buildIds: readonly string[]): Promise<Map<string, TestRunStatus>> {
    const statuses = new Map<string, TestRunStatus>();
    for (const buildId of buildIds) {
      try {
        statuses.set(buildId, await this.poll(buildId));
      } catch (error) {
        if (!(error instanceof UnknownBuildError)) throw error;
      }
    }
    return statuses;
  }

  async poll(buildId: string): Promise<TestRunStatus> {
    const active = this.active.get(buildId);
    if (active) return active.state.status;
    const state = await this.readState(buildId);
    // RUNNING on disk but not here: the process that ran it is gone, and so is the run.
    if (state.status.state === 'RUNNING') {
      return { state: 'ERROR', status: 'STOPPED', message: RESTARTED };
    }
    return state.status;
  }

  /** Ends a run whose job was cancelled: its stop request (requestStop) is left for it, and a run of this process ends at once. */
  async stop(buildId: string): Promise<void> {
    await requestStop(this.options.stateDir, buildId);
    this.active.get(buildId)?.stop?.('cancel');
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

  /**
   * Runs a previous process of the platform left RUNNING on disk (it was killed mid-run): what each
   * left is ended and removed (its cgroup, the processes carrying its marker, its directory; its
   * output so far is kept for `agent-jobs logs`), then each is recorded STOPPED and returned as a
   * completion, so the platform completes its job at start instead of leaving it to the reconciler
   * hours later. Call before starting any run.
   */
  async takeOrphanedRuns(): Promise<BuildCompletion[]> {
    const orphans: BuildCompletion[] = [];
    const deadRunsDirs = new Set<string>();
    for (const state of await readRunStates(this.options.stateDir)) {
      if (this.active.has(state.buildId)) continue;
      // A dead platform's directory of runs goes once its last run's directory has.
      if (state.runDir && isRunDir(state.runDir) && dirname(state.runDir) !== this.runsDir)
        deadRunsDirs.add(dirname(state.runDir));
      if (state.status.state !== 'RUNNING') continue;
      await this.removeLeftovers(state);
      const status: FinishedRunStatus = { state: 'ERROR', status: 'STOPPED', message: RESTARTED };
      await writeFileAtomic(this.statePath(state.buildId), JSON.stringify({ ...state, status }));
      orphans.push({ buildId: state.buildId, jobId: state.jobId, jobType: state.jobType, sha: state.sha, status });
    }
    for (const dir of deadRunsDirs) await rmdir(dir).catch(() => undefined);
    return orphans;
  }

  /** How this runner isolates its commands (decided once, on first use). */
  isolation(): Promise<Isolation> {
    this.isolationFound ??= (async () => {
      const { confinement, resources } = this.options;
      const probed = confinement && resources ? undefined : await probeIsolation(this.scratchDir);
      return { confinement: confinement ?? probed!.confinement, resources: resources ?? probed!.resources };
    })();
    return this.isolationFound;
  }

  /** Resolves when every run this instance started has finished and reported its end. */
  async settled(): Promise<void> {
    await Promise.all([...this.active.values()].map((a) => a.done));
  }

  /** Ends every running test and what it started, and waits for their state to be written. */
  async close(): Promise<void> {
    this.closed = true;
    for (const run of this.active.values()) run.stop?.('stop');
    await Promise.all([...this.active.values()].map((a) => a.done));
    if (this.runsDirMade) await rm(this.runsDir, { recursive: true, force: true, maxRetries: 3 });
  }

  private async execute(run: CommandRun, active: ActiveRun): Promise<void> {
    this.runsDirMade ??= mkdir(this.runsDir, { mode: 0o700 });
    await this.runsDirMade;
    // Recorded before it exists: a platform killed from here on leaves nothing the next start does not remove.
    const runDir = join(this.runsDir, `run-${randomBytes(8).toString('hex')}`);
    await this.record(active, { runDir });
    let status: FinishedRunStatus;
    try {
      status = await this.checkoutAndRun(run, runDir, active);
    } catch (error) {
      status = { state: 'ERROR', status: 'FAULT', message: errorMessage(error) };
    }
    try {
      // Gone before the verdict is written: a platform killed in between leaves the run RUNNING on
      // disk, and the next start removes what is left of it.
      await rm(runDir, { recursive: true, force: true, maxRetries: 3 });
      await this.finish(active, status);
    } finally {
      this.active.delete(active.state.buildId);
    }
  }

  private async checkoutAndRun(run: CommandRun, runDir: string, active: ActiveRun): Promise<FinishedRunStatus> {
    const { job } = run;
    const workspace = join(runDir, 'workspace');
    await mkdir(runDir, { mode: 0o700 });
    await Promise.all(['workspace', 'home', 'tmp'].map((d) => mkdir(join(runDir, d))));
    const access = this.options.readAccess?.grant(job.pin.repoUrl);
    try {
      await this.checkout({
        repoUrl: job.pin.repoUrl,
        sha: job.pin.sha,
        dir: workspace,
        ...(access && { auth: access.auth }),
      });
    } catch (error) {
      return { state: 'ERROR', status: 'FAILED', message: `checkout of ${job.pin.sha} failed: ${errorMessage(error)}` };
    } finally {
      // The command never holds a credential: the checkout's ends here.
      access?.revoke();
    }
    if (this.closed)
      return { state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down before the tests started' };
    if (await this.stopRequested(active.state.buildId))
      return { state: 'ERROR', status: 'STOPPED', message: `${CANCELLED} before its command started` };
    return this.runCommand(run, runDir, active);
  }

  private stopRequested(buildId: string): Promise<boolean> {
    return access(runFile(this.options.stateDir, buildId, 'stop')).then(
      () => true,
      () => false,
    );
  }

  private async runCommand(run: CommandRun, runDir: string, active: ActiveRun): Promise<FinishedRunStatus> {
    const { buildId } = active.state;
    const timeoutMs = run.timeoutSeconds * 1000;
    const limits = this.limitsOf(run.job.type);
    const isolation = await this.isolation();
    const marker = randomBytes(16).toString('hex');
    const group = isolation.resources.kind === 'cgroup' ? planRunGroup(isolation.resources.parents) : undefined;
    // Before anything is started: a platform killed from here on leaves what the next start ends.
    await this.record(active, { marker, ...(group && { cgroup: group }) });
    const outPath = runFile(this.options.stateDir, buildId, 'out');
    let launched: LaunchedRun;
    try {
      launched = await launchRun(isolation, {
        runDir,
        command: run.command,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          LANG: 'C.UTF-8',
          CI: 'true',
          GIT_CONFIG_NOSYSTEM: '1',
          GIT_TERMINAL_PROMPT: '0',
          [RUN_MARKER]: marker,
          ...buildEnvironment(run),
        },
        // The whole scratch directory, not only this runner's runs: another platform's (or runner's) are not even named.
        hidden: [this.options.stateDir, ...(this.options.confidential ?? []), this.scratchDir],
        limits,
        ...(group && { group }),
      });
    } catch (error) {
      return { state: 'ERROR', status: 'FAULT', message: `could not start the tests: ${errorMessage(error)}` };
    }
    const started = Date.now();
    let ended: 'timeout' | 'stop' | 'cancel' | RunLimit | undefined;
    const end = (why: 'timeout' | 'stop' | 'cancel' | RunLimit) => {
      ended ??= why;
      launched.kill();
    };
    active.stop = end;
    // Closed while the run was being launched: it ends at once.
    if (this.closed) end('stop');
    const timer = setTimeout(() => end('timeout'), timeoutMs);
    const printed = countOutput(launched.output, outPath, limits.outputMiB * MIB, () => end('output'));
    const watching = watchLimits(launched, limits, end, () => this.stopRequested(buildId));
    await this.record(active, { pid: launched.pid });
    const exit = await launched.exited;
    clearTimeout(timer);
    watching.stop();
    active.stop = undefined;
    const last = await launched.finish().catch(() => undefined);
    ended ??= (last && limitReached(last, limits)) ?? signalLimit(exit.signal);
    // Whatever the command left behind ends with it, setsid'd or not.
    await endMarkedProcesses(marker);
    await printed.drain();
    const durationMs = Date.now() - started;
    const log = await readTail(outPath, this.logTailBytes);
    // The run directory goes with the run: the output stays beside its state. Not kept is not a
    // failed run: `agent-jobs logs` then says there is none, and the verdict keeps its tail.
    await this.keepRunOutput(buildId);
    if (exit.error)
      return { state: 'ERROR', status: 'FAULT', message: `could not start the tests: ${exit.error.message}` };
    if (ended === 'cancel') return { state: 'ERROR', status: 'STOPPED', message: `${CANCELLED}; last output:\n${log}` };
    if (ended === 'timeout')
      return {
        state: 'ERROR',
        status: 'TIMED_OUT',
        message: `no result after ${timeoutMs / 1000}s; last output:\n${log}`,
      };
    if (ended === 'stop' || this.closed)
      return { state: 'ERROR', status: 'STOPPED', message: 'the local test runner shut down during the run' };
    if (ended)
      return {
        state: 'ERROR',
        status: 'LIMIT_REACHED',
        message: `${limitMessage(ended, limits, last)}; last output:\n${log}`,
      };
    if (exit.code === 0) return { state: 'PASSED', exitCode: 0, logTail: log, durationMs };
    const note = exit.signal ? `\n[killed by ${exit.signal}]` : '';
    return { state: 'FAILED', exitCode: exit.code, logTail: tail(log + note, this.logTailBytes), durationMs };
  }

  /** Adds to the run's state, on disk too: what a start after a crash needs to clean up after it. */
  private async record(
    active: ActiveRun,
    fields: Partial<Pick<LocalRunState, 'runDir' | 'pid' | 'marker' | 'cgroup' | 'status'>>,
  ): Promise<void> {
    active.state = { ...active.state, ...fields };
    await writeFileAtomic(this.statePath(active.state.buildId), JSON.stringify(active.state));
  }

  /** Ends and removes what the run of a dead platform left: its processes, its cgroup, its directory; keeps its output. */
  private async removeLeftovers(state: LocalRunState): Promise<void> {
    if (state.cgroup) await removeLeftRunGroup(state.cgroup).catch(() => undefined);
    if (state.marker) await endMarkedProcesses(state.marker);
    await this.keepRunOutput(state.buildId);
    if (state.runDir && isRunDir(state.runDir)) await rm(state.runDir, { recursive: true, force: true, maxRetries: 3 });
  }

  /** Moves the run's output beside its state (its last bytes past the limit); output not kept leaves `logs` with none. */
  private async keepRunOutput(buildId: string): Promise<void> {
    const outPath = runFile(this.options.stateDir, buildId, 'out');
    await keepOutput(outPath, runFile(this.options.stateDir, buildId, 'log'), this.outputKeepBytes).catch(
      () => undefined,
    );
    await rm(outPath, { force: true });
  }

  private async finish(active: ActiveRun, status: FinishedRunStatus): Promise<void> {
    await this.record(active, { status });
    const { buildId, jobId, jobType, sha } = active.state;
    // The exit is the build's completion event; a lost one is found by the reconciler.
    await this.options.onFinished?.({ buildId, jobId, jobType, sha, status }).catch(() => undefined);
  }

  private async readState(buildId: string): Promise<LocalRunState> {
    try {
      return localRunState.parse(JSON.parse(await readFile(this.statePath(buildId), 'utf8')));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new UnknownBuildError(`no local run ${buildId}`);
      throw error;
    }
  }

  private statePath(buildId: string): string {
    return runFile(this.options.stateDir, buildId, 'json');
  }
}

const runStatus = z.union([
  z.object({ state: z.literal('RUNNING') }),
  z.object({
    state: z.enum(['PASSED', 'FAILED']),
    exitCode: z.nullable(z.int()),
    logTail: z.string(),
    durationMs: z.optional(z.number()),
  }),
  z.object({ state: z.literal('ERROR'), status: z.string(), message: z.string() }),
]);

/** A state file read back from disk is validated, not trusted. */
const localRunState = z.object({
  // An earlier version's build id (no run key) is another version's file: skipped, never matched.
  buildId: z.string().check(z.regex(BUILD_ID)),
  jobId: z.string(),
  jobType: z.string(),
  sha: z.string(),
  run: z.int().check(z.nonnegative()),
  status: runStatus,
  pid: z.optional(z.int()),
  runDir: z.optional(z.string()),
  marker: z.optional(z.string().check(z.regex(/^[0-9a-f]{32}$/))),
  cgroup: z.optional(
    z.object({
      version: z.union([z.literal(1), z.literal(2)]),
      pids: z.string(),
      memory: z.string(),
      cpu: z.optional(z.string()),
      cpuacct: z.optional(z.string()),
    }),
  ),
  startedAt: z.number(),
});

/** How a local build's end travels on the build-events queue (CodeBuild's events do on AWS). */
const LOCAL_RUN_EVENT = { source: 'agent-jobs.local', detailType: 'Local Build State Change' } as const;

const localRunEvent = z.object({
  source: z.literal(LOCAL_RUN_EVENT.source),
  'detail-type': z.literal(LOCAL_RUN_EVENT.detailType),
  detail: z.object({
    buildId: z.string().check(z.regex(BUILD_ID)),
    jobId: z.string().check(z.regex(ID_PATTERN)),
    jobType: z.string(),
    sha: z.string(),
    status: runStatus,
  }),
});

/** The build-events message of a finished local build. */
export function localRunEventBody(completion: BuildCompletion): string {
  return JSON.stringify({
    source: LOCAL_RUN_EVENT.source,
    'detail-type': LOCAL_RUN_EVENT.detailType,
    detail: completion,
  });
}

/** Reads a local build's completion from the build-events queue (the local platform's BuildEventParser). */
export function parseLocalRunEvent(body: string): BuildCompletion | undefined {
  const { status, ...ids } = readBuildEvent(body, localRunEvent, 'a local build event').detail;
  return status.state === 'RUNNING' ? undefined : { ...ids, status };
}

function parseJsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What a run may reach: the job type's limits (contract/job-types.ts CommandLimits). */
type RunLimit = 'processes' | 'memory' | 'disk' | 'cpu' | 'output' | 'file size';

const MIB = 1024 * 1024;
/** How often a run's use is read against its limits. */
const WATCH_MS = 250;
/** How long the output may still arrive after the run ended (a pipe held by a process that got away). */
const OUTPUT_DRAIN_MS = 2_000;

/** The limit a sample shows reached, if any. */
export function limitReached(sample: RunSample, limits: CommandLimits): RunLimit | undefined {
  if (sample.processLimitReached) return 'processes';
  if (sample.oomKills > 0) return 'memory';
  if (sample.diskFull) return 'disk';
  if (sample.cpuSeconds >= limits.cpuSeconds) return 'cpu';
  return undefined;
}

/** Per-process limits (no cgroups) end a process with a signal of their own. */
function signalLimit(signal: NodeJS.Signals | null): RunLimit | undefined {
  if (signal === 'SIGXCPU') return 'cpu';
  if (signal === 'SIGXFSZ') return 'file size';
  return undefined;
}

function limitMessage(limit: RunLimit, limits: CommandLimits, sample: RunSample | undefined): string {
  switch (limit) {
    case 'processes':
      return `the run reached its process limit (${limits.processes}): a new process or thread was refused`;
    case 'memory':
      return `the run reached its memory limit (${limits.memoryMiB} MiB, its files in /tmp included): ${sample?.oomKills ?? 1} process(es) killed for want of memory`;
    case 'disk':
      return `the run filled its disk limit (${limits.diskMiB} MiB for the checkout, HOME and /tmp together)`;
    case 'cpu':
      return `the run used up its CPU time limit (${limits.cpuSeconds} s)`;
    case 'output':
      return `the run printed more than its output limit (${limits.outputMiB} MiB)`;
    case 'file size':
      return `a file of the run reached the disk limit (${limits.diskMiB} MiB)`;
  }
}

/**
 * Reads the run's use against its limits until stopped; the first limit reached ends the run, as
 * does a stop request (its job was cancelled).
 */
function watchLimits(
  run: LaunchedRun,
  limits: CommandLimits,
  end: (why: RunLimit | 'cancel') => void,
  stopRequested: () => Promise<boolean>,
): { stop(): void } {
  let stopped = false;
  void (async () => {
    while (!stopped) {
      await sleep(WATCH_MS, undefined, { ref: false });
      if (!stopped && (await stopRequested())) end('cancel');
      const reached = stopped ? undefined : limitReached(await run.sample().catch(() => NO_USAGE), limits);
      if (reached && !stopped) end(reached);
    }
  })();
  return { stop: () => (stopped = true) };
}

/**
 * Writes the command's output to `path`, up to `limitBytes`; more calls `onLimit`. `drain`, once
 * the run has ended, waits for the rest of the output (at most OUTPUT_DRAIN_MS) and closes the file.
 */
function countOutput(
  output: Readable,
  path: string,
  limitBytes: number,
  onLimit: () => void,
): { drain(): Promise<void> } {
  const file = createWriteStream(path, { flags: 'w', mode: 0o600 });
  let printed = 0;
  output.on('data', (chunk: Buffer) => {
    if (printed < limitBytes) file.write(chunk.subarray(0, limitBytes - printed));
    printed += chunk.length;
    if (printed > limitBytes) onLimit();
  });
  const ended = new Promise<void>((resolve) => {
    output.once('end', resolve);
    output.once('close', resolve);
    output.once('error', () => resolve());
  });
  return {
    async drain() {
      const timeout = new AbortController();
      await Promise.race([ended, sleep(OUTPUT_DRAIN_MS, undefined, { signal: timeout.signal }).catch(() => undefined)]);
      timeout.abort();
      output.destroy();
      await new Promise<void>((resolve) => file.end(resolve));
    },
  };
}

/** A run directory as this runner names them: `<scratch>/agent-jobs-runs-<hex>/run-<hex>`. */
function isRunDir(path: string): boolean {
  return (
    isAbsolute(path) &&
    /^run-[0-9a-f]{16}$/.test(basename(path)) &&
    new RegExp(`^${RUNS_DIR_PREFIX}[0-9a-f]{16}$`).test(basename(dirname(path)))
  );
}

const RUNS_DIR_PREFIX = 'agent-jobs-runs-';

/**
 * Kills every process whose environment carries the run's marker: what the command started, also
 * after it left the process group (`setsid`, a daemon's double fork). Stopped first, then killed,
 * round after round, so a process cannot fork faster than it is ended; resolves once none is left.
 * Linux only (/proc); elsewhere the process group is all there is. A process that clears its own
 * environment before it detaches escapes this (SECURITY.md).
 */
async function endMarkedProcesses(marker: string): Promise<void> {
  const tag = `${RUN_MARKER}=${marker}`;
  await endProcesses(() => markedProcesses(tag), { rounds: 50, pauseMs: 20 });
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
  return found.flat();
}

/** Copies the output file, or its last `maxBytes` after a line saying how much was cut. */
async function keepOutput(from: string, to: string, maxBytes: number): Promise<void> {
  const { size } = await stat(from);
  if (size <= maxBytes) {
    await copyFile(from, to);
    return;
  }
  await writeFile(
    to,
    `[the first ${size - maxBytes} bytes of the output were not kept]\n${await readTail(from, maxBytes)}`,
    { mode: 0o600 },
  );
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
