/**
 * Hostile or wrong branch names: refused at the envelope with the rule they break, and a branch
 * that does not exist gets its own verdict (BRANCH_NOT_FOUND), never "moved from X to X" or a
 * divergence. First delivery, remote untouched (harness.ts).
 */
import { applyPatchJob, gitIn, hostileSuite, type HostileRow } from './harness';

const onBranch =
  (branch: string): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, { repo: { url: ws.repoUrl, branch } });

const ROWS: HostileRow[] = [
  {
    what: 'the branch HEAD',
    message: onBranch('HEAD'),
    reason: 'INVALID_JOB',
    says: /payload\.repo\.branch: must name a branch, not HEAD/,
  },
  {
    what: 'a full ref (refs/heads/main)',
    message: onBranch('refs/heads/main'),
    reason: 'INVALID_JOB',
    says: /must be a branch name, not a ref: use "main"/,
  },
  {
    what: 'a branch that reads as an option',
    message: onBranch('--force'),
    reason: 'INVALID_JOB',
    says: /must not start with "-"/,
  },
  {
    what: 'a hidden component',
    message: onBranch('agent/.x'),
    reason: 'INVALID_JOB',
    says: /component starting with "\."/,
  },
  {
    what: 'a .lock component',
    message: onBranch('main.lock/x'),
    reason: 'INVALID_JOB',
    says: /component ending with "\.lock"/,
  },
  {
    what: 'a branch that does not exist (recovered by creating it and redriving the job)',
    message: onBranch('agent/missing'),
    reason: 'BRANCH_NOT_FOUND',
    says: /branch agent\/missing does not exist on the remote/,
    async recover(suite, ws, failed) {
      // The runbook: repair the branch, lift the fence, then redrive the failed job from the DLQ.
      await gitIn(ws.gitDir, 'branch', 'agent/missing', 'main');
      expect((await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop')).code).toBe(0);
      expect((await suite.cli('dlq', 'redrive', '--queue', 'agent-jobs')).code).toBe(0);
      expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });
      expect(await suite.ledger().getJob(failed.jobId)).toMatchObject({ status: 'SUCCEEDED' });
      expect(await gitIn(ws.gitDir, 'show', 'agent/missing:added.txt')).toBe('x');
      await suite.expectUsable(ws);
    },
  },
];

describe('hostile and missing branches (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
