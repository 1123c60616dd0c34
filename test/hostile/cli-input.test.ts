/**
 * Hostile input at the CLI, as a careless user or a script gone wrong types it: what the user
 * typed is checked before anything is looked up (exit 2, naming the flag), and a file flag is
 * refused by its size before it is read, or read no further than its limit, whatever it names (a
 * sparse file, a device that never ends, a pipe held open, stdin), in memory bounded by the limit.
 * Against the emulators through the real CLI in process (harness.ts); nothing is sent.
 */
import { execFile, spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { EXIT } from '../../tools/cli/errors';
import { newFileDiffOf } from '../support/git-fixtures';
import { fsckStrict, gitIn, hostileSuite } from './harness';

const run = promisify(execFile);
const BIN = join(__dirname, '..', '..', 'bin', 'agent-jobs.js');
/** Far longer than refusing takes, even on a loaded machine; a CLI still reading then is killed. */
const READ_TIMEOUT_MS = 30_000;

describe('hostile input at the CLI: checked before any lookup, read no further than its limit', () => {
  const suite = hostileSuite();
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agent-jobs-cli-input-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const patchArgs = (diffFile: string) => [
    'enqueue',
    '--type',
    'apply_patch',
    '--workspace',
    'ws-cli',
    '--repo',
    'http://127.0.0.1:1/r.git',
    '--branch',
    'main',
    '--message',
    'm',
    '--diff-file',
    diffFile,
  ];

  /** One line on stderr, exit 2, naming the flag; nothing reached the ledger or the queue. */
  function expectUsage(result: { code: number; stdout: string; stderr: string }, says: RegExp): void {
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: EXIT.usage, stdout: '' });
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(says);
  }

  it.each([
    [
      '--workspace',
      ['enqueue', '--type', 'run_tests', '--workspace', `w${'x'.repeat(64)}`],
      /--workspace: workspaceId must be 1-64 characters/,
    ],
    [
      '--job-id',
      ['enqueue', '--type', 'run_tests', '--workspace', 'ws-cli', '--job-id', '../etc/passwd'],
      /--job-id: jobId must be 1-64 characters/,
    ],
    [
      '--tenant',
      ['enqueue', '--type', 'open_pr', '--workspace', 'ws-cli', '--tenant', 't#1', '--base', 'main', '--title', 'T'],
      /--tenant: tenantId must be 1-64 characters/,
    ],
  ])(
    'refuses a %s that can never be valid as a usage error before any lookup (no WORKSPACE_UNKNOWN advice)',
    async (_flag, argv, says) => {
      const result = await suite.cli(...argv);

      expectUsage(result, says);
      expect(result.stderr).not.toMatch(/WORKSPACE_UNKNOWN|send an apply_patch/);
    },
  );

  it('takes a diff of exactly the limit from --diff-file to the branch: stored in parts, read back and applied byte for byte', async () => {
    const ws = await suite.newWorkspace();
    const file = join(dir, 'at-the-limit.diff');
    await writeFile(file, newFileDiffOf(MAX_DIFF_BYTES, 'big.txt'));
    const jobId = `limit-${ws.workspaceId}`;

    const sent = await suite.cli(
      'enqueue',
      '--type',
      'apply_patch',
      '--workspace',
      ws.workspaceId,
      '--job-id',
      jobId,
      '--repo',
      ws.repoUrl,
      '--branch',
      'main',
      '--message',
      'at the limit',
      '--diff-file',
      file,
    );
    expect({ code: sent.code, stderr: sent.stderr }).toEqual({
      code: EXIT.ok,
      stderr: expect.stringMatching(/^enqueued apply_patch/),
    });
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });

    expect(await suite.ledger().getJob(jobId)).toMatchObject({ status: 'SUCCEEDED' });
    const blob = await gitIn(ws.gitDir, 'cat-file', '-s', 'main:big.txt');
    const expected = newFileDiffOf(MAX_DIFF_BYTES, 'big.txt')
      .toString('utf8')
      .split('\n')
      .filter((l) => l.startsWith('+') && !l.startsWith('+++'))
      .map((l) => l.slice(1));
    expect(Number(blob)).toBe(Buffer.byteLength(`${expected.join('\n')}\n`));
    await fsckStrict(ws.gitDir);
  }, 120_000);

  /**
   * The real bin in a process of its own (the terminal's stdin, process memory), with no platform
   * running: a file flag is read before anything is looked up. A CLI that reads on and on is
   * killed after a while and fails the case.
   */
  function cliProcess(
    argv: readonly string[],
    feed?: (stdin: NodeJS.WritableStream) => void,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...argv, '--state-dir', join(dir, 'no-platform')], {
        stdio: ['pipe', 'pipe', 'pipe'],
        env: { ...process.env, NODE_NO_WARNINGS: '1' },
      });
      let stdout = '';
      let stderr = '';
      const killer = setTimeout(() => child.kill('SIGKILL'), READ_TIMEOUT_MS);
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.stdin.on('error', () => undefined); // the CLI stops reading: EPIPE, as for `yes | ...`
      child.once('error', reject);
      child.once('close', (code, signal) => {
        clearTimeout(killer);
        resolve({
          code: code ?? -1,
          stdout,
          stderr: signal ? `killed (${signal}) after ${READ_TIMEOUT_MS} ms: ${stderr}` : stderr,
        });
      });
      if (feed) feed(child.stdin);
      else child.stdin.end();
    });
  }

  it('refuses a 1 GiB sparse --diff-file by its size, without reading it', async () => {
    const file = join(dir, 'sparse.diff');
    const handle = await open(file, 'w');
    await handle.truncate(1024 ** 3);
    await handle.close();

    expectUsage(
      await cliProcess(patchArgs(file)),
      new RegExp(`--diff-file ${file}: ${1024 ** 3} bytes, over the ${MAX_DIFF_BYTES}-byte limit`),
    );
  });

  it.each(['/dev/zero', '/dev/urandom'])('stops reading %s at the limit and refuses it', async (device) => {
    expectUsage(
      await cliProcess(patchArgs(device)),
      new RegExp(`--diff-file ${device}: more than ${MAX_DIFF_BYTES} bytes, over the limit`),
    );
  });

  it('stops reading a pipe held open by its writer at the limit, instead of waiting for its end', async () => {
    const fifo = join(dir, 'held-open.fifo');
    await run('mkfifo', [fifo]);
    const writer = createWriteStream(fifo);
    // The CLI closes its end after the limit: the writer's next write fails (EPIPE), as `yes | ...` would.
    writer.on('error', () => undefined);
    const chunk = Buffer.alloc(1024 * 1024, 0x2b);
    for (let written = 0; written <= MAX_DIFF_BYTES; written += chunk.length) writer.write(chunk);

    try {
      expectUsage(
        await cliProcess(patchArgs(fifo)),
        new RegExp(`--diff-file ${fifo}: more than ${MAX_DIFF_BYTES} bytes, over the limit`),
      );
    } finally {
      writer.destroy();
    }
  });

  it('stops reading stdin that never ends at the limit (--diff-file -)', async () => {
    const chunk = Buffer.alloc(64 * 1024, 0x2b);
    const endless = (stdin: NodeJS.WritableStream) => {
      const more = () => {
        while (stdin.write(chunk));
        stdin.once('drain', more);
      };
      more();
    };

    expectUsage(
      await cliProcess(patchArgs('-'), endless),
      new RegExp(`--diff-file -: more than ${MAX_DIFF_BYTES} bytes, over the limit`),
    );
  });
});
