/**
 * How far a local test command is kept from the machine: three levels, the best the machine
 * allows, found once at start (run-launcher.ts probes them) and said at start and by `doctor`.
 *
 * 1. `sandbox`: bubblewrap (sandbox.ts): the host read-only, its own writable tmpfs, its own
 *    network with no route to the host's loopback, its own PID namespace, not root.
 * 2. `namespaces`, where bubblewrap is missing: util-linux `unshare` makes the command root of user,
 *    mount and PID namespaces of its own, where the platform's state directory, the other runs and
 *    HOME (or, where a toolchain in PATH lives in HOME, the places credentials are kept there) are
 *    covered, then drops every capability (`setpriv`). The network and every other file are the
 *    platform user's.
 * 3. `none`, where the machine has neither (not Linux, user namespaces refused): the command runs
 *    as the platform's user, with a warning at start.
 *
 * Resource limits are separate (ResourceControl): cgroups where the platform can make them
 * (cgroups.ts), else per-process limits (`prlimit`), which bound much less.
 *
 * Every level dies with the platform: bubblewrap and `unshare` are started with a parent-death
 * signal, and their PID namespace takes every process of the run with it. Unconfined, only the
 * command's first process has one; what it started is ended at the next start (test-runner.ts).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { CgroupParents } from './cgroups';

/** The network of a sandbox (sandbox.ts): its own through slirp4netns, or none. */
export type SandboxNetwork = 'slirp4netns' | 'none';

export type Confinement =
  | {
      readonly kind: 'sandbox';
      readonly network: SandboxNetwork;
      readonly runAs?: { readonly uid: number; readonly gid: number };
      readonly networkMissing?: string;
    }
  | { readonly kind: 'namespaces'; readonly reason: string }
  | { readonly kind: 'none'; readonly reason: string };

export type ResourceControl =
  { readonly kind: 'cgroup'; readonly parents: CgroupParents } | { readonly kind: 'rlimit'; readonly reason: string };

/** What the runner does for every command: its confinement and how its resources are bounded. */
export interface Isolation {
  readonly confinement: Confinement;
  readonly resources: ResourceControl;
}

/** What what the isolation stops and what it does not, in a few words each: for the start, the log and `doctor`. */
export interface IsolationReport {
  /** One line: the level and its parts. */
  readonly summary: string;
  readonly stops: readonly string[];
  readonly doesNotStop: readonly string[];
  /** Set when the level is below the full sandbox: what is missing and how to get it. */
  readonly degraded?: string;
}

export function describeIsolation({ confinement, resources }: Isolation): IsolationReport {
  const limits =
    resources.kind === 'cgroup'
      ? `limits by cgroup v${resources.parents.version} (processes, memory, CPU time)`
      : `per-process limits only (${resources.reason})`;
  const stops: string[] = [];
  const doesNotStop: string[] = [];
  let summary: string;
  let degraded: string | undefined;
  switch (confinement.kind) {
    case 'sandbox': {
      const user = confinement.runAs ? `as uid ${confinement.runAs.uid}` : "as the platform's user";
      const network =
        confinement.network === 'slirp4netns' ? 'own network (slirp4netns), no host loopback' : 'no network';
      summary = `sandbox (bubblewrap), ${user}, ${network}, ${limits}`;
      stops.push(
        'writes outside its run directory and /tmp',
        "reading the platform's state, HOME and other runs",
        'seeing or signalling other processes',
      );
      if (confinement.network === 'slirp4netns') stops.push('connections to the host loopback (emulators, git server)');
      else stops.push('any network connection (package registries too)');
      if (confinement.runAs) stops.push('acting as root on host files');
      stops.push(`disk use over its limit`);
      doesNotStop.push('reading host files its user may read');
      if (confinement.network === 'slirp4netns')
        doesNotStop.push(
          'outbound connections to other hosts, including services of this machine on non-loopback addresses',
        );
      if (confinement.network === 'none')
        degraded = `no network for test commands: ${confinement.networkMissing ?? 'slirp4netns is missing'} (apt-get install slirp4netns)`;
      break;
    }
    case 'namespaces':
      summary = `namespaces (unshare), as the platform's user, shared network, ${limits}`;
      stops.push(
        "reading the platform's state, other runs and HOME (or its credentials) by any path",
        'seeing or signalling other processes',
      );
      doesNotStop.push(
        'connections to the host loopback (emulators, git server)',
        "writes anywhere the platform's user may write",
        'disk use (per file only)',
      );
      degraded = `bubblewrap is not in use: ${confinement.reason} (apt-get install bubblewrap slirp4netns)`;
      break;
    case 'none':
      summary = `unconfined, as the platform's user, ${limits}`;
      stops.push("climbing out of its directory by '..' (relative paths only)");
      doesNotStop.push("anything the platform's user may do: its files, the emulators, the network");
      degraded = `test commands run unconfined: ${confinement.reason}`;
      break;
  }
  if (resources.kind === 'cgroup') stops.push('more processes, memory or CPU time than its limits');
  else doesNotStop.push('a fork flood or memory use across processes (only per process)');
  stops.push('more output than its limit');
  return { summary, stops, doesNotStop, ...(degraded && { degraded }) };
}

/** Says at start how test commands are isolated: a warning when below the full sandbox. */
export function logIsolation(report: IsolationReport, logger: Pick<Logger, 'info' | 'warn'>): void {
  // Not `level`: the logger keeps that key for the line's own level and drops it, with a warning.
  const detail = { isolation: report.summary, stops: report.stops, doesNotStop: report.doesNotStop };
  if (report.degraded) logger.warn(`test commands are not fully sandboxed: ${report.degraded} (SECURITY.md)`, detail);
  else logger.info('test commands run sandboxed', detail);
}

