/**
 * The sandbox a local test command runs in where the machine has bubblewrap (`bwrap`, a Debian
 * package): a container without a container engine. bubblewrap is the sandbox the desktop
 * application sandboxes and the coding-agent tools use on Linux; it does with a few options what
 * hand-made namespace plumbing (confinement.ts, the fallback) does in a script, and more.
 *
 * What the command sees:
 * - the host, read-only (`/`), with the platform's HOME, its state directory and every other
 *   run covered by empty read-only file systems; toolchains that live in HOME (a PATH entry there)
 *   bound back read-only, with the places credentials are kept in them covered;
 * - one writable file system of its own, `/tmp`, a tmpfs of the run's disk limit: the checkout
 *   (`/tmp/workspace`, copied in as a tar stream, so no path of the platform's is shown to it),
 *   HOME (`/tmp/home`) and TMPDIR; `/dev/shm` small; a minimal `/dev`; `/run` (where host services
 *   keep their sockets) covered;
 * - its own PID namespace (`/proc` of its own processes), IPC, UTS and cgroup namespaces, and no
 *   capability; it may not make user namespaces of its own;
 * - its own network namespace: outbound connections go through slirp4netns (user-mode networking,
 *   a Debian package) with the host's loopback refused, so the emulators, the git server and the
 *   platform's ports are unreachable; without slirp4netns, no network at all.
 *
 * When the platform runs as root, the sandbox is started as an unprivileged user (SANDBOX_USER),
 * so the command is not root on any file of the host either; otherwise it runs as the platform's
 * user. bubblewrap dies with the platform (--die-with-parent), and with it every process of the
 * sandbox: none can outlive a killed platform.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { errorMessage } from '../../src/core/errors';
import { isInside, outermost, type SandboxNetwork } from './confinement';

/** Where the run lives inside the sandbox. */
export const SANDBOX_PATHS = { tmp: '/tmp', workspace: '/tmp/workspace', home: '/tmp/home' } as const;

/** The user a root platform runs sandboxes as: nobody, which owns nothing the run could use. */
export const SANDBOX_USER = { uid: 65534, gid: 65534 } as const;

/** Size of the sandbox's `/dev/shm` (Docker's default). */
const SHM_BYTES = 64 * 1024 * 1024;

/** File descriptors of the bwrap process (after stdin, stdout, stderr). */
export const SANDBOX_FDS = { info: 3, block: 4, resolvConf: 5 } as const;

/** slirp4netns's resolver address in the sandbox's network. */
const SLIRP_DNS = '10.0.2.3';

export interface SandboxSpec {
  /** The command's user and group, as the host knows them (the sandbox keeps them). */
  readonly user: { readonly uid: number; readonly gid: number };
  /** Host directories the command must not see (state directories, HOME, other runs): covered. */
  readonly hidden: readonly string[];
  /** Host directories bound back read-only inside hidden ones (toolchains in HOME). */
  readonly readOnly: readonly string[];
  /** Host files inside those that are covered (credentials kept in a toolchain's directory). */
  readonly coveredFiles: readonly string[];
  readonly diskBytes: number;
  readonly network: SandboxNetwork;
  readonly env: Readonly<Record<string, string>>;
  readonly command: string;
}

/**
 * Runs as the sandbox's first process: unpacks the checkout from stdin into the workspace, then
 * runs the command with nothing on stdin.
 */
const ENTRY_SCRIPT = [
  `tar -x -f - -C ${SANDBOX_PATHS.workspace} || { echo 'agent-jobs: the checkout could not be copied into the sandbox' >&2; exit 125; }`,
  'exec sh -c "$1" </dev/null',
].join('\n');

/** The places the sandbox makes of its own: a hidden path under one of them is hidden already. */
const OWN_PLACES = ['/tmp', '/run', '/dev', '/proc'];

