/**
 * What waits on a DLQ survives a restart, as a user meets it through the CLI: a workspace blocked
 * by a poison patch (one FAILED job, one SKIPPED behind it), then `kill -9` of the platform and
 * `local up --persist` again. The skipped job is still on the DLQ and `workspace unblock --replay`
 * runs it; the failed one is still there for `dlq redrive`. When a copy is gone all the same (its
 * saved copy deleted here), the replay leaves the workspace BLOCKED and says so, `unfinished` lists
 * the job, and `--drop` is the way out.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { DLQ_COPIES_DIR } from '../../tools/local/state-dir';
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
}
interface Unblocked {
  workspace: { state: string };
  jobs: { jobId: string; action: string }[];
}

const started: RunningPlatform[] = [];
let poison: string;

beforeAll(async () => {
  // Context that is not in app.txt: the patch can never apply.
  poison = path.join(await mkdtemp(path.join(tmpdir(), 'agent-jobs-poison-')), 'poison.diff');
  await writeFile(
    poison,
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
});

afterAll(async () => {
  const [last, ...killed] = started.reverse();
  for (const platform of killed) await platform.kill();
  await last?.stop();
  await removeScratch();
  await rm(path.dirname(poison), { recursive: true, force: true });
});

/**
 * A platform with `ws` blocked by `<ws>-poison` and `<ws>-later`, `<ws>-last` skipped behind it
 * (the second edits what the first creates: it applies only in order), killed with `kill -9`.
 */
async function blockedThenKilled(ws: string): Promise<{ stateDir: string; repoUrl: string }> {
  const platform = await startPlatform({ persist: true });
  started.push(platform);
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['agent']);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', ws])).url;
  const [first, second] = await diffChain(source, [{ 'later.txt': 'later\n' }, { 'later.txt': 'later\nlast\n' }]);
  await platform.cliJson(applyPatchArgs(ws, `${ws}-poison`, repoUrl, 'agent', poison, 'Poison'));
  await platform.cliJson(applyPatchArgs(ws, `${ws}-later`, repoUrl, 'agent', first ?? '', 'Later'));
  await platform.cliJson(applyPatchArgs(ws, `${ws}-last`, repoUrl, 'agent', second ?? '', 'Last'));
  expect(
    (await platform.cli(['wait', `${ws}-poison`, `${ws}-later`, `${ws}-last`, '--timeout', '120', '--json'])).code,
  ).toBe(1);
  expect(await platform.cliJson<JobJson>(['status', `${ws}-last`])).toMatchObject({ status: 'SKIPPED' });
  await platform.kill();
  return { stateDir: platform.stateDir, repoUrl };
}

async function restart(stateDir: string): Promise<RunningPlatform> {
  const platform = await startPlatform({ stateDir, persist: true });
  started.push(platform);
  return platform;
}

test('after kill -9 and a restart with --persist, the skipped job is replayed and the failed one is still on the DLQ', async () => {
  const { stateDir, repoUrl } = await blockedThenKilled('ws-kept');
  const platform = await restart(stateDir);

  const listed = (
    await platform.cliLines<{ jobId: string; status: string }>(['dlq', 'list', '--queue', 'agent-jobs'])
  ).map((r) => [r.jobId, r.status]);
  expect(listed).toEqual([
    ['ws-kept-poison', 'FAILED'],
    ['ws-kept-later', 'SKIPPED'],
    ['ws-kept-last', 'SKIPPED'],
  ]);
  const unblocked = await platform.cliJson<Unblocked>(['workspace', 'unblock', 'ws-kept', '--replay']);

  expect(unblocked.jobs).toEqual([
    expect.objectContaining({ jobId: 'ws-kept-poison', action: 'kept' }),
    expect.objectContaining({ jobId: 'ws-kept-later', action: 'replayed' }),
    expect.objectContaining({ jobId: 'ws-kept-last', action: 'replayed' }),
  ]);
  expect(unblocked.workspace.state).toBe('ACTIVE');
  const settled = (j: JobJson) => j.status !== 'SKIPPED' && j.status !== 'IN_FLIGHT';
  expect(await platform.untilJob<JobJson>('ws-kept-later', settled)).toMatchObject({ status: 'SUCCEEDED' });
  expect(await platform.untilJob<JobJson>('ws-kept-last', settled)).toMatchObject({ status: 'SUCCEEDED' });
  expect(await platform.remoteLog(repoUrl, 'agent')).toEqual(['Last', 'Later', 'initial']);
  // The failed job's copy came back too: `dlq redrive` finds it (and it fails again, as it must).
  const redriven = await platform.cliJson<{ redriven: { jobId: string }[] }>([
    'dlq',
    'redrive',
    '--queue',
    'agent-jobs',
  ]);
  expect(redriven.redriven.map((r) => r.jobId)).toEqual(['ws-kept-poison']);
  expect(await platform.cliLines(['unfinished'])).toEqual([]);
});

test('a skipped job whose DLQ copy is gone is never left behind an ACTIVE workspace: unblock --replay refuses, unfinished lists it, --drop ends it', async () => {
  const { stateDir } = await blockedThenKilled('ws-lost');
  // The platform's saved copies lost as well: nothing can put the skipped job back on the DLQ.
  await rm(path.join(stateDir, DLQ_COPIES_DIR), { recursive: true, force: true });
  const platform = await restart(stateDir);

  const replay = await platform.cli(['workspace', 'unblock', 'ws-lost', '--replay']);

  expect(replay.code).toBe(1);
  expect(replay.stderr).toMatch(/ws-lost-later, ws-lost-last.*--drop/);
  expect(await platform.cliJson(['workspace', 'show', 'ws-lost'])).toMatchObject({ state: 'BLOCKED' });
  const stranded = [
    ['ws-lost-later', 'SKIPPED'],
    ['ws-lost-last', 'SKIPPED'],
  ];
  expect((await platform.cliLines<JobJson>(['unfinished'])).map((j) => [j.jobId, j.status])).toEqual(stranded);
  expect((await platform.cli(['unfinished'])).stdout).toContain('"workspace unblock ws-lost --drop"');

  const dropped = await platform.cliJson<Unblocked>(['workspace', 'unblock', 'ws-lost', '--drop']);

  expect(dropped.workspace.state).toBe('ACTIVE');
  expect(dropped.jobs.filter((j) => j.action === 'dropped').map((j) => j.jobId)).toEqual([
    'ws-lost-later',
    'ws-lost-last',
  ]);
  for (const [jobId] of stranded)
    expect(await platform.cliJson<JobJson>(['status', jobId ?? ''])).toMatchObject({ status: 'CANCELLED' });
  expect(await platform.cliLines(['unfinished'])).toEqual([]);
});
