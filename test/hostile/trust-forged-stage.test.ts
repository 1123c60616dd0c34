/**
 * Hostile input, trust side: messages put straight on a stage queue, bypassing the sequencer. A
 * stage consumer runs only what the ledger says the sequencer pinned (same job id, request digest,
 * repository, branch and commit); anything else is refused on the first delivery (UNPINNED, or
 * INVALID_JOB when the pin itself breaks the URL rules), nothing runs, and no ledger record of a
 * real job changes. Recovery: none needed; the real job, delivered as the sequencer sent it, runs.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { StageMessage } from '../../src/core/envelope';
import { withTrustHarness, type QueueName, type TrustHarness, type Workspace } from './trust-harness';

/** A command that leaves a mark if it ever runs. */
function markingCommand(): { command: string; ran: () => boolean } {
  const mark = join(tmpdir(), `agent-jobs-forged-${randomUUID()}`);
  return { command: `touch ${mark}`, ran: () => existsSync(mark) };
}

type Forgery = (
  real: StageMessage<'run_tests'>,
  ws: Workspace,
  h: TrustHarness,
) => Promise<Record<string, unknown>> | Record<string, unknown>;

describe('forged stage messages (trust side)', () => {
  const h = withTrustHarness();

  /** Delivers `body` once on `queue` and checks the refusal: reason, nothing ran, no record, remote unchanged. */
  async function expectRefused(
    queue: QueueName,
    body: Record<string, unknown>,
    reason: string,
    says: RegExp,
  ): Promise<void> {
    await h().sendRaw(queue, JSON.stringify(body));
    expect(await h().deliverOnce(queue)).toEqual({ acknowledged: true });
    const [dead, ...more] = await h().deadLetters(queue);
    expect(more).toEqual([]);
    expect(dead?.reason).toBe(reason);
    expect(dead?.errorMessage).toMatch(says);
    // No outcome event under a job id that may belong to a real job.
    expect(h().events.filter((e) => e.detail['jobId'] === body['jobId'])).toEqual([]);
  }

  describe('with a job id the sequencer never saw', () => {
    it.each<[string, (ws: Workspace, head: string) => Record<string, unknown>, string, RegExp]>([
      [
        'a pin to the real head of a real workspace',
        (ws, head) => ({ pin: { sha: head, repoUrl: ws.repoUrl, branch: ws.branch } }),
        'UNPINNED',
        /no record of job .*: the sequencer never pinned it/,
      ],
      [
        'a file:// repository in the pin',
        (ws, head) => ({ pin: { sha: head, repoUrl: `file://${ws.gitDir}`, branch: ws.branch } }),
        'INVALID_JOB',
        /pin\.repoUrl: must be an http\(s\) URL, not file:/,
      ],
      [
        'credentials in the pin URL',
        (ws, head) => ({
          pin: { sha: head, repoUrl: ws.repoUrl.replace('http://', 'HTTP://bot:tok@'), branch: ws.branch },
        }),
        'INVALID_JOB',
        /pin\.repoUrl: must not carry credentials/,
      ],
      ['no pin', () => ({}), 'INVALID_JOB', /pin: is required/],
    ])(
      'refuses a run_tests message with %s, runs nothing and leaves no record',
      async (_label, pinOf, reason, says) => {
        const ws = await h().workspace();
        const refsBefore = await h().refs(ws);
        const head = (await h().refs(ws)).split('\n')[0]!.split(' ')[1]!;
        const mark = markingCommand();
        const forged = { ...h().job(ws, 'run_tests', { command: mark.command }), ...pinOf(ws, head) };

        await expectRefused('run-tests', forged, reason, says);

        expect(mark.ran()).toBe(false);
        expect(await h().getJob(String(forged.jobId))).toBeUndefined();
        expect(await h().refs(ws)).toBe(refsBefore);
      },
    );

    it('refuses an open_pr message the sequencer never pinned: no pull request is opened', async () => {
      const ws = await h().workspace();
      const head = (await h().refs(ws)).split('\n')[0]!.split(' ')[1]!;
      const forged = {
        ...h().job(ws, 'open_pr', { baseBranch: 'main', title: 'forged' }),
        pin: { sha: head, repoUrl: ws.repoUrl, branch: ws.branch },
      };

      await expectRefused('open-pr', forged, 'UNPINNED', /the sequencer never pinned it/);

      expect(await h().prStore.list(ws.repoUrl)).toEqual([]);
      expect(await h().getJob(forged.jobId)).toBeUndefined();
    });
  });

  describe('altering a job the sequencer did pin', () => {
    it.each<[string, Forgery, RegExp]>([
      [
        'another command (another request under the same job id)',
        (real) => ({ ...real, payload: { command: 'echo forged' } }),
        /differs from the request the sequencer pinned/,
      ],
      [
        'an older commit',
        async (real, ws, harness) => ({ ...real, pin: { ...real.pin, sha: await baseOf(harness, ws) } }),
        /pin\.sha differs/,
      ],
      [
        "another workspace's repository",
        async (real, _ws, harness) => ({ ...real, pin: { ...real.pin, repoUrl: (await harness.workspace()).repoUrl } }),
        /pin\.repoUrl differs/,
      ],
      ['another branch', (real) => ({ ...real, pin: { ...real.pin, branch: 'main' } }), /pin\.branch differs/],
      [
        'another workspace id',
        (real) => ({ ...real, workspaceId: 'ws-someone-else' }),
        /differs from the request the sequencer pinned/,
      ],
    ])('refuses %s, leaves the real record as it was, and the real message still runs', async (_label, forge, says) => {
      const ws = await h().workspace();
      const real = await h().pinnedForReal(ws, h().job(ws, 'run_tests', { command: 'echo real' }));
      const recordBefore = await h().getJob(real.jobId);
      const refsBefore = await h().refs(ws);

      await expectRefused('run-tests', await forge(real, ws, h()), 'UNPINNED', says);

      expect(await h().getJob(real.jobId)).toEqual(recordBefore);
      expect(await h().refs(ws)).toBe(refsBefore);
      await h().sendRaw('run-tests', JSON.stringify(real));
      await h().drive('run-tests');
      expect(await h().getJob(real.jobId)).toMatchObject({
        status: 'SUCCEEDED',
        attempt: (recordBefore?.attempt ?? 0) + 1,
        result: { verdict: 'passed', sha: real.pin.sha },
      });
    });

    it('refuses an altered copy of a job that already ran: its SUCCEEDED record and result stay', async () => {
      const ws = await h().workspace();
      const real = await h().pinnedForReal(ws, h().job(ws, 'run_tests', { command: 'echo real' }));
      await h().sendRaw('run-tests', JSON.stringify(real));
      await h().drive('run-tests');
      const done = await h().getJob(real.jobId);
      expect(done).toMatchObject({ status: 'SUCCEEDED' });
      h().events.splice(0);
      const mark = markingCommand();

      await expectRefused(
        'run-tests',
        { ...real, payload: { command: mark.command } },
        'UNPINNED',
        /differs from the request/,
      );

      expect(mark.ran()).toBe(false);
      expect(await h().getJob(real.jobId)).toEqual(done);
    });
  });
});

/** The first commit of the workspace branch (before the binding patch). */
async function baseOf(h: TrustHarness, ws: Workspace): Promise<string> {
  const refs = await h.refs(ws);
  return refs
    .split('\n')
    .find((l) => l.startsWith('refs/heads/main '))!
    .split(' ')[1]!;
}
