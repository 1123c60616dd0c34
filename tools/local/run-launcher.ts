/**
 * Starts one run's command under the machine's isolation (confinement.ts) and reports what it
 * uses, for the runner (test-runner.ts) to enforce its limits and end it:
 *
 * - every level: the command starts in a process group of its own, with stderr joined to stdout
 *   on one pipe (the runner counts what it prints); first, the launcher's own shell joins the run's
 *   cgroup in every hierarchy, so every process of the run is in it from the start;
 * - sandbox: bubblewrap (sandbox.ts) is started blocked; once it names its first process, the
 *   network is attached and the sandbox let go. The checkout reaches it as a tar stream on stdin.
 *   The launcher then holds its /tmp open, so the disk the run used can be read after it ended;
 * - no cgroups: per-process limits (`prlimit`): processes of the user, data memory, CPU time and,
 *   outside the sandbox, the size of any one file.
 *
 * probeIsolation finds the best level by starting a real run of `true` at each level in turn.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, openSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, statfs } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandLimits } from '../../contract/job-types';
import { errorMessage } from '../../src/core/errors';
import {
  findCgroupParents,
  joinFiles,
  makeRunGroup,
  readRunGroupUsage,
  removeRunGroup,
  type RunGroupDirs,
} from './cgroups';
import {
  confinedCommand,
  CREDENTIALS_IN_HOME,
  hiddenPaths,
  homeToolchains,
  isInside,
  type Confinement,
  type Isolation,
  type ResourceControl,
  type SandboxNetwork,
} from './confinement';
import {
  attachNetwork,
  SANDBOX_FDS,
  SANDBOX_PATHS,
  SANDBOX_RESOLV_CONF,
  SANDBOX_USER,
  sandboxArgs,
  sandboxChildPid,
  sandboxLaunchers,
} from './sandbox';

const MIB = 1024 * 1024;
/** Free space under which the run's disk counts as full (a write of any size failed there). */
const DISK_FULL_SLACK_BYTES = 256 * 1024;
/** statfs type of tmpfs (linux/magic.h). */
const TMPFS_MAGIC = 0x01021994;

export interface LaunchSpec {
  /** The run's own directory on the host: `workspace/` (the checkout), `home/`, `tmp/`. */
  readonly runDir: string;
  readonly command: string;
  /** The command's environment; the launcher adds HOME and TMPDIR. */
  readonly env: Readonly<Record<string, string>>;
  /** Host directories no command may see (the platform's state, the directory of runs); HOME is added. */
  readonly hidden: readonly string[];
  readonly limits: CommandLimits;
  /**
   * The run's cgroup where the isolation has cgroups, planned (planRunGroup) and recorded by the
   * caller (a platform killed once it is made leaves what the next start ends); made here.
   */
  readonly group?: RunGroupDirs;
}

/** What a run has used so far, as far as the machine tells. */
export interface RunSample {
  readonly processLimitReached: boolean;
  readonly oomKills: number;
  readonly cpuSeconds: number;
  /** Its writable places were full at a sample (sandbox only). */
  readonly diskFull: boolean;
}

/** A sample of a run with nothing to measure (no run group) or no answer: no limit reached. */
export const NO_USAGE: RunSample = { processLimitReached: false, oomKills: 0, cpuSeconds: 0, diskFull: false };

export interface RunExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly error?: Error;
}

export interface LaunchedRun {
  /** Leader of the run's process group on the host. */
  readonly pid: number;
  /** stdout and stderr of the command, on one stream. */
  readonly output: Readable;
  /** Never rejects: a launcher that could not start resolves with its error. */
  readonly exited: Promise<RunExit>;
  sample(): Promise<RunSample>;
  /** Ends every process of the run now (also before it exited). */
  kill(): void;
  /** After the exit: the last sample, then the network, the group and the held disk are let go. */
  finish(): Promise<RunSample>;
}

