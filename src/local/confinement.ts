/**
 * Confinement of a local test command, where Linux allows it without privileges: the command
 * runs in its own user, mount and PID namespaces (util-linux `unshare`), where
 * - the platform's state directory, the other runs' directories and the real HOME (or, where a
 *   toolchain lives in HOME, the credentials kept there) are covered: not even an absolute path
 *   reaches the ledger's data, the hosted repositories, another run's checkout or a credential;
 * - it sees and can signal only its own processes;
 * - it holds no capability (`setpriv`): it cannot unmount what hides those paths, mount anything
 *   or make a namespace of its own in which to do so.
 * Its own run directory (checkout, HOME, TMPDIR) is bound back at the same path, so the command
 * sees the paths the runner gives it. The network is not separated (a test suite may need its
 * package registry); SECURITY.md lists what that leaves open.
 *
 * Where the kernel or the tools refuse (no user namespaces, not Linux), commands run unconfined and
 * the platform's log says why at start: it is a property of the machine, not an error.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { delimiter, isAbsolute, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';

export type Confinement = { readonly kind: 'namespaces' } | { readonly kind: 'none'; readonly reason: string };

/** What one run confines its command to, and what it hides from it. */
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

/** The program and arguments that run `run.command` confined (or plain `sh -c` when it cannot be). */
export function confinedCommand(confinement: Confinement, run: ConfinedRun): { file: string; args: string[] } {
  if (confinement.kind === 'none') return { file: 'sh', args: ['-c', run.command] };
  // Deepest first: a directory inside another hidden one is covered before its parent hides it.
  const hidden = [...new Set(run.hidden.map((d) => resolve(d)))].sort((a, b) => b.length - a.length);
  return { file: 'unshare', args: [...UNSHARE, '--', 'sh', '-c', CONFINE_SCRIPT, 'agent-jobs-confine', resolve(run.runDir), resolve(run.cwd), run.command, ...hidden] };
}

/**
 * Where, under HOME, the usual tools keep credentials. Hidden one by one when HOME itself cannot be
 * (a toolchain in PATH lives in it): a list is weaker than hiding HOME, so SECURITY.md says so.
 */
const CREDENTIALS_IN_HOME = [
  '.aws', '.azure', '.config/gcloud', '.config/gh', '.config/hub', '.docker', '.git-credentials', '.gitconfig', '.config/git',
  '.gnupg', '.kube', '.netrc', '.npmrc', '.pypirc', '.cargo/credentials', '.cargo/credentials.toml', '.ssh', '.yarnrc', '.yarnrc.yml',
];

/**
 * What a local test command is kept from: the given directories (state, the directory of runs)
 * and the real HOME, or, when a PATH entry lies in HOME (a toolchain installed there, e.g. by a
 * version manager, must stay reachable), the places in HOME where credentials are kept.
 */
export function hiddenPaths(confidential: readonly string[], env: NodeJS.ProcessEnv = process.env, home = homedir()): string[] {
  const realHome = resolve(home);
  if (realHome === '/') return [...confidential];
  const toolsInHome = (env.PATH ?? '').split(delimiter).some((entry) => isAbsolute(entry) && isInside(resolve(entry), realHome));
  return [...confidential, ...(toolsInHome ? CREDENTIALS_IN_HOME.map((entry) => join(realHome, entry)) : [realHome])];
}

const run = promisify(execFile);
let probed: Promise<Confinement> | undefined;

/**
 * Whether this machine confines commands: the whole confinement (namespaces, mounts, dropping
 * capabilities) tried once on a throw-away run, remembered for the process.
 */
export function probeConfinement(scratchDir: string): Promise<Confinement> {
  probed ??= (async (): Promise<Confinement> => {
    if (process.platform !== 'linux') return { kind: 'none', reason: `no Linux namespaces on ${process.platform}` };
    const dir = await mkdtemp(join(scratchDir, 'agent-jobs-probe-'));
    try {
      // As a real run: the run directory inside a hidden one, bound back.
      const runDir = join(dir, 'runs', 'run');
      await mkdir(runDir, { recursive: true });
      const { file, args } = confinedCommand({ kind: 'namespaces' }, { runDir, cwd: runDir, hidden: [join(dir, 'runs')], command: 'test -d .' });
      await run(file, args, { timeout: 10_000 });
      return { kind: 'namespaces' };
    } catch (error) {
      const detail = ((error as { stderr?: string }).stderr ?? (error as Error).message).trim().split('\n')[0];
      return { kind: 'none', reason: `unprivileged user namespaces are not available here (${detail})` };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return probed;
}

export function isInside(dir: string, parent: string): boolean {
  const path = relative(parent, dir);
  return path === '' || (!path.startsWith('..') && !isAbsolute(path));
}
