/**
 * One platform per state directory, enforced by the operating system for the platform's whole
 * life. `lockStateDir` runs first in a start, before anything in the directory is deleted
 * (`--reset`) or started, and a second start from the same directory is refused with one line
 * naming the running platform (its pid and endpoints), whatever files the directory still holds.
 *
 * The lock is a listening UNIX socket in Linux's abstract namespace, named after the directory's
 * real path. The kernel lets one socket bind a name and frees it when the process ends, however it
 * ends (`kill -9` included): nothing is left to go stale, and no file in the directory (which
 * `--reset`, a user or a test command may delete) stands for it. Alternatives considered: a pid or
 * lock file goes stale after a crash and can be deleted while held; `flock` needs a helper process
 * (Node has no flock call) that must die with the platform, and locks a directory inode that
 * `--reset` would replace. The socket also answers who holds it: a refused start connects and
 * reads the holder's description, so the refusal names the platform even when its platform.json
 * is gone.
 *
 * Elsewhere (macOS) there is no abstract namespace: the socket is a file in the system temporary
 * directory (short enough for the 104-byte path limit), and one that refuses connections was left
 * by a dead platform and is replaced. Two starts racing for a stale file can both win there; on
 * Linux they cannot.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/** What a refused start learns about the platform holding the directory. */
export interface LockHolder {
  readonly pid: number;
  readonly startedAt: string;
  /** Filled in once the platform's servers listen. */
  readonly endpoints?: Readonly<Record<string, string>>;
}

export class PlatformAlreadyRunningError extends Error {
  override readonly name = 'PlatformAlreadyRunningError';
}

/** The state directory cannot be created or written (a read-only file system, permissions, a file in the way). */
export class StateDirUnusableError extends Error {
  override readonly name = 'StateDirUnusableError';
}

export interface StateLock {
  /** The directory's real path, as locked. */
  readonly stateDir: string;
  /** What a refused start is told from now on (e.g. the endpoints once they listen). */
  describe(holder: Partial<LockHolder>): void;
  /** Empties the directory (`--reset`); only the lock's holder may. */
  reset(): Promise<void>;
  release(): Promise<void>;
}

/** How long a refused start waits for the holder to describe itself. */
const ASK_TIMEOUT_MS = 2_000;

/** Creates the directory if needed, checks it is writable, and locks it; PlatformAlreadyRunningError when another platform holds it. */
export async function lockStateDir(stateDir: string): Promise<StateLock> {
  await usableStateDir(stateDir);
  const real = await realpath(stateDir);
  const address = lockAddress(real);
  let holder: LockHolder = { pid: process.pid, startedAt: new Date().toISOString() };
  const server = createServer((socket) => {
    socket.on('error', () => undefined);
    socket.end(`${JSON.stringify(holder)}\n`);
  });
  await listenOrRefuse(server, address, real);
  return {
    stateDir: real,
    describe(more) {
      holder = { ...holder, ...more };
    },
    reset: () => emptyDir(real),
    release: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The directory exists and a file can be written in it; one line naming it and the problem otherwise. */
async function usableStateDir(stateDir: string): Promise<void> {
  const fix = 'make it writable, or choose another with --state-dir';
  try {
    await mkdir(stateDir, { recursive: true });
  } catch (error) {
    throw new StateDirUnusableError(
      `cannot create the state directory ${stateDir} (${describeFsError(error)}): ${fix}`,
      { cause: error },
    );
  }
  const probe = path.join(stateDir, `.write-probe-${process.pid}`);
  try {
    await writeFile(probe, '');
    await rm(probe, { force: true });
  } catch (error) {
    throw new StateDirUnusableError(
      `the state directory ${stateDir} is not writable (${describeFsError(error)}): ${fix}`,
      { cause: error },
    );
  }
}

function describeFsError(error: unknown): string {
  const { code, message } = error as NodeJS.ErrnoException;
  const known: Record<string, string> = {
    EROFS: 'read-only file system',
    EACCES: 'permission denied',
    EPERM: 'operation not permitted',
    ENOTDIR: 'a file is in the way',
    EEXIST: 'a file is in the way',
    ENOSPC: 'no space left on the device',
  };
  return code && known[code] ? `${code}: ${known[code]}` : message;
}

/** The socket address standing for a directory: abstract on Linux, a short file elsewhere. */
function lockAddress(realDir: string): string {
  const name = `agent-jobs-state-${createHash('sha256').update(realDir).digest('hex').slice(0, 32)}`;
  return process.platform === 'linux' ? `\0${name}` : path.join(tmpdir(), `${name}.sock`);
}

async function listenOrRefuse(server: Server, address: string, stateDir: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await listen(server, address);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    }
    const holder = await askHolder(address);
    if (holder === 'gone' && !address.startsWith('\0') && attempt === 0) {
      // A socket file a dead platform left (not on Linux: an abstract name dies with its process).
      await rm(address, { force: true });
      continue;
    }
    throw new PlatformAlreadyRunningError(refusal(stateDir, holder === 'gone' ? undefined : holder));
  }
}

function listen(server: Server, address: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(address, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The holder's description; 'gone' when nobody answers at the address; undefined when it answers nothing readable. */
function askHolder(address: string): Promise<LockHolder | 'gone' | undefined> {
  return new Promise((resolve) => {
    let text = '';
    const socket = connect(address);
    const done = (value: LockHolder | 'gone' | undefined) => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(ASK_TIMEOUT_MS, () => done(undefined));
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
    socket.on('end', () => done(parseHolder(text)));
    socket.on('error', (error: NodeJS.ErrnoException) =>
      done(error.code === 'ECONNREFUSED' || error.code === 'ENOENT' ? 'gone' : undefined),
    );
  });
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockHolder>;
    return typeof value.pid === 'number' && typeof value.startedAt === 'string' ? (value as LockHolder) : undefined;
  } catch {
    return undefined;
  }
}

/** One line: who runs from the directory, and what to do. */
function refusal(stateDir: string, holder: LockHolder | undefined): string {
  if (holder === undefined)
    return `another local platform is running from ${stateDir} (it holds the directory's lock): stop it first`;
  const endpoints = Object.entries(holder.endpoints ?? {}).map(([name, url]) => `${name} ${url}`);
  const what = [
    `pid ${holder.pid}`,
    `started ${holder.startedAt}`,
    ...(endpoints.length ? endpoints : ['still starting']),
  ].join(', ');
  return `a local platform is already running from ${stateDir} (${what}): stop it first (Ctrl-C where it runs, or kill ${holder.pid}); nothing was deleted or started`;
}

/** Deletes what the directory holds, keeping the directory itself. */
async function emptyDir(dir: string): Promise<void> {
  for (const entry of await readdir(dir)) await rm(path.join(dir, entry), { recursive: true, force: true });
}
