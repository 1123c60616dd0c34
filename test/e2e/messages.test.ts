/**
 * What the CLI says agrees with the job's status and with itself: a test run that failed leads with
 * "tests failed" (in `status`, `logs` and the lists), a dropped job reads as cancelled rather than
 * as skipped, a missing branch names the command that runs its job again, `wait` shows a verdict
 * and a reused id together, a stage with no command reads as unconfigured rather than as failed,
 * `status` shows a result as words, and a command group's `--help` is that group's.
 */
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  runCli,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

let platform: RunningPlatform;
let source: string;
let repoUrl: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'README.md': '# app\n' }, ['msgs']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'msgs'])).url;
  const [bind] = await diffChain(source, [{ 'notes.txt': 'messages\n' }]);
  await platform.cliJson(applyPatchArgs('ws-msgs', 'msgs-bind', repoUrl, 'msgs', bind ?? '', 'Bind the workspace'));
  await platform.cliJson([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-msgs',
    '--job-id',
    'msgs-red',
    '--command',
    'echo "1 failing"; exit 1',
  ]);
  await platform.cliJson(['enqueue', '--type', 'run_lint', '--workspace', 'ws-msgs', '--job-id', 'msgs-nolint']);
  expect((await platform.cli(['wait', 'msgs-bind', 'msgs-red', 'msgs-nolint', '--timeout', '150'])).code).toBe(1);
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

test('a test run that failed leads with "tests failed" in status, logs and the workspace list, and status shows its result as words', async () => {
  const status = (await platform.cli(['status', 'msgs-red'])).stdout;
  expect(status).toMatch(/^status\s+tests failed$/m);
  expect(status).toMatch(/^result\s+tests failed \(exit 1\) at [0-9a-f]{12}$/m);
  expect(status).toMatch(/^output\s+1 failing$/m);
  expect(status).not.toContain('{"verdict"');

  const logs = (await platform.cli(['logs', 'msgs-red'])).stdout;
  expect(logs).toMatch(/^msgs-red \(run_tests, tests failed\)/);
  expect(logs).toMatch(/build finished: tests failed .*status=SUCCEEDED/);
  expect(logs).not.toMatch(/job SUCCEEDED.*state=FAILED/);

  expect((await platform.cli(['jobs', '--workspace', 'ws-msgs'])).stdout).toMatch(
    /msgs-red\s+run_tests\s+tests failed\s+tests failed \(exit 1\)/,
  );
});

test('a stage with no command configured says so, not "failed (exit 2)"', async () => {
  const job = await platform.cliJson<{ status: string; result: Record<string, unknown> }>(['status', 'msgs-nolint']);
  expect(job).toMatchObject({ status: 'SUCCEEDED', result: { verdict: 'failed', summary: 'lint not configured' } });
  const status = (await platform.cli(['status', 'msgs-nolint'])).stdout;
  expect(status).toMatch(/^status\s+lint not configured$/m);
  expect(status).toContain('no lint command: give payload.command, a package.json lint script or lint.sh');
  expect(status).not.toContain('lint failed');
});

test('wait shows both the verdict and a reused job id', async () => {
  const reused = await platform.cli([
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-msgs',
    '--job-id',
    'msgs-red',
    '--command',
    'echo other',
  ]);
  expect(reused.code).toBe(1);

  const waited = await platform.cli(['wait', 'msgs-red', '--timeout', '30']);

  expect(waited.code).toBe(1);
  expect(waited.stdout).toMatch(
    /msgs-red\s+run_tests\s+tests failed\s+tests failed \(exit 1\) at [0-9a-f]{12}; CONFLICT: 1 other request reused this job id/,
  );
});

test('a missing branch names dlq redrive; a skipped job dropped afterwards reads as cancelled, not as skipped', async () => {
  const [first, second] = await diffChain(source, [{ 'a.txt': 'a\n' }, { 'a.txt': 'a\nb\n' }]);
  await platform.cliJson(applyPatchArgs('ws-nobranch', 'nb-1', repoUrl, 'no-such-branch', first ?? '', 'First'));
  await platform.cliJson(applyPatchArgs('ws-nobranch', 'nb-2', repoUrl, 'no-such-branch', second ?? '', 'Second'));
  expect((await platform.cli(['wait', 'nb-1', 'nb-2', '--timeout', '120'])).code).toBe(1);

  const failed = (await platform.cli(['status', 'nb-1'])).stdout;
  expect(failed).toMatch(
    /^error\s+BRANCH_NOT_FOUND: branch no-such-branch does not exist on the remote: create it, then run the job again: agent-jobs dlq redrive <jobId>$/m,
  );
  expect(failed).not.toContain('replay the job');

  expect((await platform.cli(['workspace', 'unblock', 'ws-nobranch', '--drop'])).code).toBe(0);
  const dropped = (await platform.cli(['status', 'nb-2'])).stdout;
  expect(dropped).toMatch(/^status\s+CANCELLED$/m);
  expect(dropped).not.toMatch(/^error\s+SKIPPED/m);
  expect(dropped).toMatch(/^before\s+skipped: workspace ws-nobranch was blocked by job nb-1$/m);
  const listed = (await platform.cli(['jobs', '--workspace', 'ws-nobranch'])).stdout;
  expect(listed).toMatch(/nb-2\s+apply_patch\s+CANCELLED\s+cancelled while skipped \(blocked by nb-1\)/);
  expect(listed).not.toContain('SKIPPED: workspace');
});

test("a command group's --help lists that group's commands", async () => {
  const help = await runCli(['dlq', '--help']);
  expect(help.code).toBe(0);
  expect(help.stdout).toMatch(/^Usage: agent-jobs dlq <command> \[options\]/);
  expect(help.stdout).toContain('dlq redrive');
  expect(help.stdout).not.toContain('local up');
});
