/**
 * A DLQ an operator can empty, through the CLI: a FAILED job is dismissed (who, why, when, in the
 * ledger; its DLQ copy removed, so what the DLQ alarm counts goes back to 0), a SKIPPED job that is
 * cancelled leaves the DLQ with its cancel, and every answer (`dlq list`, `dlq show`, `dlq peek`,
 * the replay) agrees about what waits there. The DLQ depth is read as the alarm reads it
 * (ApproximateNumberOfMessages* of the DLQ): emulated here by fauxqs.
 */
import type { Ledger } from '../../src/core/ports';
import { connect } from '../../tools/operator/connection';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  poisonPatch,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

interface JobJson {
  jobId: string;
  status: string;
  dismissed?: { by: string; reason: string; at: string };
}
interface DlqRow {
  jobId: string;
  workspaceId: string;
  status: string;
}
interface Dismissed extends JobJson {
  alreadyDismissed: boolean;
  removed: number;
  workspace?: { workspaceId: string; state: string };
}

let platform: RunningPlatform;
let source: string;
let repoUrl: string;
let poison: string;

beforeAll(async () => {
  platform = await startPlatform();
  source = await makeRepository({ 'app.txt': 'one\n' }, ['dismiss', 'cancelled', 'leftover']);
  repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'dismissed'])).url;
  poison = await poisonPatch();
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
});

/** A poison patch blocks `ws`; `later` is skipped behind it. */
async function blockWorkspace(ws: string, branch: string, later: string): Promise<void> {
  const [diff] = await diffChain(source, [{ [`${later}.txt`]: 'x\n' }]);
  await platform.cliJson(applyPatchArgs(ws, `${ws}-poison`, repoUrl, branch, poison, 'Poison'));
  await platform.cliJson(applyPatchArgs(ws, later, repoUrl, branch, diff ?? '', later));
  expect((await platform.cli(['wait', `${ws}-poison`, later, '--timeout', '120', '--json'])).code).toBe(1);
}

/** `dlq list` of the FIFO queue's DLQ in words: its heading (the depth, as the DLQ alarm counts it) and any note. */
async function dlqListText(): Promise<{ heading: string; stderr: string; rows: DlqRow[] }> {
  const text = await platform.cli(['dlq', 'list', '--queue', 'agent-jobs']);
  expect(text.code).toBe(0);
  return {
    heading: text.stdout.split('\n')[0] ?? '',
    stderr: text.stderr,
    rows: await platform.cliLines<DlqRow>(['dlq', 'list', '--queue', 'agent-jobs']),
  };
}

