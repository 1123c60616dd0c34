/**
 * A fork declares a job type while its local platform runs: the platform (its own process, started
 * from the catalog as it was) has no queue for it, the CLI (in process, with the new declaration:
 * test/support/catalog-with-check-format.ts) knows it. What does not need the new type keeps
 * working; what does says in one line that the platform must be restarted, and how.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runCliInProcess, type InProcessResult } from '../support/in-process-cli';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from '../e2e/harness';

jest.mock('../../contract/job-types', () =>
  jest
    .requireActual<typeof import('../support/catalog-with-check-format')>('../support/catalog-with-check-format')
    .catalogWithCheckFormat('true'),
);

jest.setTimeout(120_000);

let work: string;
let platform: RunningPlatform;

/** The CLI of the changed catalog, in process, against the platform started before the change. */
function cli(args: readonly string[]): Promise<InProcessResult> {
  return runCliInProcess(args, { stateDir: platform.stateDir, cwd: work });
}

beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'agent-jobs-catalog-change-'));
  platform = await startPlatform();
});

afterAll(async () => {
  await platform?.stop();
  await rm(work, { recursive: true, force: true });
  await removeScratch();
});

it('commands that do not need the new job type keep working', async () => {
  const source = await makeRepository({ 'app.txt': 'one\n' });
  const [diff] = await diffChain(source, [{ 'app.txt': 'two\n' }]);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'before'])).url;
  const patch = applyPatchArgs('ws-before', 'before-1', repoUrl, 'main', diff ?? '', 'Two');
  const tests = [
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-before',
    '--job-id',
    'before-2',
    '--command',
    'true',
  ];
  for (const args of [
    ['workspaces'],
    ['dlq', 'list'],
    ['unfinished'],
    patch,
    tests,
    ['wait', 'before-1', 'before-2', '--timeout', '60'],
  ]) {
    const result = await cli([...args, '--json']);
    expect({ args, code: result.code }).toEqual({ args, code: 0 });
  }
});

it('a command that needs it says in one line that the platform must be restarted, and how', async () => {
  const refused = await cli(['enqueue', '--type', 'check_format', '--workspace', 'ws-before', '--job-id', 'format-1']);

  expect(refused.code).toBe(5);
  expect(refused.stderr.trim().split('\n')).toHaveLength(1);
  expect(refused.stderr).toMatch(/started before job type check_format was declared.*restart.*npm start/);
  // Started without --persist: its ledger is in memory, so the advice says a restart loses it, and how to keep it from then on.
  expect(refused.stderr).not.toMatch(/keeps its ledger/);
  expect(refused.stderr).toMatch(/its ledger is in memory: a restart loses every job and DLQ message it holds/);
  expect(refused.stderr).toMatch(/"npm start -- --persist" keeps them across later restarts/);
  // Nothing was sent or recorded: the platform would not know what to do with it.
  expect((await cli(['status', 'format-1'])).code).toBe(3);
});

it("so does a DLQ command that names the new type's queue", async () => {
  const refused = await cli(['dlq', 'list', '--queue', 'check-format']);

  expect(refused.code).toBe(5);
  expect(refused.stderr).toMatch(/started before job type check_format was declared.*restart/);
});
