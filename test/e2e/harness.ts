/**
 * The end-to-end harness: the real CLI in child processes, as a user runs it. `local up` runs the
 * platform on free loopback ports with a temp state dir; every other command is one more process.
 * Everything started here is stopped by `stop()`, which also checks the ports are free again.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { repositoryDir } from '../../tools/local/state-dir';
import { eventually } from '../support/eventually';

const execFileP = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
export const BIN = path.join(ROOT, 'bin/agent-jobs.js');
const POLL_MS = 500;
/** Under the e2e tests' own timeouts, so a stuck job fails with its last state. */
const UNTIL_JOB_MS = 150_000;

/** Temp directories made by the helpers below; removeScratch() deletes them. */
const scratchDirs: string[] = [];

export async function scratchDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), prefix));
  scratchDirs.push(dir);
  return dir;
}

export async function removeScratch(): Promise<void> {
  for (const dir of scratchDirs.splice(0)) await rm(dir, { recursive: true, force: true });
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunningPlatform {
  readonly stateDir: string;
  /** The platform's process (with npm start: npm's, the platform runs below it). */
  readonly pid: number;
  /** What `local up --json` printed when ready. */
  readonly ready: {
    readonly endpoints: Record<string, string>;
    readonly gitUrl: string;
    readonly console: { readonly url: string; readonly openUrl: string };
  };
  cli(args: readonly string[], stdin?: string): Promise<CliResult>;
  /** Runs with --json and parses stdout as one JSON object; fails (with stderr) on a non-zero exit. */
  cliJson<T = unknown>(args: readonly string[], stdin?: string): Promise<T>;
  /** Runs with --json and parses stdout as JSON Lines (one object per line); fails on a non-zero exit. */
  cliLines<T = unknown>(args: readonly string[], stdin?: string): Promise<T[]>;
  events(): Promise<{ type: string; detail: Record<string, unknown> }[]>;
  /**
   * Polls `status --json` until `done` holds: for jobs that are already terminal (SKIPPED, FAILED)
   * and run again after a replay or redrive, where `wait` would return at once.
   */
  untilJob<T extends { status: string }>(jobId: string, done: (job: T) => boolean): Promise<T>;
  /**
   * Subjects of the commits on a branch of one of the platform's repositories, newest first. Read
   * from the state directory: the platform's git server lets in only the platform and test checkouts.
   */
  remoteLog(repoUrl: string, branch: string): Promise<string[]>;
  /** Stops it with SIGINT (a terminal's Ctrl-C), checks every port is free again and deletes the state directory unless kept. */
  stop(options?: { readonly keepStateDir?: boolean }): Promise<void>;
  /** `kill -9`: the platform dies mid-work; its state directory stays for a restart. */
  kill(): Promise<void>;
}

export interface PlatformOptions {
  /** Start from this state directory (e.g. a killed platform's) instead of a new one. */
  readonly stateDir?: string;
  /** `local up --persist`: the ledger is kept on disk. */
  readonly persist?: boolean;
  /**
   * Start it as a user does through npm: `npm start <npmArgs> -- --json --state-dir <dir>` (npm's
   * banner lines before the ready line are skipped).
   */
  readonly npmStartArgs?: readonly string[];
}

/** Where and how to run the CLI: by default `node bin/agent-jobs.js` from the project directory. */
export interface CliLaunch {
  readonly cwd?: string;
  /** An executable to run instead (a link to the bin, as `npm link` makes). */
  readonly executable?: string;
  /** Variables added to this process's environment (AWS_ENDPOINT_URL and credentials for a stack target). */
  readonly env?: Readonly<Record<string, string>>;
}

export function runCli(args: readonly string[], stdin?: string, launch: CliLaunch = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const [command, argv] = launch.executable ? [launch.executable, args] : [process.execPath, [BIN, ...args]];
    const child = spawn(command, argv, {
      cwd: launch.cwd ?? ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_NO_WARNINGS: '1', ...launch.env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    child.stdin.end(stdin ?? '');
  });
}

/** Starts `agent-jobs local up --json` and resolves once it printed its ready line. */
export async function startPlatform(options: PlatformOptions = {}): Promise<RunningPlatform> {
  const stateDir = options.stateDir ?? (await mkdtemp(path.join(tmpdir(), 'agent-jobs-e2e-')));
  const upArgs = ['--json', '--state-dir', stateDir, ...(options.persist ? ['--persist'] : [])];
  const viaNpm = options.npmStartArgs !== undefined;
  const [command, args] = viaNpm
    ? ['npm', ['start', ...(options.npmStartArgs ?? []), '--', ...upArgs]]
    : [process.execPath, [BIN, 'local', 'up', ...upArgs]];
  const child = spawn(command, args, {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
    // npm runs the platform as its grandchild: stop() signals the whole group, as a terminal's Ctrl-C does.
    detached: viaNpm,
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const ready = await new Promise<RunningPlatform['ready']>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      // npm prints its banner first: the ready line is the first line that is a JSON object.
      const lines = buffered.split('\n');
      const line = lines.slice(0, -1).find((l) => l.startsWith('{'));
      if (line === undefined) return;
      child.stdout.off('data', onData);
      child.stdout.resume();
      try {
        resolve(JSON.parse(line) as RunningPlatform['ready']);
      } catch (error) {
        reject(error);
      }
    };
    child.stdout.on('data', onData);
    void exited.then((code) => reject(new Error(`local up exited (${code}) before it was ready:\n${stderr}`)));
  });
  const cli = (args: readonly string[], stdin?: string) => runCli([...args, '--state-dir', stateDir], stdin);
  return {
    stateDir,
    pid: child.pid ?? 0,
    ready,
    cli,
    remoteLog: (repoUrl, branch) =>
      commitSubjects(repositoryDir(stateDir, path.basename(new URL(repoUrl).pathname, '.git')), branch),
    async cliJson<T>(args: readonly string[], stdin?: string): Promise<T> {
      const lines = await jsonLinesOf<T>(cli, args, stdin);
      if (lines.length !== 1)
        throw new Error(`agent-jobs ${args.join(' ')} printed ${lines.length} JSON lines, expected one`);
      return lines[0] as T;
    },
    cliLines: <T>(args: readonly string[], stdin?: string) => jsonLinesOf<T>(cli, args, stdin),
    async untilJob<T extends { status: string }>(jobId: string, done: (job: T) => boolean): Promise<T> {
      const status = async (): Promise<T> => {
        const result = await cli(['status', jobId, '--json']);
        if (result.code !== 0) throw new Error(`status ${jobId} exited ${result.code}: ${result.stderr.trim()}`);
        return JSON.parse(result.stdout) as T;
      };
      return eventually(status, done, { what: `job ${jobId}`, timeoutMs: UNTIL_JOB_MS, intervalMs: POLL_MS });
    },
    async events() {
      const text = await readFile(path.join(stateDir, 'events.jsonl'), 'utf8').catch(() => '');
      return text
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as { type: string; detail: Record<string, unknown> });
    },
    async stop(stopOptions) {
      await stopChild(child, exited, viaNpm);
      for (const url of [...Object.values(ready.endpoints), ready.gitUrl, ready.console.url])
        await expectPortFree(Number(new URL(url).port));
      if (!stopOptions?.keepStateDir) await rm(stateDir, { recursive: true, force: true });
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * The ledger's working fields and index keys: no `--json` output may carry them (tools/operator/views.ts
 * builds its JSON from allow-lists).
 */
export const INTERNAL_FIELDS = [
  'leaseOwner',
  'leaseUntil',
  'digest',
  'ttl',
  'pk',
  'listKey',
  'listSort',
  'wsKey',
  'dueKey',
  'dueAt',
  'stageMessage',
  'tokens',
];

/** Keys of internal fields anywhere in a parsed JSON value, with their paths. */
export function internalKeysIn(value: unknown, at = '$'): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => internalKeysIn(item, `${at}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, inner]) => [
    ...(INTERNAL_FIELDS.includes(key) ? [`${at}.${key}`] : []),
    ...internalKeysIn(inner, `${at}.${key}`),
  ]);
}

/**
 * Checks `--json` output as scripts read it: every line one JSON object (not an array, not a
 * scalar) and no internal field anywhere. Returns the objects.
 */
export function publicJsonLines(stdout: string, what: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => {
      let value: unknown;
      try {
        value = JSON.parse(line);
      } catch {
        throw new Error(`${what}: a line of --json output is not JSON: ${line.slice(0, 200)}`);
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        throw new Error(`${what}: a line of --json output is not one object: ${line.slice(0, 200)}`);
      const internal = internalKeysIn(value);
      if (internal.length) throw new Error(`${what}: --json output carries internal fields ${internal.join(', ')}`);
      return value as Record<string, unknown>;
    });
}

/** `--json` output: JSON Lines. */
export function parseJsonLines<T>(stdout: string): T[] {
  return stdout
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as T);
}

async function jsonLinesOf<T>(cli: RunningPlatform['cli'], args: readonly string[], stdin?: string): Promise<T[]> {
  const result = await cli([...args, '--json'], stdin);
  if (result.code !== 0) throw new Error(`agent-jobs ${args.join(' ')} exited ${result.code}:\n${result.stderr}`);
  return parseJsonLines<T>(result.stdout);
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>, group: boolean): Promise<void> {
  if (child.exitCode !== null) return;
  if (group && child.pid !== undefined) process.kill(-child.pid, 'SIGINT');
  else child.kill('SIGINT');
  await exited;
}

/** Fails when something still listens on the port. */
async function expectPortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error) => reject(new Error(`port ${port} is still in use after stop: ${error.message}`)));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
}

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileP('git', args, { cwd, env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
  return stdout.trim();
}

/** A small repository with a few branches, as a workspace's source. */
export async function makeRepository(
  files: Record<string, string | Uint8Array>,
  branches: readonly string[] = [],
): Promise<string> {
  const dir = await scratchDir('agent-jobs-src-');
  await git(dir, 'init', '--quiet', '--initial-branch=main');
  for (const [name, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
    await writeFile(path.join(dir, name), content);
  }
  await git(dir, 'add', '.');
  await git(dir, '-c', 'user.name=e2e', '-c', 'user.email=e2e@example.com', 'commit', '--quiet', '-m', 'initial');
  for (const branch of branches) await git(dir, 'branch', branch);
  return dir;
}

/** Subjects of the commits on a branch of a bare repository, newest first. */
export async function commitSubjects(gitDir: string, branch: string): Promise<string[]> {
  return (await git(gitDir, 'log', '--format=%s', `refs/heads/${branch}`)).split('\n');
}

/**
 * Real `git diff` output for a series of changes made one after the other on a copy of `sourceDir`:
 * diff i applies on top of diff i-1, as an agent's patches would. Returns the diff file paths.
 */
export async function diffChain(sourceDir: string, steps: readonly Record<string, string>[]): Promise<string[]> {
  const dir = await scratchDir('agent-jobs-diffs-');
  const scratch = path.join(dir, 'scratch');
  await git(dir, 'clone', '--quiet', sourceDir, scratch);
  const files: string[] = [];
  for (const [index, changes] of steps.entries()) {
    for (const [name, content] of Object.entries(changes)) await writeFile(path.join(scratch, name), content);
    await git(scratch, 'add', '-A');
    const file = path.join(dir, `${index}.diff`);
    await writeFile(file, `${await git(scratch, 'diff', '--cached', '--no-color')}\n`);
    await git(
      scratch,
      '-c',
      'user.name=e2e',
      '-c',
      'user.email=e2e@example.com',
      'commit',
      '--quiet',
      '-m',
      `step ${index}`,
    );
    files.push(file);
  }
  return files;
}

/** A patch whose context is not in `app.txt` (`one\n`): it can never apply, so it fails and blocks its workspace. */
export async function poisonPatch(): Promise<string> {
  const file = path.join(await scratchDir('agent-jobs-poison-'), 'poison.diff');
  await writeFile(
    file,
    [
      'diff --git a/app.txt b/app.txt',
      '--- a/app.txt',
      '+++ b/app.txt',
      '@@ -1 +1 @@',
      '-not the content',
      '+two',
      '',
    ].join('\n'),
  );
  return file;
}

/** `enqueue --type apply_patch` arguments. */
export function applyPatchArgs(
  workspace: string,
  jobId: string,
  repoUrl: string,
  branch: string,
  diffFile: string,
  message: string,
): string[] {
  return [
    'enqueue',
    '--type',
    'apply_patch',
    '--workspace',
    workspace,
    '--job-id',
    jobId,
    '--repo',
    repoUrl,
    '--branch',
    branch,
    '--diff-file',
    diffFile,
    '--message',
    message,
  ];
}
