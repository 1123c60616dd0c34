/**
 * Hostile input, trust side: the redrive. Running a FAILED or SKIPPED job again is the operator's
 * act (`dlq redrive`, `workspace unblock --replay`), recorded in the ledger before the message is
 * sent; a message that only carries the `redrive` attribute is an ordinary redelivery and changes
 * no record. And a DLQ copy is what the ledger says the job is (its request digest), whatever its
 * attributes claim: a forged copy under a real job's id is reported, never redriven in its place.
 * Raw messages on the FIFO queue, the real sequencer and the real CLI (harness.ts).
 */
import { randomUUID } from 'node:crypto';
import { applyPatchJob, hostileSuite, type HostileMessage, type HostileWorkspace } from './harness';

/** A patch whose context is not on the branch: PATCH_DOES_NOT_APPLY, and its workspace BLOCKED. */
const NOT_APPLYING =
  'diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-not this line\n+x\n';

describe('hostile redrives (sequencer and CLI, first delivery)', () => {
  const suite = hostileSuite();

  /** The job that failed and blocks its workspace, its record, and its copy on the DLQ. */
  async function blockingFailure(ws: HostileWorkspace): Promise<HostileMessage> {
    const failing = applyPatchJob(ws, { diff: NOT_APPLYING });
    await suite.sendRaw(ws, failing);
    await suite.deliverOnce();
    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      error: { reason: 'PATCH_DOES_NOT_APPLY' },
    });
    expect(await suite.ledger().getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: failing.jobId,
    });
    return failing;
  }

  /** The same body again, with a `redrive` attribute nobody authorised and a dedup id of its own. */
  const forgedRedrive = (ws: HostileWorkspace, message: HostileMessage) =>
    suite.sendRaw(ws, message, { attributes: { redrive: 'forged' }, deduplicationId: `forged-${randomUUID()}` });

  it('keeps the recorded failure of the job blocking its workspace when a delivery of it carries the redrive attribute; unblock --drop then leaves it FAILED', async () => {
    const ws = await suite.newWorkspace();
    const failing = await blockingFailure(ws);
    const recorded = await suite.ledger().getJob(failing.jobId);

    await forgedRedrive(ws, failing);
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });

    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 1,
      error: recorded?.error,
    });
    expect(await suite.ledger().getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: failing.jobId,
      blockedReason: 'PATCH_DOES_NOT_APPLY',
    });
    const unblock = await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop');
    expect(unblock.code).toBe(0);
    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({ status: 'FAILED', error: recorded?.error });
  });

  it('keeps the blocking job FAILED even for a redrive the ledger recorded while its fence was up (never SKIPPED, blocked by itself)', async () => {
    const ws = await suite.newWorkspace();
    const failing = await blockingFailure(ws);
    await suite.ledger().authorizeRedrive({ jobId: failing.jobId, token: 'too-early', now: Date.now() });

    await suite.sendRaw(ws, failing, {
      attributes: { redrive: 'too-early' },
      deduplicationId: `early-${randomUUID()}`,
    });
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });

    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({
      status: 'FAILED',
      error: {
        reason: 'PATCH_DOES_NOT_APPLY',
        message: expect.stringMatching(/still blocks workspace .*lift the fence first/),
      },
    });
    expect(await suite.ledger().getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: failing.jobId,
    });
  });

  it("runs a FAILED job again only for the operator's redrive, not for a message that carries the attribute", async () => {
    const ws = await suite.newWorkspace();
    const failing = await blockingFailure(ws);
    expect((await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop')).code).toBe(0);

    await forgedRedrive(ws, failing);
    await suite.deliverOnce();
    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({ status: 'FAILED', attempt: 1 });

    const redrive = await suite.cli('dlq', 'redrive', failing.jobId);
    expect({ code: redrive.code, stdout: redrive.stdout }).toEqual({
      code: 0,
      stdout: expect.stringContaining('redriven: 1'),
    });
    await suite.deliverOnce();
    // It ran again (and failed again: its branch is still not what the patch expects).
    expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({
      status: 'FAILED',
      attempt: 2,
      error: { reason: 'PATCH_DOES_NOT_APPLY' },
    });
  });

  describe("a forged DLQ copy under a real job's id", () => {
    /** A message that is no job at all, carrying `jobId` of the job about to fail: INVALID_JOB, on the DLQ ahead of the real copy. */
    async function forgedCopyAhead(ws: HostileWorkspace): Promise<{ failing: HostileMessage }> {
      const failing = applyPatchJob(ws, { diff: NOT_APPLYING });
      await suite.sendRaw(
        ws,
        { jobId: failing.jobId, body: 'not a job' },
        { deduplicationId: `forged-${randomUUID()}` },
      );
      await suite.deliverOnce();
      await suite.sendRaw(ws, failing);
      await suite.deliverOnce();
      expect((await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop')).code).toBe(0);
      return { failing };
    }

    it('is passed over and reported by `dlq redrive <jobId>`, which redrives the real copy', async () => {
      const ws = await suite.newWorkspace();
      const { failing } = await forgedCopyAhead(ws);

      const redrive = await suite.cli('dlq', 'redrive', failing.jobId);

      expect(redrive.code).toBe(0);
      expect(redrive.stdout).toMatch(/^redriven: 1$/m);
      expect(redrive.stdout).toMatch(
        new RegExp(
          `left on agent-jobs DLQ: ${failing.jobId} \\(a copy that is not the job the ledger records: its body is not a job`,
        ),
      );
      await suite.deliverOnce();
      expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({ status: 'FAILED', attempt: 2 });
      // The forged copy waits on the DLQ for the operator, with its reason.
      expect((await suite.peekDlq()).map((m) => m.MessageAttributes?.reason?.StringValue)).toContain('INVALID_JOB');
    });

    it('is passed over and reported by `dlq redrive` of everything', async () => {
      const ws = await suite.newWorkspace();
      const { failing } = await forgedCopyAhead(ws);

      const redrive = await suite.cli('dlq', 'redrive', '--queue', 'agent-jobs', '--json');

      const result = JSON.parse(redrive.stdout) as {
        redriven: { jobId: string }[];
        left: { jobId: string; why: string }[];
      };
      expect(result.redriven.map((r) => r.jobId)).toEqual([failing.jobId]);
      expect(result.left).toEqual([
        {
          queue: 'agent-jobs',
          jobId: failing.jobId,
          why: expect.stringMatching(/^a copy that is not the job the ledger records/),
        },
      ]);
      await suite.deliverOnce();
      expect(await suite.ledger().getJob(failing.jobId)).toMatchObject({ attempt: 2 });
    });

    it("a dismissal removes the job's own copy and leaves a forged one under its id, reported", async () => {
      const ws = await suite.newWorkspace();
      const { failing } = await forgedCopyAhead(ws);

      const dismissed = await suite.cli('dlq', 'dismiss', failing.jobId, '--reason', 'not needed', '--json');

      expect(dismissed.code).toBe(0);
      expect(JSON.parse(dismissed.stdout)).toMatchObject({
        removed: 1,
        left: [{ jobId: failing.jobId, why: expect.stringMatching(/^not this job's copy: its body is not a job/) }],
      });
      expect(
        (await suite.peekDlq())
          .filter((m) => m.MessageAttributes?.jobId?.StringValue === failing.jobId)
          .map((m) => m.MessageAttributes?.reason?.StringValue),
      ).toEqual(['INVALID_JOB']);
    });
  });

  describe('a job settled off the DLQ (dismissed, cancelled) and a copy left of it', () => {
    const dismissal = { by: 'alice', reason: 'dealt with', at: new Date().toISOString() };
    const messagesOf = async (...jobIds: string[]) =>
      (await suite.peekDlq()).filter((m) => jobIds.includes(m.MessageAttributes?.jobId?.StringValue ?? ''));

    it('removes the copy an interrupted dismissal or cancel left: the dismissal run again, the unblock of its workspace', async () => {
      const ws = await suite.newWorkspace();
      const failing = await blockingFailure(ws);
      const skipped = applyPatchJob(ws);
      await suite.sendRaw(ws, skipped);
      await suite.deliverOnce();
      // Each command recorded its change in the ledger, then stopped before it removed the copy.
      expect(await suite.ledger().dismiss({ jobId: failing.jobId, dismissal, now: Date.now() })).toMatchObject({
        kind: 'dismissed',
      });
      expect(await suite.ledger().cancel(skipped.jobId, Date.now())).toMatchObject({
        cancelled: true,
        previous: 'SKIPPED',
      });

      const again = await suite.cli('dlq', 'dismiss', failing.jobId, '--reason', 'retried', '--json');
      const unblocked = await suite.cli('workspace', 'unblock', ws.workspaceId, '--replay', '--json');

      expect(again.code).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({
        alreadyDismissed: true,
        removed: 1,
        dismissed: { by: 'alice', reason: 'dealt with' },
        workspace: { state: 'BLOCKED' },
      });
      expect(JSON.parse(unblocked.stdout)).toMatchObject({
        workspace: { state: 'ACTIVE' },
        jobs: [{ jobId: skipped.jobId, action: 'removed', status: 'CANCELLED' }],
      });
      expect(await messagesOf(failing.jobId, skipped.jobId)).toEqual([]);
      expect(await suite.ledger().getJob(skipped.jobId)).toMatchObject({ status: 'CANCELLED', attempt: 1 });
    });

    it('a cancel run again after an interruption removes the copy its first run left, and still says the job was cancelled already', async () => {
      const ws = await suite.newWorkspace();
      await blockingFailure(ws);
      const skipped = applyPatchJob(ws);
      await suite.sendRaw(ws, skipped);
      await suite.deliverOnce();
      await suite.ledger().cancel(skipped.jobId, Date.now());

      const again = await suite.cli('cancel', skipped.jobId);

      expect([again.code, again.stderr]).toEqual([
        1,
        expect.stringContaining(
          `job ${skipped.jobId} is CANCELLED already; the DLQ copy an interrupted cancel left is removed now`,
        ),
      ]);
      expect(await messagesOf(skipped.jobId)).toEqual([]);
      expect((await suite.cli('cancel', skipped.jobId)).stderr).not.toContain('removed now');
    });
  });
});