/** bubblewrap's arguments for one run (the program is `bwrap`). Pure. */
export function sandboxArgs(spec: SandboxSpec): string[] {
  const hidden = outermost(spec.hidden.filter((path) => !OWN_PLACES.some((own) => isInside(path, own))));
  const args = [
    '--unshare-all',
    // slirp4netns needs a network namespace it can join: the one sandboxProgram's `unshare` made, around bubblewrap.
    ...(spec.network === 'slirp4netns' ? ['--share-net'] : []),
    '--unshare-user',
    '--uid',
    String(spec.user.uid),
    '--gid',
    String(spec.user.gid),
    '--disable-userns',
    '--die-with-parent',
    '--new-session',
    '--hostname',
    'agent-jobs-run',
    '--clearenv',
    ...Object.entries(spec.env).flatMap(([name, value]) => ['--setenv', name, value]),
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--size',
    String(SHM_BYTES),
    '--perms',
    '1777',
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/run',
    '--remount-ro',
    '/run',
    '--size',
    String(spec.diskBytes),
    '--perms',
    '0700',
    '--tmpfs',
    SANDBOX_PATHS.tmp,
    '--dir',
    SANDBOX_PATHS.workspace,
    '--dir',
    SANDBOX_PATHS.home,
  ];
  for (const dir of hidden) {
    args.push('--tmpfs', dir);
    for (const kept of spec.readOnly.filter((path) => isInside(path, dir))) args.push('--ro-bind', kept, kept);
    for (const file of spec.coveredFiles.filter((path) => isInside(path, dir)))
      args.push('--ro-bind', '/dev/null', file);
    args.push('--remount-ro', dir);
  }
  if (spec.network === 'slirp4netns') args.push('--ro-bind-data', String(SANDBOX_FDS.resolvConf), '/etc/resolv.conf');
  args.push(
    '--info-fd',
    String(SANDBOX_FDS.info),
    '--block-fd',
    String(SANDBOX_FDS.block),
    '--chdir',
    SANDBOX_PATHS.workspace,
    '--',
    'sh',
    '-c',
    ENTRY_SCRIPT,
    'agent-jobs-sandbox',
    spec.command,
  );
  return args;
}

/** What the sandbox's resolv.conf says when slirp4netns is its network: slirp4netns's resolver. */
export const SANDBOX_RESOLV_CONF = `nameserver ${SLIRP_DNS}\n`;

/**
 * The programs that start the sandbox: bubblewrap, behind `unshare` when slirp4netns is its network.
 * bubblewrap's own user namespace nests another one under its network namespace's to disable
 * user namespaces inside (--disable-userns), which slirp4netns could not join; so the network
 * namespace is made first, by `unshare`, in a user namespace of its own where the sandbox's user is
 * root (slirp4netns expects to be), and bubblewrap runs in it with --share-net. Before either, a
 * root platform becomes the unprivileged sandbox user.
 */
export function sandboxLaunchers(
  network: SandboxNetwork,
  runAs: { readonly uid: number; readonly gid: number } | undefined,
): string[] {
  const user = runAs ? ['setpriv', `--reuid=${runAs.uid}`, `--regid=${runAs.gid}`, '--clear-groups', '--'] : [];
  const netns = network === 'slirp4netns' ? ['unshare', '--user', '--map-root-user', '--net', '--'] : [];
  return [...user, ...netns, 'bwrap'];
}

/**
 * Gives the sandbox its network: slirp4netns in the network namespace of `pid` (bubblewrap's first
 * process, started by sandboxLaunchers' `unshare`), joined through its user namespace, with the
 * host's loopback refused. Resolves once the interface is up. slirp4netns ends with `stop()`, or
 * when the platform dies (its exit pipe closes).
 */
export async function attachNetwork(
  pid: number,
  runAs: { uid: number; gid: number } | undefined,
): Promise<{ stop(): void }> {
  const slirp: ChildProcess = spawn(
    'slirp4netns',
    [
      '--configure',
      '--mtu=65520',
      '--disable-host-loopback',
      '--enable-sandbox',
      '--enable-seccomp',
      `--userns-path=/proc/${pid}/ns/user`,
      '--ready-fd=3',
      '--exit-fd=4',
      String(pid),
      'tap0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], ...(runAs && { uid: runAs.uid, gid: runAs.gid }) },
  );
  for (const fd of [3, 4])
    (slirp.stdio as unknown as ReadonlyArray<NodeJS.EventEmitter | null>)[fd]?.on('error', () => undefined);
  let stderr = '';
  slirp.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2_000)));
  const stop = () => {
    slirp.stdio[4]?.destroy();
    slirp.kill('SIGKILL');
  };
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('slirp4netns did not bring the network up within 10 s')), 10_000);
      const fail = (why: string) => {
        clearTimeout(timer);
        reject(new Error(`slirp4netns ${why}${stderr.trim() ? `: ${stderr.trim().split('\n').pop()}` : ''}`));
      };
      slirp.stdio[3]?.once('data', () => {
        clearTimeout(timer);
        resolve();
      });
      slirp.once('error', (error) => fail(`could not start (${errorMessage(error)})`));
      slirp.once('exit', (code, signal) => fail(`exited (${signal ?? code}) before the network was up`));
    });
  } catch (error) {
    stop();
    throw error;
  }
  // Its answers and its exit are of no more interest; the exit pipe stays open until stop().
  slirp.removeAllListeners('exit');
  slirp.stdio[3]?.destroy();
  return { stop };
}

/** Reads bwrap's `--info-fd` JSON until it names the sandbox's first process. */
export function sandboxChildPid(info: NodeJS.ReadableStream, exited: Promise<unknown>): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (!match) return;
      info.removeListener('data', onData);
      resolve(Number(match[1]));
    };
    info.on('data', onData);
    void exited.then(() => reject(new Error('bubblewrap exited before the sandbox started')));
  });
}