/**
 * Runs in the new namespaces as their (unprivileged) root: covers each hidden directory with an
 * empty tmpfs and each hidden file with /dev/null, binds the run directory back through the
 * working directory taken before (`.` still names the covered directory; --no-canonicalize keeps
 * mount from resolving it to the new, empty path), then drops every capability for good and runs
 * the command.
 */
const CONFINE_SCRIPT = [
  'set -eu',
  'run=$1; cwd=$2; command=$3; shift 3',
  'cd "$run"',
  'for hidden in "$@"; do',
  '  if [ -d "$hidden" ]; then mount -t tmpfs -o mode=0755,size=64k agent-jobs-hidden "$hidden"',
  '  elif [ -e "$hidden" ]; then mount --bind /dev/null "$hidden"; fi',
  'done',
  'mkdir -p "$run"',
  'mount --no-canonicalize --rbind . "$run"',
  'cd "$cwd"',
  'exec setpriv --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- sh -c "$command"',
].join('\n');

const UNSHARE = ['--user', '--map-root-user', '--mount', '--pid', '--fork', '--mount-proc', '--kill-child'];

/** What one run confines its command to, and what it hides from it (the namespaces and none levels). */
export interface ConfinedRun {
  /** The run's own directory: stays visible (and writable) at its path. */
  readonly runDir: string;
  /** The command's working directory, inside runDir. */
  readonly cwd: string;
  /** Directories and files the command must not reach, by any path. */
  readonly hidden: readonly string[];
  readonly command: string;
}

/**
 * The program and arguments that run `run.command` at the namespaces or none level. Both die with
 * the platform (a parent-death signal through `setpriv`, where Linux has it); `unshare`'s own child,
 * the first process of the run's PID namespace, dies with it and takes the rest along.
 */
export function confinedCommand(
  confinement: Exclude<Confinement, { kind: 'sandbox' }>,
  run: ConfinedRun,
): { file: string; args: string[] } {
  const dieWithPlatform = process.platform === 'linux' ? ['setpriv', '--pdeathsig', 'KILL', '--'] : [];
  if (confinement.kind === 'none') return program([...dieWithPlatform, 'sh', '-c', run.command]);
  // Deepest first: a directory inside another hidden one is covered before its parent hides it.
  const hidden = [...new Set(run.hidden.map((d) => resolve(d)))].sort((a, b) => b.length - a.length);
  return program([
    ...dieWithPlatform,
    'unshare',
    ...UNSHARE,
    '--',
    'sh',
    '-c',
    CONFINE_SCRIPT,
    'agent-jobs-confine',
    resolve(run.runDir),
    resolve(run.cwd),
    run.command,
    ...hidden,
  ]);
}

function program([file = 'sh', ...args]: readonly string[]): { file: string; args: string[] } {
  return { file, args };
}

/**
 * Where, under HOME, the usual tools keep credentials: covered one by one where HOME itself cannot
 * be (the namespaces level, with a toolchain in HOME), and inside the toolchain directories the
 * sandbox binds back.
 */
export const CREDENTIALS_IN_HOME = [
  '.aws',
  '.azure',
  '.config/gcloud',
  '.config/gh',
  '.config/hub',
  '.docker',
  '.git-credentials',
  '.gitconfig',
  '.config/git',
  '.gnupg',
  '.kube',
  '.netrc',
  '.npmrc',
  '.pypirc',
  '.cargo/credentials',
  '.cargo/credentials.toml',
  '.ssh',
  '.yarnrc',
  '.yarnrc.yml',
];

/**
 * What the namespaces level keeps a command from: the given directories (state, the directory of
 * runs) and the real HOME, or, when a PATH entry lies in HOME (a toolchain installed there, e.g. by
 * a version manager, must stay reachable), the places in HOME where credentials are kept.
 */
export function hiddenPaths(
  confidential: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  home = homedir(),
): string[] {
  const realHome = resolve(home);
  if (realHome === '/') return [...confidential];
  const toolsInHome = homeToolchains(env, realHome).length > 0;
  return [...confidential, ...(toolsInHome ? CREDENTIALS_IN_HOME.map((entry) => join(realHome, entry)) : [realHome])];
}

/**
 * The toolchain directories in HOME that PATH names, as the sandbox binds them back read-only:
 * an entry `<dir>/bin` (or `shims`) stands for `<dir>` (a version manager's `bin` links into its
 * `lib`), any other entry for itself; HOME itself is never one.
 */
export function homeToolchains(env: NodeJS.ProcessEnv = process.env, home = homedir()): string[] {
  const realHome = resolve(home);
  if (realHome === '/') return [];
  const dirs = (env.PATH ?? '')
    .split(delimiter)
    .filter((entry) => isAbsolute(entry))
    .map((entry) => resolve(entry))
    .filter((entry) => entry !== realHome && isInside(entry, realHome))
    .map((entry) =>
      /^(bin|shims)$/.test(entry.split(sep).pop() ?? '') && dirname(entry) !== realHome ? dirname(entry) : entry,
    );
  return outermost(dirs);
}

/** Directories not inside another of the list (covering the outer one covers them). */
export function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)];
  return unique.filter((path) => !unique.some((other) => other !== path && isInside(path, other)));
}

export function isInside(dir: string, parent: string): boolean {
  const path = relative(parent, dir);
  return path === '' || (!path.startsWith('..') && !isAbsolute(path));
}
