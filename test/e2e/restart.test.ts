/**
 * Restart safety through the CLI, as a user meets it: `local up --persist` is killed with `kill -9`
 * while a test run is in progress, then started again. The repository URL stays the same, the
 * interrupted test run is recorded at start (its job RUNNING: its message was already acknowledged,
 * so there is nothing to re-send), and re-sending the agent's jobs (same ids, same payloads) is
 * safe: nothing is a CONFLICT, nothing is applied twice, nothing stays unfinished, and the
 * interrupted test run keeps the commit it was pinned to.
 */
import { processesSleeping } from '../support/processes';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

interface JobJson {
  jobId: string;
  status: string;
  attempt: number;
  pin?: { sha: string };
  result?: { commitSha?: string };
  error?: { reason: string; message: string };
}

let first: RunningPlatform | undefined;
let second: RunningPlatform | undefined;
/**
 * The test command's sleep, found by its argument: a pid said inside the run's PID namespace means
 * nothing out here (as `kill -<pid>` it could even name every process).
 */
const SLEEP_TAG = `120.${process.pid}`;

afterAll(async () => {
  for (const pid of processesSleeping(SLEEP_TAG)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await first?.kill();
  await second?.stop();
  await removeScratch();
});

test('after kill -9 and a restart with --persist, URLs stay, the interrupted test run is recorded at start, and re-sending every job is safe', async () => {
  first = await startPlatform({ persist: true });
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['agent']);
  const { url } = await first.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'app']);
  const [d1, d2, d3] = await diffChain(source, [
    { 'app.txt': 'two\n' },
    { 'app.txt': 'three\n' },
    { 'app.txt': 'four\n' },
  ]);
  const p1 = applyPatchArgs('ws-restart', 'p1', url, 'agent', d1 ?? '', 'Two');
  const t1 = [
    'enqueue',
    '--type',
    'run_tests',
    '--workspace',
    'ws-restart',
    '--job-id',
    't1',
    '--command',
    `echo started; exec sleep ${SLEEP_TAG}`,
  ];
  const p2 = applyPatchArgs('ws-restart', 'p2', url, 'agent', d2 ?? '', 'Three');
  for (const args of [p1, t1, p2]) await first.cliJson(args);
  // p2 is applied while the stage still runs t1's tests at p1's commit: then the platform dies.
  await first.cliLines(['wait', 'p1', 'p2', '--timeout', '120']);
  const running = await first.untilJob<JobJson>('t1', (j) => j.status === 'RUNNING' && j.pin !== undefined);
  const p1Commit = (await first.cliJson<JobJson>(['status', 'p1'])).result?.commitSha;
  expect(running.pin?.sha).toBe(p1Commit);
  await first.kill();

  second = await startPlatform({ stateDir: first.stateDir, persist: true });

  expect(second.ready.gitUrl).toBe(first.ready.gitUrl);
  expect(second.ready.endpoints).toEqual(first.ready.endpoints);
  // The run the kill cut short was recorded STOPPED at start: its job failed with that cause, nothing is left unfinished.
  expect(await second.cliLines<JobJson>(['unfinished'])).toEqual([]);

  // The agent re-sends everything it has not seen finish (here: all of it, in order), then goes on.
  for (const args of [p1, t1, p2]) await second.cliJson(args);
  await second.cliJson(applyPatchArgs('ws-restart', 'p3', url, 'agent', d3 ?? '', 'Four'));
  expect((await second.cliJson<{ succeeded: boolean }>(['wait', 'p3', '--timeout', '120'])).succeeded).toBe(true);
  const t1After = await second.cliJson<JobJson>(['status', 't1']);

  // The interrupted run is not run again (one run per job): it fails with its cause, at its own commit.
  expect(t1After).toMatchObject({
    status: 'FAILED',
    error: { reason: 'TEST_RUN_ERROR', message: expect.stringContaining('restarted') },
    pin: { sha: p1Commit },
  });
  for (const jobId of ['p1', 'p2'])
    expect(await second.cliJson<JobJson>(['status', jobId])).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
  expect(await second.remoteLog(url, 'agent')).toEqual(['Four', 'Three', 'Two', 'initial']);
  expect(await second.cliLines<JobJson>(['unfinished'])).toEqual([]);
  const conflicts = (await second.events()).filter((e) => e.detail.reason === 'CONFLICT');
  expect(conflicts).toEqual([]);
});
