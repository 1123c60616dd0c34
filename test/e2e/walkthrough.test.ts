/**
 * The README's walkthrough ("Five minutes with the CLI", terminal 2) as a user runs it: its shell
 * block, run by bash with `agent-jobs` on the PATH, twice in one shell, as the README says it can
 * run again. Each run must succeed to its last line and leave the shell where it started. The
 * block's own paths (/tmp/hello, /tmp/world.diff, .agent-jobs) are moved into a scratch directory
 * and the test's state directory, so the test touches nothing outside them.
 */
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { BIN, startPlatform, type RunningPlatform } from './harness';

const execFileP = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');

jest.setTimeout(300_000);

let platform: RunningPlatform;
let scratch: string;

beforeAll(async () => {
  platform = await startPlatform();
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-jobs-walkthrough-'));
});

afterAll(async () => {
  await platform?.stop();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

async function walkthroughBlock(): Promise<string> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Five minutes with the CLI'));
  const block = [...section.matchAll(/```sh\n([\s\S]*?)```/g)]
    .map((m) => m[1] ?? '')
    .find((b) => b.includes('# a repository to work on'));
  if (!block)
    throw new Error('README.md: no walkthrough block ("# a repository to work on") under "Five minutes with the CLI"');
  return block;
}

test("the README's walkthrough runs, and runs again, leaving the shell where it was", async () => {
  const block = (await walkthroughBlock())
    .replaceAll('/tmp/hello', path.join(scratch, 'hello'))
    .replaceAll('/tmp/world.diff', path.join(scratch, 'world.diff'))
    .replaceAll('.agent-jobs/', `${platform.stateDir}/`);
  // `agent-jobs` on the PATH, as `npm link` puts it there, talking to this test's platform.
  const bin = path.join(scratch, 'bin');
  await execFileP('mkdir', ['-p', bin]);
  await writeFile(path.join(bin, 'agent-jobs'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
  await chmod(path.join(bin, 'agent-jobs'), 0o755);
  const home = path.join(scratch, 'home');
  const script = [
    'set -e',
    'start=$PWD',
    block,
    'test "$PWD" = "$start" || { echo "left the shell in $PWD" >&2; exit 9; }',
    'echo "run done"',
  ].join('\n');
  const twice = `${script}\n${script}\n`;

  const run = await execFileP('bash', ['-c', twice], {
    cwd: scratch,
    env: {
      ...process.env,
      PATH: `${bin}:${process.env.PATH ?? ''}`,
      AGENT_JOBS_STATE_DIR: platform.stateDir,
      HOME: home,
      NODE_NO_WARNINGS: '1',
    },
  }).catch((error: { code: number; stdout: string; stderr: string }) => {
    throw new Error(`the walkthrough failed (exit ${error.code}):\n${error.stdout}\n${error.stderr}`);
  });

  expect(run.stdout.match(/^run done$/gm)).toHaveLength(2);
  expect(run.stdout).toMatch(/Say hello to the world/);
});