test('dlq dismiss: a FAILED job is recorded as dealt with (who, why, when), its DLQ copy removed; its workspace stays BLOCKED until unblocked', async () => {
  await blockWorkspace('ws-dismiss', 'dismiss', 'dismiss-1');
  expect((await dlqListText()).heading).toBe('agent-jobs DLQ: about 2 message(s), 2 listed');

  // What it does not apply to is refused, naming why and what applies instead.
  const noReason = await platform.cli(['dlq', 'dismiss', 'ws-dismiss-poison']);
  expect([noReason.code, noReason.stderr]).toEqual([2, expect.stringContaining('--reason')]);
  for (const reason of ['  ', 'x'.repeat(501)]) {
    const bad = await platform.cli(['dlq', 'dismiss', 'ws-dismiss-poison', '--reason', reason]);
    expect([bad.code, bad.stderr]).toEqual([2, expect.stringMatching(/a dismissal/)]);
  }
  const skipped = await platform.cli(['dlq', 'dismiss', 'dismiss-1', '--reason', 'not wanted']);
  expect([skipped.code, skipped.stderr]).toEqual([
    1,
    expect.stringMatching(/dismiss-1 is SKIPPED.*cancel dismiss-1.*workspace unblock ws-dismiss --drop/),
  ]);
  const unknown = await platform.cli(['dlq', 'dismiss', 'no-such-job', '--reason', 'x']);
  expect(unknown.code).toBe(3);

  const dismissed = await platform.cliJson<Dismissed>([
    'dlq',
    'dismiss',
    'ws-dismiss-poison',
    '--reason',
    'context was stale; sent again as a new job',
    '--by',
    'alice',
  ]);

  expect(dismissed).toMatchObject({
    jobId: 'ws-dismiss-poison',
    status: 'FAILED',
    dismissed: { by: 'alice', reason: 'context was stale; sent again as a new job', at: expect.any(String) },
    alreadyDismissed: false,
    removed: 1,
    workspace: { workspaceId: 'ws-dismiss', state: 'BLOCKED' },
  });
  expect(await platform.cliJson<JobJson>(['status', 'ws-dismiss-poison'])).toMatchObject({
    status: 'FAILED',
    dismissed: { by: 'alice' },
  });
  // The DLQ holds the skipped job only, and the ledger lists exactly that: nothing unaccounted for.
  const listed = await dlqListText();
  expect(listed.heading).toBe('agent-jobs DLQ: about 1 message(s), 1 listed');
  expect(listed.stderr).not.toContain('does not list');
  expect(listed.rows.map((r) => r.jobId)).toEqual(['dismiss-1']);
  const shown = await platform.cli(['dlq', 'show', 'ws-dismiss-poison']);
  expect([shown.code, shown.stderr]).toEqual([1, expect.stringMatching(/dismissed by alice/)]);
  const redrive = await platform.cli(['dlq', 'redrive', 'ws-dismiss-poison', '--json']);
  expect(redrive.code).toBe(1);
  expect(JSON.parse(redrive.stdout)).toMatchObject({
    redriven: [],
    left: [{ jobId: 'ws-dismiss-poison', why: expect.stringMatching(/dismissed by alice/) }],
  });

  // A retry of the same dismissal is answered the same way, and changes nothing.
  const again = await platform.cli([
    'dlq',
    'dismiss',
    'ws-dismiss-poison',
    '--reason',
    'retried',
    '--by',
    'bob',
    '--json',
  ]);
  expect(again.code).toBe(0);
  expect(JSON.parse(again.stdout)).toMatchObject({
    alreadyDismissed: true,
    removed: 0,
    dismissed: { by: 'alice', reason: 'context was stale; sent again as a new job' },
  });

  // The fence stays until the operator decides about the skipped jobs; the dismissed job is not in that decision.
  const unblocked = await platform.cliJson<{ workspace: { state: string }; jobs: { jobId: string; action: string }[] }>(
    ['workspace', 'unblock', 'ws-dismiss', '--drop'],
  );
  expect(unblocked).toMatchObject({
    workspace: { state: 'ACTIVE' },
    jobs: [{ jobId: 'dismiss-1', action: 'dropped' }],
  });
  const after = await dlqListText();
  expect(after.heading).toBe('agent-jobs DLQ: about 0 message(s), 0 listed');
  expect(after.stderr).not.toContain('does not list');
});

test('dlq dismiss of a job that did not fail is refused, naming its status', async () => {
  const [diff] = await diffChain(source, [{ 'fine.txt': 'fine\n' }]);
  await platform.cliJson(applyPatchArgs('ws-fine', 'fine-1', repoUrl, 'main', diff ?? '', 'Fine'));
  await platform.cliJson(['wait', 'fine-1', '--timeout', '120']);
  const refused = await platform.cli(['dlq', 'dismiss', 'fine-1', '--reason', 'x']);
  expect([refused.code, refused.stderr]).toEqual([
    1,
    expect.stringMatching(/fine-1 is SUCCEEDED: nothing of it waits on a DLQ/),
  ]);
});