/** The run's directories as its command sees them, per level. */
export function runPaths(confinement: Confinement, runDir: string): { workspace: string; home: string; tmp: string } {
  if (confinement.kind === 'sandbox')
    return { workspace: SANDBOX_PATHS.workspace, home: SANDBOX_PATHS.home, tmp: SANDBOX_PATHS.tmp };
  return { workspace: join(runDir, 'workspace'), home: join(runDir, 'home'), tmp: join(runDir, 'tmp') };
}

/**
 * Joins the run's cgroups (their `cgroup.procs` files come first, after their count), joins
 * stderr to stdout, then becomes the program.
 */
const LAUNCH_SCRIPT = [
  'exec 2>&1',
  'n=$1; shift',
  'while [ "$n" -gt 0 ]; do echo $$ > "$1" || { echo "agent-jobs: could not join the run\'s cgroup $1" >&2; exit 125; }; shift; n=$((n - 1)); done',
  'exec "$@"',
].join('\n');

export async function launchRun(isolation: Isolation, spec: LaunchSpec): Promise<LaunchedRun> {
  const { confinement, resources } = isolation;
  const group = spec.group === undefined ? undefined : await makeRunGroup(spec.group, spec.limits);
  try {
    const runAs = confinement.kind === 'sandbox' ? confinement.runAs : undefined;
    const rlimits =
      resources.kind === 'rlimit' && process.platform === 'linux'
        ? await rlimitPrefix(spec.limits, confinement, runAs?.uid ?? process.getuid?.())
        : [];
    return await start(confinement, spec, rlimits, group);
  } catch (error) {
    if (group) await removeRunGroup(group).catch(() => undefined);
    throw error;
  }
}

/** Starts the run at a level, under the given `prlimit` prefix and in the given group (if any). */
async function start(
  confinement: Confinement,
  spec: LaunchSpec,
  prefix: readonly string[],
  group: RunGroupDirs | undefined,
): Promise<LaunchedRun> {
  const paths = runPaths(confinement, spec.runDir);
  const env = { ...spec.env, HOME: paths.home, TMPDIR: paths.tmp };
  const joins = group ? joinFiles(group) : [];
  if (confinement.kind === 'sandbox') {
    const { file, args } = sandboxProgram(confinement, spec, env);
    return startSandbox(confinement, spec, [...prefix, file, ...args], joins, group);
  }
  const { file, args } = confinedCommand(confinement, {
    runDir: spec.runDir,
    cwd: paths.workspace,
    hidden: hiddenPaths(spec.hidden),
    command: spec.command,
  });
  return startPlain([...prefix, file, ...args], joins, group, env, paths.workspace);
}

function sandboxProgram(
  confinement: Extract<Confinement, { kind: 'sandbox' }>,
  spec: LaunchSpec,
  env: Record<string, string>,
): { file: string; args: string[] } {
  const home = homedir();
  // What the sandbox's user could not reach anyway needs no cover (and bubblewrap, as that user, could not make one).
  const visible = (path: string) => existsSync(path) && (!confinement.runAs || searchableByOthers(dirname(path)));
  const toolchains = homeToolchains(process.env, home).filter((dir) => !confinement.runAs || reachableByOthers(dir));
  const bwrap = sandboxArgs({
    hidden: [...spec.hidden, home].filter(visible),
    readOnly: toolchains,
    coveredFiles: CREDENTIALS_IN_HOME.map((entry) => join(home, entry)).filter(
      (path) => existsSync(path) && toolchains.some((dir) => isInside(path, dir)),
    ),
    diskBytes: spec.limits.diskMiB * MIB,
    network: confinement.network,
    // A root platform's sandbox runs as an unprivileged user: the command is root nowhere.
    user: confinement.runAs ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 },
    env,
    command: spec.command,
  });
  const [file = 'bwrap', ...args] = [...sandboxLaunchers(confinement.network, confinement.runAs), ...bwrap];
  return { file, args };
}

