/**
 * The chaos harness's count of applied patches (test/chaos/invariants.ts): a patch job that gave
 * up may have pushed first (found by the run r5000, RELIABILITY.md); its commit then counts, and
 * nothing else changes. And what its leftovers invariant finds on the machine.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JobRecord } from '../../src/core/ports';
import { appliedPatches, gaveUpAfterPushIds, runLeftovers, type Branch } from '../chaos/invariants';
import type { PlannedItem } from '../chaos/scenario';

const item = (jobId: string, kind: PlannedItem['kind'] = 'apply_patch') =>
  ({ kind, jobId, workspaceId: 'ws', position: 0 }) as PlannedItem;
const branchWith = (...trailers: string[]): Branch => ({
  commits: trailers.map((t, i) => ({ sha: `sha-${i}`, parents: [], trailers: [t] })),
  tree: 'tree',
  head: 'head',
});
const records = (entries: Record<string, Partial<JobRecord>>) => (i: PlannedItem) =>
  entries[i.jobId] as JobRecord | undefined;

const items = [item('a'), item('tests', 'run_tests'), item('b'), item('c')];

it('counts the patches that SUCCEEDED', () => {
  const record = records({
    a: { status: 'SUCCEEDED' },
    tests: { status: 'SUCCEEDED' },
    b: { status: 'SUCCEEDED' },
    c: { status: 'SKIPPED' },
  });
  expect(appliedPatches(items, record, branchWith('a', 'b')).map((i) => i.jobId)).toEqual(['a', 'b']);
});

it('counts a patch that gave up when its commit is on the branch, and only then', () => {
  const gaveUp = {
    status: 'FAILED',
    error: { reason: 'RETRIES_EXHAUSTED', message: 'gave up after 5 receives' },
  } as const;
  const record = records({ a: { status: 'SUCCEEDED' }, b: gaveUp, c: { status: 'SKIPPED' } });
  expect(appliedPatches(items, record, branchWith('a', 'b')).map((i) => i.jobId)).toEqual(['a', 'b']);
  expect(appliedPatches(items, record, branchWith('a')).map((i) => i.jobId)).toEqual(['a']);
});

it('never counts a patch refused for its content, even with a commit carrying its id', () => {
  const record = records({
    a: { status: 'SUCCEEDED' },
    b: { status: 'FAILED', error: { reason: 'PATCH_DOES_NOT_APPLY', message: 'no' } },
  });
  expect(appliedPatches(items, record, branchWith('a', 'b')).map((i) => i.jobId)).toEqual(['a']);
});

it('names, for the summary, every job that gave up after its push took effect', () => {
  const job = (jobId: string, reason: string) =>
    ({ jobId, status: 'FAILED', error: { reason, message: '' } }) as JobRecord;
  const ledger = {
    jobs: [
      job('a', 'RETRIES_EXHAUSTED'),
      job('b', 'UNEXPECTED_ERROR'),
      job('c', 'PATCH_DOES_NOT_APPLY'),
      job('d', 'RETRIES_EXHAUSTED'),
    ],
    workspaces: [],
  };
  const branches = new Map([
    ['ws-1', branchWith('a')],
    ['ws-2', branchWith('b', 'c')],
  ]);
  expect(gaveUpAfterPushIds({ ledger, branches })).toEqual(['a', 'b']);
});

describe('runLeftovers (the leftovers invariant)', () => {
  it('names a process sleeping the run tag, and a run directory or cgroup a run recorded that is still there', async () => {
    const runsDir = await mkdtemp(join(tmpdir(), 'chaos-leftovers-'));
    const kept = await mkdtemp(join(tmpdir(), 'chaos-leftover-run-'));
    const tag = `30.${process.pid}7`;
    const sleeper = spawn('sleep', [tag], { stdio: 'ignore' });
    try {
      await writeFile(
        join(runsDir, 'job-a.0.json'),
        JSON.stringify({ runDir: kept, cgroup: { version: 1, pids: join(runsDir, 'gone') } }),
      );
      await writeFile(join(runsDir, 'job-b.0.json'), JSON.stringify({ runDir: join(runsDir, 'removed') }));

      await expect(runLeftovers(tag, runsDir)).resolves.toEqual([
        `process ${sleeper.pid} (sleep ${tag}) is still running`,
        `job-a.0.json: ${kept} is still there`,
      ]);
      sleeper.kill('SIGKILL');
      await new Promise((resolve) => sleeper.once('exit', resolve));
      await rm(kept, { recursive: true });
      await expect(runLeftovers(tag, runsDir)).resolves.toEqual([]);
    } finally {
      sleeper.kill('SIGKILL');
      await rm(runsDir, { recursive: true, force: true });
      await rm(kept, { recursive: true, force: true });
    }
  });
});
