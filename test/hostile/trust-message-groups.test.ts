/**
 * Hostile input, trust side: FIFO message groups. A workspace's jobs are serial only inside the
 * group ws#<workspaceId>; a producer that puts them elsewhere gets them refused at once
 * (INVALID_JOB), never run out of order or fenced by a false PREDECESSOR_UNFINISHED.
 */
import { withTrustHarness } from './trust-harness';

describe('hostile FIFO message groups (trust side)', () => {
  const h = withTrustHarness();

  it.each([
    ['a constant group', () => 'agent-jobs'],
    ["another workspace's group", () => 'ws#someone-else'],
    ['the workspace id without the ws# prefix', (ws: string) => ws],
    ['the prefix in another case', (ws: string) => `WS#${ws}`],
  ])(
    'refuses a job sent in %s as INVALID_JOB on the first delivery, remote and ledger untouched',
    async (_label, group) => {
      const ws = await h().workspace();
      const refsBefore = await h().refs(ws);
      const job = h().patchJob(ws, 'misgrouped.txt');

      await h().sendRaw('agent-jobs', JSON.stringify(job), { groupId: group(ws.workspaceId) });
      expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

      const [dead, ...more] = await h().deadLetters('agent-jobs');
      expect(more).toEqual([]);
      expect(dead?.reason).toBe('INVALID_JOB');
      expect(dead?.errorMessage).toContain(`message group must be ws#${ws.workspaceId}`);
      expect(await h().refs(ws)).toBe(refsBefore);
      expect(await h().getJob(job.jobId)).toBeUndefined();
      expect(await h().getWorkspace(ws.workspaceId)).toBeUndefined();
      // Recovery (README: fix the producer, send again with a new job id): the workspace works.
      const retry = h().patchJob(ws, 'misgrouped.txt');
      await h().send(retry);
      await h().drive('agent-jobs');
      expect(await h().getJob(retry.jobId)).toMatchObject({ status: 'SUCCEEDED' });
    },
  );

  it('does not fence a workspace whose two jobs a producer put in two groups: both are refused, the workspace stays ACTIVE', async () => {
    const ws = await h().workspace();
    const first = h().patchJob(ws, 'one.txt');
    const second = h().patchJob(ws, 'two.txt');
    await h().sendRaw('agent-jobs', JSON.stringify(first), { groupId: 'producer-a' });
    await h().sendRaw('agent-jobs', JSON.stringify(second), { groupId: 'producer-b' });

    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });
    expect(await h().deliverOnce('agent-jobs')).toEqual({ acknowledged: true });

    expect((await h().deadLetters('agent-jobs')).map((d) => d.reason)).toEqual(['INVALID_JOB', 'INVALID_JOB']);
    expect(await h().getWorkspace(ws.workspaceId)).toBeUndefined();
    const retry = h().patchJob(ws, 'one.txt');
    await h().send(retry);
    await h().drive('agent-jobs');
    expect(await h().getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'ACTIVE',
      head: (await h().getJob(retry.jobId))?.result?.['commitSha'],
    });
  });
});
