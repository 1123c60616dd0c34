/**
 * Hostile input, trust side: open_pr into a base branch the repository does not have. GitHub
 * refuses it (422 Validation Failed, field base invalid); the local PR store refuses it the same way,
 * so a job that would fail on AWS does not succeed locally.
 */
import { withTrustHarness } from './trust-harness';

describe('open_pr base branch (trust side)', () => {
  const h = withTrustHarness();

  it.each([
    ['a base branch that does not exist', 'release/9.9'],
    ['a base branch of another repository (this one has only main and the workspace branch)', 'gh-pages'],
  ])(
    "refuses %s as REJECTED_BY_TARGET with GitHub's wording, opens nothing, and a corrected job opens the PR",
    async (_label, baseBranch) => {
      const ws = await h().workspace();
      // A patch, then what open_pr requires at that commit (catalog `requires`): tests that pass.
      await h().send(h().patchJob(ws, 'pr-base.txt'));
      await h().send(h().job(ws, 'run_tests', { command: 'true' }));
      const job = h().job(ws, 'open_pr', { baseBranch, title: 'into nowhere' });
      await h().send(job);
      await h().drive('agent-jobs');
      await h().drive('run-tests');
      const refsBefore = await h().refs(ws);

      await h().drive('open-pr');

      expect(await h().getJob(job.jobId)).toMatchObject({
        status: 'FAILED',
        error: {
          reason: 'REJECTED_BY_TARGET',
          message: expect.stringContaining(
            '(422): Validation Failed; {"resource":"PullRequest","field":"base","code":"invalid"}',
          ),
        },
      });
      expect((await h().deadLetters('open-pr')).map((d) => d.reason)).toEqual(['REJECTED_BY_TARGET']);
      expect(await h().prStore.list(ws.repoUrl)).toEqual([]);
      expect(await h().refs(ws)).toBe(refsBefore);
      // Recovery (README: fix and send again): the same PR into an existing base is opened.
      const fixed = h().job(ws, 'open_pr', { baseBranch: 'main', title: 'into main' });
      await h().send(fixed);
      await h().settle();
      expect(await h().getJob(fixed.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        result: { number: 1, created: true },
      });
    },
  );
});