test('cancel of a SKIPPED job removes its DLQ copy: list, show, peek and the replay agree that nothing of it waits', async () => {
  await blockWorkspace('ws-cancelled', 'cancelled', 'cancelled-1');

  // A FIFO DLQ hands out only the head of each group: peek says what waits behind it.
  const peeked = await platform.cli(['dlq', 'peek', '--queue', 'agent-jobs']);
  expect(peeked.stdout).toContain('ws-cancelled-poison');
  expect(peeked.stderr).toMatch(/1 more message\(s\) wait behind the head of their group.*dlq list/);

  const cancelled = await platform.cli(['cancel', 'cancelled-1']);
  expect(cancelled.code).toBe(0);
  expect(cancelled.stdout).toMatch(/SKIPPED -> CANCELLED \(its DLQ copy is removed: it never runs\)/);

  const listed = await dlqListText();
  expect(listed.heading).toBe('agent-jobs DLQ: about 1 message(s), 1 listed');
  expect(listed.stderr).not.toContain('does not list');
  const shown = await platform.cli(['dlq', 'show', 'cancelled-1']);
  expect([shown.code, shown.stderr]).toEqual([
    1,
    expect.stringContaining('job cancelled-1 is CANCELLED: nothing of it waits on a DLQ'),
  ]);

  const replayed = await platform.cliJson<{ jobs: { jobId: string; action: string }[] }>([
    'workspace',
    'unblock',
    'ws-cancelled',
    '--replay',
  ]);
  expect(replayed.jobs.map((j) => j.jobId)).not.toContain('cancelled-1');

  await platform.cliJson(['dlq', 'dismiss', 'ws-cancelled-poison', '--reason', 'done with it']);
  expect((await dlqListText()).heading).toBe('agent-jobs DLQ: about 0 message(s), 0 listed');
  expect(await platform.cliJson<JobJson>(['status', 'cancelled-1'])).toMatchObject({ status: 'CANCELLED' });
});

test('dlq redrive of everything deletes the copies an interrupted dismissal or cancel left, reports them removed, and runs neither again', async () => {
  await blockWorkspace('ws-leftover', 'leftover', 'leftover-1');
  // Each command records its change in the ledger, then stops before it removes the job's DLQ copy.
  const connection = connect({ stateDir: platform.stateDir });
  const interrupted = async (command: (ledger: Ledger) => Promise<unknown>) => command(await connection.ledger());
  const dismissal = { by: 'alice', reason: 'dealt with', at: new Date().toISOString() };
  try {
    expect(
      await interrupted((ledger) => ledger.dismiss({ jobId: 'ws-leftover-poison', dismissal, now: Date.now() })),
    ).toMatchObject({ kind: 'dismissed' });
    expect((await dlqListText()).heading).toBe('agent-jobs DLQ: about 2 message(s), 1 listed');

    const redrive = await platform.cli(['dlq', 'redrive', '--queue', 'agent-jobs', '--json']);

    // The dismissed job's copy is removed even at the head of its BLOCKED workspace's group; the skipped job behind it waits for the unblock.
    expect(redrive.code).toBe(0);
    expect(JSON.parse(redrive.stdout)).toEqual({
      redriven: [],
      left: [
        { queue: 'agent-jobs', jobId: 'leftover-1', why: 'workspace ws-leftover is BLOCKED (group ws#ws-leftover)' },
      ],
      removed: [
        {
          queue: 'agent-jobs',
          jobId: 'ws-leftover-poison',
          status: 'FAILED',
          why: expect.stringMatching(/^dismissed by alice at .* \(dealt with\)$/),
        },
      ],
    });
    expect((await dlqListText()).heading).toBe('agent-jobs DLQ: about 1 message(s), 1 listed');

    expect(await interrupted((ledger) => ledger.cancel('leftover-1', Date.now()))).toMatchObject({
      cancelled: true,
      previous: 'SKIPPED',
    });
    const again = await platform.cli(['dlq', 'redrive', '--queue', 'agent-jobs']);
    expect({ code: again.code, stdout: again.stdout.trim() }).toEqual({
      code: 0,
      stdout:
        'redriven: 0\n  removed from agent-jobs DLQ: leftover-1 (CANCELLED, cancelled before: it never runs; a copy an interrupted command left)',
    });
  } finally {
    connection.close();
  }
  const listed = await dlqListText();
  expect(listed.heading).toBe('agent-jobs DLQ: about 0 message(s), 0 listed');
  expect(listed.stderr).not.toContain('does not list');
  expect(await platform.cliJson<JobJson & { attempt: number }>(['status', 'ws-leftover-poison'])).toMatchObject({
    status: 'FAILED',
    attempt: 1,
    dismissed: { by: 'alice' },
  });
  expect(await platform.cliJson<JobJson>(['status', 'leftover-1'])).toMatchObject({ status: 'CANCELLED' });
  // The fence stays: lifting it is the unblock's decision, which now finds nothing of either job.
  const unblocked = await platform.cliJson<{ workspace: { state: string }; jobs: unknown[] }>([
    'workspace',
    'unblock',
    'ws-leftover',
    '--drop',
  ]);
  expect(unblocked).toMatchObject({ workspace: { state: 'ACTIVE' }, jobs: [] });
});