function startPlain(
  program: readonly string[],
  joins: readonly string[],
  group: RunGroupDirs | undefined,
  env: Record<string, string>,
  cwd: string,
): LaunchedRun {
  return launched(
    spawnLauncher(program, joins, { cwd, env, stdio: ['ignore', 'pipe', 'ignore'] }),
    group,
    undefined,
    undefined,
  );
}

async function startSandbox(
  confinement: Extract<Confinement, { kind: 'sandbox' }>,
  spec: LaunchSpec,
  program: readonly string[],
  joins: readonly string[],
  group: RunGroupDirs | undefined,
): Promise<LaunchedRun> {
  // The checkout goes in as a tar stream: no path of the platform's is shown to the sandbox.
  const tar = spawn('tar', ['-c', '-f', '-', '-C', join(spec.runDir, 'workspace'), '.'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const stdio: ['ignore' | Readable, 'pipe', 'ignore', 'pipe', 'pipe', 'pipe'] = [
    tar.stdout,
    'pipe',
    'ignore',
    'pipe',
    'pipe',
    'pipe',
  ];
  const launcher = spawnLauncher(program, joins, {
    cwd: '/',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdio,
  });
  const { child } = launcher;
  tar.stdout.destroy();
  // The sandbox closes these when it ends, also before reading them: a reset is expected, not an error.
  for (const fd of Object.values(SANDBOX_FDS)) extraFd(child, fd)?.on('error', () => undefined);
  (extraFd(child, SANDBOX_FDS.resolvConf) as Writable).end(
    confinement.network === 'slirp4netns' ? SANDBOX_RESOLV_CONF : '',
  );
  const exited = exitOf(child);
  let network: { stop(): void } | undefined;
  try {
    const info = extraFd(child, SANDBOX_FDS.info) as Readable;
    const childPid = await sandboxChildPid(info, exited);
    // bubblewrap's own process is in the network namespace sandboxLaunchers' `unshare` made.
    if (confinement.network === 'slirp4netns') network = await attachNetwork(child.pid ?? 0, confinement.runAs);
    (extraFd(child, SANDBOX_FDS.block) as Writable).write('1');
    return launched(launcher, group, network, holdDisk(childPid, spec.limits.diskMiB * MIB, exited));
  } catch (error) {
    network?.stop();
    killGroup(child.pid);
    throw error;
  }
}

/** A pipe given to the child beyond stdin, stdout and stderr (Node types child.stdio as five). */
function extraFd(child: ChildProcess, fd: number): Readable | Writable | null | undefined {
  return (child.stdio as unknown as ReadonlyArray<Readable | Writable | null>)[fd];
}

/** The launcher's process and its output, read from the start. */
interface Launcher {
  readonly child: ChildProcess;
  readonly output: Readable;
}

function spawnLauncher(
  program: readonly string[],
  joins: readonly string[],
  options: { cwd: string; env: Record<string, string>; stdio: ReadonlyArray<'ignore' | 'pipe' | Readable> },
): Launcher {
  // detached: a process group (and session) of its own, the first thing killed when the run ends.
  const child = spawn('sh', ['-c', LAUNCH_SCRIPT, 'agent-jobs-run', String(joins.length), ...joins, ...program], {
    ...options,
    stdio: [...options.stdio],
    detached: true,
  });
  // Piped at once: Node drops the output of a child that exits while nobody listens to it yet.
  const output = new PassThrough();
  child.stdout?.pipe(output);
  return { child, output };
}

/**
 * Opens the sandbox's /tmp from outside once it is mounted (the tmpfs of the run's size), and keeps
 * it open: the file system, and what the run wrote, then outlives the sandbox until released, so
 * the last sample sees what the run left. Resolves to undefined when the run ended first.
 */
async function holdDisk(childPid: number, diskBytes: number, exited: Promise<unknown>): Promise<number | undefined> {
  let done = false;
  void exited.then(() => (done = true));
  const path = `/proc/${childPid}/root${SANDBOX_PATHS.tmp}`;
  for (let wait = 2; !done && wait < 5_000; wait *= 2) {
    const fs = await statfs(path).catch(() => undefined);
    if (fs && fs.type === TMPFS_MAGIC && Math.abs(fs.blocks * fs.bsize - diskBytes) < 64 * 1024) {
      try {
        return openSync(path, 'r');
      } catch {
        return undefined;
      }
    }
    await sleep(wait);
  }
  return undefined;
}

function launched(
  { child, output }: Launcher,
  group: RunGroupDirs | undefined,
  network: { stop(): void } | undefined,
  disk: Promise<number | undefined> | undefined,
): LaunchedRun {
  const pid = child.pid;
  if (pid === undefined) {
    network?.stop();
    throw new Error('the run could not be started');
  }
  let diskFull = false;
  // Read once held: a sample never waits for the sandbox's /tmp to be mounted.
  let heldDisk: number | undefined;
  void disk?.then((fd) => (heldDisk = fd));
  const sample = async (): Promise<RunSample> => {
    const usage = group ? await readRunGroupUsage(group) : NO_USAGE;
    if (heldDisk !== undefined) {
      const fs = await statfs(`/proc/self/fd/${heldDisk}`).catch(() => undefined);
      if (fs && fs.bfree * fs.bsize < DISK_FULL_SLACK_BYTES) diskFull = true;
    }
    return { ...usage, diskFull };
  };
  const kill = () => {
    killGroup(pid);
    if (group) void removeRunGroup(group).catch(() => undefined);
  };
  return {
    pid,
    output,
    exited: exitOf(child),
    sample,
    kill,
    async finish() {
      await disk;
      const last = await sample();
      killGroup(pid);
      network?.stop();
      if (heldDisk !== undefined) closeSync(heldDisk);
      if (group) await removeRunGroup(group);
      return last;
    },
  };
}

function exitOf(child: ChildProcess): Promise<RunExit> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve({ code: child.exitCode, signal: child.signalCode });
      return;
    }
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/**
 * `prlimit` settings where no cgroup bounds the run: they hold per process, not per run. The
 * process limit counts every process of the user (the kernel does not enforce it for root), so it
 * is what the user runs now plus the run's limit.
 */
async function rlimitPrefix(
  limits: CommandLimits,
  confinement: Confinement,
  uid: number | undefined,
): Promise<string[]> {
  const nproc = uid === undefined || uid === 0 ? [] : [`--nproc=${(await processesOf(uid)) + limits.processes}`];
  // In the sandbox, the tmpfs bounds the disk; elsewhere only a file's size can be.
  const fsize = confinement.kind === 'sandbox' ? [] : [`--fsize=${limits.diskMiB * MIB}`];
  return ['prlimit', ...nproc, `--data=${limits.memoryMiB * MIB}`, `--cpu=${limits.cpuSeconds}`, ...fsize, '--'];
}

async function processesOf(uid: number): Promise<number> {
  const entries = (await readdir('/proc').catch(() => [])).filter((e) => /^\d+$/.test(e));
  const owners = await Promise.all(
    entries.map((pid) =>
      readFile(`/proc/${pid}/status`, 'utf8').then(
        (s) => /^Uid:\s+(\d+)/m.exec(s)?.[1],
        () => undefined,
      ),
    ),
  );
  return owners.filter((owner) => owner === String(uid)).length;
}

/** Whether a user other than the owner and group can reach `dir` (every directory on the way searchable) and list it. */
function reachableByOthers(dir: string): boolean {
  return searchableByOthers(dir) && (modeOf(dir) & 0o004) !== 0;
}

/** Whether every directory from `/` down to `dir`, `dir` included, is searchable by other users. */
function searchableByOthers(dir: string): boolean {
  for (let path = dir; ; path = dirname(path)) {
    if ((modeOf(path) & 0o001) === 0) return false;
    if (dirname(path) === path) return true;
  }
}

function modeOf(path: string): number {
  try {
    return statSync(path).mode;
  } catch {
    return 0;
  }
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

let probed: Promise<Isolation> | undefined;

/**
 * The isolation this machine gives test commands, found once per process: each level is tried by
 * starting a real run of `true` through it (a level a machine refuses fails here, with the reason),
 * best first: the sandbox with its network, without, the namespaces, none.
 */
export function probeIsolation(scratchDir: string): Promise<Isolation> {
  probed ??= (async (): Promise<Isolation> => {
    const found = await findCgroupParents();
    const resources: ResourceControl =
      'unavailable' in found ? { kind: 'rlimit', reason: found.unavailable } : { kind: 'cgroup', parents: found };
    const runAs = process.getuid?.() === 0 ? SANDBOX_USER : undefined;
    const sandbox = (network: SandboxNetwork, networkMissing?: string): Confinement => ({
      kind: 'sandbox',
      network,
      ...(runAs && { runAs }),
      ...(networkMissing && { networkMissing }),
    });
    if (process.platform !== 'linux')
      return { confinement: { kind: 'none', reason: `no Linux namespaces on ${process.platform}` }, resources };
    // A missing program is named as such: started anyway, it only "exits before the sandbox started".
    const noBubblewrap = notInstalled('bubblewrap', 'bwrap');
    const namespacesOnly = noBubblewrap
      ? await tryLevel(scratchDir, { kind: 'namespaces', reason: noBubblewrap })
      : 'not tried';
    if (noBubblewrap && namespacesOnly === undefined)
      return { confinement: { kind: 'namespaces', reason: noBubblewrap }, resources };
    if (noBubblewrap)
      return {
        confinement: {
          kind: 'none',
          reason: `${noBubblewrap}, and unprivileged user namespaces are not available here (${namespacesOnly})`,
        },
        resources,
      };
    const noSlirp = notInstalled('slirp4netns', 'slirp4netns');
    const full = noSlirp ?? (await tryLevel(scratchDir, sandbox('slirp4netns')));
    if (full === undefined) return { confinement: sandbox('slirp4netns'), resources };
    const offline = await tryLevel(scratchDir, sandbox('none'));
    if (offline === undefined) return { confinement: sandbox('none', full), resources };
    const namespaces = await tryLevel(scratchDir, { kind: 'namespaces', reason: offline });
    if (namespaces === undefined) return { confinement: { kind: 'namespaces', reason: offline }, resources };
    return {
      confinement: { kind: 'none', reason: `unprivileged user namespaces are not available here (${namespaces})` },
      resources,
    };
  })();
  return probed;
}

/** Why `program` cannot run (`<what> is not installed (no <program> on PATH)`), or undefined when PATH has it. */
function notInstalled(what: string, program: string): string | undefined {
  const found = (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, program), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  return found ? undefined : `${what} is not installed (no ${program} on PATH)`;
}

/** Runs `true` at a level, as a real run (the run directory inside a hidden one); the problem, or undefined when it worked. */
async function tryLevel(scratchDir: string, confinement: Confinement): Promise<string | undefined> {
  const dir = await mkdtemp(join(scratchDir, 'agent-jobs-probe-'));
  try {
    const runDir = join(dir, 'runs', 'run');
    await Promise.all(['workspace', 'home', 'tmp'].map((d) => mkdir(join(runDir, d), { recursive: true })));
    const limits = { processes: 64, memoryMiB: 256, diskMiB: 16, cpuSeconds: 10, outputMiB: 1 };
    const run = await start(
      confinement,
      {
        runDir,
        command: 'true',
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
        hidden: [join(dir, 'runs')],
        limits,
      },
      [],
      undefined,
    );
    let said = '';
    run.output.on('data', (chunk: Buffer) => (said = (said + chunk.toString()).slice(-1_000)));
    const timer = setTimeout(() => run.kill(), 10_000);
    const { code, signal, error } = await run.exited.finally(() => clearTimeout(timer));
    await run.finish();
    if (error) return errorMessage(error);
    return code === 0 ? undefined : `${signal ?? `exit ${code}`}: ${said.trim().split('\n')[0] ?? ''}`.trim();
  } catch (error) {
    return errorMessage(error).split('\n')[0];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
