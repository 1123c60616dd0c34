/**
 * `agent-jobs demo` end to end: it starts its own platform, runs the script and reports; and
 * `npm start -- --demo`, which runs it on the platform it starts and says when it is done.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { BIN, publicJsonLines, runCli } from './harness';

const ROOT = path.resolve(__dirname, '../..');

jest.setTimeout(300_000);

test('the demo runs every scenario and reports what happened', async () => {
  // An empty state dir: no platform runs there, so the demo starts (and stops) its own.
  const stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-demo-e2e-'));
  try {
    const result = await runCli(['demo', '--json', '--state-dir', stateDir]);

    expect({ code: result.code, stderr: result.code === 0 ? '' : result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(publicJsonLines(result.stdout, 'demo --json')).toHaveLength(1);
    const summary = JSON.parse(result.stdout) as { jobs: Record<string, string>; commits: Record<string, string[]> };
    expect(summary.jobs).toEqual({
      'mul-1': 'SUCCEEDED',
      'mul-tests-1': 'tests failed',
      'mul-2': 'SUCCEEDED',
      'mul-tests-2': 'tests passed',
      'mul-pr': 'SUCCEEDED',
      'docs-1': 'SUCCEEDED',
      'refactor-1': 'FAILED',
      'refactor-2': 'CANCELLED',
    });
    expect(summary.commits).toEqual({
      'feature-mul': ['Fix mul', 'Add mul', 'Initial calculator'],
      docs: ['Document usage', 'Initial calculator'],
      refactor: ['Initial calculator'],
    });
    expect(await readdir(stateDir)).toEqual([]);
  } finally {
    await rm(stateDir, { recursive: true, force: true });
  }
});

test('npm start -- --demo ends its scenario with a done line, then keeps the platform running', async () => {
  const stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-demo-up-'));
  const child = spawn(process.execPath, [BIN, 'local', 'up', '--demo', '--state-dir', stateDir], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    let stdout = '';
    const done = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        const line = /^demo done: .*$/m.exec(stdout)?.[0];
        if (line) resolve(line);
      });
      void exited.then((code) => reject(new Error(`local up --demo exited (${code}) without a done line:\n${stdout}`)));
    });
    expect(done).toMatch(
      /^demo done: 8 jobs \(.*\); the platform keeps running: agent-jobs workspaces, agent-jobs console; Ctrl-C stops it$/,
    );
    // The README tells a new user about both ways to run it.
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('npm start -- --demo');
    expect(readme).toMatch(/^agent-jobs demo\b/m);
  } finally {
    child.kill('SIGINT');
    await exited;
    await rm(stateDir, { recursive: true, force: true });
  }
});
