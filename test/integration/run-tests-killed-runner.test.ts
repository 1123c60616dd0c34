/**
 * A test run whose platform is killed (`kill -9`) in the middle of it: the runner runs in a process
 * of its own (test/support/runner-process.ts), its command leaves processes behind (one in the
 * background, one after `setsid`, the foreground one), and the process is killed with SIGKILL.
 *
 * - Confined (the sandbox, or namespaces where bubblewrap is missing), nothing of the run outlives
 *   the platform at all: the run dies with it (a parent-death signal, then its PID namespace).
 * - Unconfined, only the command's first process dies with it; the next start (takeOrphanedRuns)
 *   ends the rest.
 * Either way the next start removes the run's directory, keeps what it printed, and records the
 * run STOPPED.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Confinement } from '../../tools/local/confinement';
import { LocalTestRunner, readRunOutput } from '../../tools/local/test-runner';
import { eventually } from '../support/eventually';
import { createRepo, removeDir, tempDir } from '../support/git-fixtures';
import { MACHINE_CONFINES, processesSleeping } from '../support/processes';
import type { RunnerProcessConfig } from '../support/runner-process';

jest.setTimeout(120_000);

const ENTRY = join(__dirname, '..', 'support', 'runner-process.ts');
const ROOT = join(__dirname, '..', '..');

let root: string;
let repo: { url: string; sha: string };

beforeAll(async () => {
  root = await tempDir('killed-runner');
  const url = join(root, 'origin');
  await mkdir(url);
  repo = { url, sha: await createRepo(url, { 'test.sh': 'exit 0\n' }) };
});

afterAll(() => removeDir(root));

/** Starts a runner process with one run and resolves once it started; `kill()` is kill -9. */
async function runnerProcess(config: RunnerProcessConfig): Promise<{ buildId: string; kill(): Promise<void> }> {
  const child = spawn(process.execPath, ['-r', 'tsx/cjs', ENTRY, JSON.stringify(config)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const buildId = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /^started (\S+)$/m.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
    void exited.then(() => reject(new Error(`the runner process exited before it started the run:\n${stderr}`)));
  });
  return {
    buildId,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

let nextTag = 0;
const sleepTag = () => `600.${process.pid}${++nextTag}`;

describe.each<[string, Confinement | undefined, { diesWithThePlatform: boolean }]>([
  ['at the best level the machine allows', undefined, { diesWithThePlatform: true }],
  ...(MACHINE_CONFINES
    ? [
        [
          'in namespaces',
          { kind: 'namespaces', reason: 'this test runs the level used where bubblewrap is missing' },
          { diesWithThePlatform: true },
        ] as [string, Confinement, { diesWithThePlatform: boolean }],
      ]
    : []),
  ['unconfined', { kind: 'none', reason: 'this test runs the unconfined path' }, { diesWithThePlatform: false }],
])('a run whose platform is killed, %s', (_name, confinement, { diesWithThePlatform }) => {
  let stateDir: string;
  let scratchDir: string;
  let tag: string;

  beforeEach(async () => {
    [stateDir, scratchDir, tag] = [await tempDir('killed-state'), await tempDir('killed-scratch'), sleepTag()];
  });
  afterEach(async () => {
    for (const pid of processesSleeping(tag)) process.kill(pid, 'SIGKILL');
    await removeDir(stateDir);
    await removeDir(scratchDir);
  });

  it(`leaves nothing: ${diesWithThePlatform ? 'its processes die with the platform' : 'what its processes left is ended at the next start'}, its directory is removed, its output kept`, async () => {
    const command = `echo before-the-kill; setsid sh -c 'exec sleep ${tag}' & sleep ${tag} & exec sleep ${tag}`;
    const runner = await runnerProcess({
      stateDir,
      scratchDir,
      repoUrl: repo.url,
      sha: repo.sha,
      command,
      ...(confinement && { confinement }),
    });
    await eventually(
      async () => processesSleeping(tag),
      (pids) => pids.length === 3,
      { what: `the run's three processes sleeping ${tag}` },
    );

    await runner.kill();

    if (diesWithThePlatform) {
      await eventually(
        async () => processesSleeping(tag),
        (pids) => pids.length === 0,
        { what: `the run's processes to die with the platform`, timeoutMs: 10_000 },
      );
    }
    const restarted = new LocalTestRunner({ stateDir, scratchDir, ...(confinement && { confinement }) });
    const orphans = await restarted.takeOrphanedRuns();

    expect(orphans).toEqual([
      expect.objectContaining({
        buildId: runner.buildId,
        status: expect.objectContaining({ state: 'ERROR', status: 'STOPPED' }),
      }),
    ]);
    expect(processesSleeping(tag)).toEqual([]);
    expect(readdirSync(scratchDir)).toEqual([]);
    expect(await readRunOutput(join(stateDir), runner.buildId)).toContain('before-the-kill');
    await restarted.close();
  });
});
