/**
 * Hostile faults on the platform itself, through the CLI: `kill -9` of `agent-jobs local up` while
 * a test run is in progress, whose command left processes behind (one in the background, one after
 * `setsid`), then a start again from the same state directory. What is checked is what is left on
 * the machine: no process of the run (not even before the restart), no run directory after it, and
 * the job failed with its cause.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from '../e2e/harness';
import { eventually } from '../support/eventually';
import { processesSleeping } from '../support/processes';

jest.setTimeout(240_000);

interface JobJson {
  status: string;
  error?: { reason: string; message: string };
}

let first: RunningPlatform | undefined;
let second: RunningPlatform | undefined;
const tag = `900.${process.pid}`;

afterAll(async () => {
  for (const pid of processesSleeping(tag)) process.kill(pid, 'SIGKILL');
  await first?.kill();
  await second?.stop();
  await removeScratch();
});

/** The host directories of runs whose checkout holds `file` (a name no other repository has). */
function runDirsHolding(file: string): string[] {
  return readdirSync(tmpdir())
    .filter((name) => name.startsWith('agent-jobs-runs-'))
    .flatMap((runs) => readdirSync(path.join(tmpdir(), runs)).map((run) => path.join(tmpdir(), runs, run)))
    .filter((run) => existsSync(path.join(run, 'workspace', file)));
}

test('kill -9 of the platform during a test run: the run dies with it, and the next start removes its directory and fails its job', async () => {
  first = await startPlatform({ persist: true });
  const unique = `only-here-${randomUUID()}.txt`;
  const source = await makeRepository({ 'app.txt': 'one\n', [unique]: 'x\n' }, ['agent']);
  const { url } = await first.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'killed']);
  const [diff] = await diffChain(source, [{ 'app.txt': 'two\n' }]);
  await first.cliJson(applyPatchArgs('ws-killed', 'k1', url, 'agent', diff ?? '', 'Two'));
  const command = `echo before-the-kill; setsid sh -c 'exec sleep ${tag}' & sleep ${tag} & exec sleep ${tag}`;
  await first.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-killed',
    '--job-id',
    'k2',
    '--command',
    command,
  ]);
  await eventually(
    async () => processesSleeping(tag),
    (pids) => pids.length === 3,
    { what: `the run's three processes sleeping ${tag}`, timeoutMs: 120_000 },
  );
  const [runDir, ...others] = runDirsHolding(unique);
  expect(others).toEqual([]);
  expect(runDir).toBeDefined();

  await first.kill();

  await eventually(
    async () => processesSleeping(tag),
    (pids) => pids.length === 0,
    { what: 'the run to die with the platform', timeoutMs: 10_000 },
  );
  second = await startPlatform({ stateDir: first.stateDir, persist: true });
  expect(existsSync(runDir!)).toBe(false);
  expect(await second.cliJson<JobJson>(['status', 'k2'])).toMatchObject({
    status: 'FAILED',
    error: { reason: 'TEST_RUN_ERROR', message: expect.stringContaining('restarted') },
  });
  expect((await second.cli(['logs', 'k2'])).stdout).toContain('before-the-kill');
});
