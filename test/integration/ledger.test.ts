/**
 * The DynamoDB ledger against the emulator of the lane (dynalite in `npm test`, AWS's DynamoDB
 * Local in `npm run test:dynamodb-local`): the ledger contract (test/support/ledger-contract.ts, the
 * same cases the in-memory ledger passes), i.e. the conditional writes and what a refused condition
 * means, under real concurrency; and what a refusal costs. Races right after a refused write are
 * staged with SDK middleware on a client of the test's own.
 */
import { DynamoDBClient, InternalServerError } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { DynamoDbLedger } from '../../src/adapters/dynamodb-ledger';
import { jobDigest } from '../../src/core/envelope';
import { LeaseLostError } from '../../src/core/errors';
import { dynamoDbEmulatorOf, localClientConfig } from '../../tools/local/emulators';
import { withEmulators } from '../support/emulators';
import { LEDGER_TABLE } from '../../contract/topology';
import { claimOf, describeLedgerContract, newJob, runningJob, type RefusedClaimSees } from '../support/ledger-contract';

/** dynalite accepts ReturnValuesOnConditionCheckFailure and returns no item; DynamoDB Local returns it, as DynamoDB does. */
const REFUSAL_CARRIES_ITEM = dynamoDbEmulatorOf() !== 'dynalite';
const REFUSED_CLAIM_SEES: RefusedClaimSees = REFUSAL_CARRIES_ITEM ? 'the refused item' : 'a read after the refusal';

describe('DynamoDbLedger', () => {
  const emulators = withEmulators();
  let client: DynamoDBDocumentClient | undefined;

  afterAll(() => client?.destroy());

  describeLedgerContract(`DynamoDbLedger on ${dynamoDbEmulatorOf()}`, REFUSED_CLAIM_SEES, () => {
    const base = new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb));
    client = DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
    let between: (() => Promise<void>) | undefined;
    // Runs the staged race once, right after the next refused conditional write reaches the adapter.
    client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          const race = between;
          if (race && (error as Error).name === 'ConditionalCheckFailedException') {
            between = undefined;
            await race();
          }
          throw error;
        }
      },
      { step: 'initialize', name: 'stagedRace' },
    );
    return {
      ledger: new DynamoDbLedger({ client, tableName: emulators().tableName, retentionDays: 30 }),
      onNextRefusedClaim: (race) => {
        between = race;
      },
    };
  });

  // Seen in a chaos run: the emulator, killed between writing an index entry and its item, kept an
  // entry of a write the record never got, and the reconciler reported from it every run. On AWS a
  // global secondary index is eventually consistent: an entry may lag the record the same way.
  it('lists a due job as its record stands, never from an index entry the record no longer matches', async () => {
    const reading = DynamoDBDocumentClient.from(new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb)));
    let staleEntries: Record<string, unknown>[] = [];
    reading.middlewareStack.add(
      (next) => async (args) => {
        const output = await next(args);
        const query = args.input as { IndexName?: string };
        const result = output.output as { Items?: Record<string, unknown>[] };
        if (query.IndexName === LEDGER_TABLE.dueIndex.name) result.Items = [...staleEntries, ...(result.Items ?? [])];
        return output;
      },
      { step: 'initialize', name: 'staleDueIndex' },
    );
    try {
      const ledger = new DynamoDbLedger({ client: reading, tableName: emulators().tableName, retentionDays: 30 });
      const dueAt = Date.now() - 1_000;
      const job = await runningJob(ledger, 'b-stale', dueAt);
      const [entry] = (await ledger.listDue(dueAt, 100)).filter((r) => r.jobId === job.jobId);
      expect(entry).toMatchObject({ status: 'RUNNING' });
      await ledger.finishBuild({
        jobId: job.jobId,
        buildId: 'b-stale',
        verdict: { status: 'SUCCEEDED', result: { verdict: 'passed' } },
        now: dueAt,
        reportBy: dueAt,
      });
      await ledger.markReported({ jobId: job.jobId, buildId: 'b-stale', now: dueAt });
      staleEntries = [{ ...entry, pk: `job#${job.jobId}`, dueKey: 'due' }];

      const due = await ledger.listDue(Date.now(), 100);

      expect(due.filter((r) => r.jobId === job.jobId)).toEqual([]);
    } finally {
      reading.destroy();
    }
  });

  // What a refusal costs. DynamoDB returns the item a condition refused (ALL_OLD), so the adapter
  // needs no read to say why; only where the answer lacks it (dynalite) does it read the item.
  describe('a refused conditional write', () => {
    const reads = new Set(['GetItemCommand', 'BatchGetItemCommand', 'QueryCommand', 'ScanCommand']);
    const writes = new Set(['PutItemCommand', 'UpdateItemCommand']);
    let counted: { ledger: DynamoDbLedger; requests: { reads: number; writes: number }; destroy(): void } | undefined;

    /** A ledger whose DynamoDB requests are counted as they leave, below the document client. */
    function countedLedger() {
      const base = new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb));
      const requests = { reads: 0, writes: 0 };
      base.middlewareStack.add(
        (next, context) => async (args) => {
          if (reads.has(context.commandName ?? '')) requests.reads++;
          if (writes.has(context.commandName ?? '')) requests.writes++;
          return next(args);
        },
        { step: 'initialize', name: 'countRequests' },
      );
      const client = DynamoDBDocumentClient.from(base, { marshallOptions: { removeUndefinedValues: true } });
      return {
        ledger: new DynamoDbLedger({ client, tableName: emulators().tableName, retentionDays: 30 }),
        requests,
        destroy: () => client.destroy(),
      };
    }

    beforeAll(() => {
      counted = countedLedger();
    });
    afterAll(() => counted?.destroy());

    /** Runs `act` on the counted ledger after `prepare` (uncounted) and returns its result and requests. */
    async function costOf<T>(
      prepare: (ledger: DynamoDbLedger) => Promise<unknown>,
      act: (ledger: DynamoDbLedger) => Promise<T>,
    ) {
      const { ledger, requests } = counted!;
      await prepare(ledger);
      requests.reads = requests.writes = 0;
      const result = await act(ledger);
      return { result, requests: { ...requests } };
    }

    const readAfterRefusal = REFUSAL_CARRIES_ITEM ? 0 : 1;

    /** A fresh job, claimed and SUCCEEDED. */
    async function succeeded(ledger: DynamoDbLedger) {
      const job = newJob();
      const claim = claimOf(job, { now: Date.now() });
      await ledger.claim(claim);
      await ledger.complete({
        jobId: job.jobId,
        owner: claim.owner,
        now: Date.now(),
        verdict: { status: 'SUCCEEDED', result: { done: true } },
      });
      return job;
    }

    it(`answers a duplicate after success with 1 write and ${readAfterRefusal} reads`, async () => {
      let job = newJob();
      const { result, requests } = await costOf(
        async (ledger) => (job = await succeeded(ledger)),
        (ledger) => ledger.claim(claimOf(job, { now: Date.now() })),
      );
      expect(result).toMatchObject({ kind: 'duplicate', record: { result: { done: true } } });
      expect(requests).toEqual({ writes: 1, reads: readAfterRefusal });
    });

    it(`answers a duplicate in flight with 1 write and ${readAfterRefusal} reads`, async () => {
      const job = newJob();
      const first = claimOf(job, { now: Date.now() });
      const { result, requests } = await costOf(
        (ledger) => ledger.claim(first),
        (ledger) => ledger.claim(claimOf(job, { now: Date.now() })),
      );
      expect(result).toMatchObject({ kind: 'busy', record: { leaseOwner: first.owner } });
      expect(requests).toEqual({ writes: 1, reads: readAfterRefusal });
    });

    it(`answers a conflict with 1 write and ${readAfterRefusal} reads`, async () => {
      let job = newJob();
      const reused = () =>
        claimOf({ ...job, payload: { command: 'something else' } } as typeof job, { now: Date.now() });
      const { result, requests } = await costOf(
        async (ledger) => (job = await succeeded(ledger)),
        (ledger) => ledger.claim(reused()),
      );
      expect(result).toMatchObject({ kind: 'conflict', record: { digest: jobDigest(job) } });
      expect(requests).toEqual({ writes: 1, reads: readAfterRefusal });
    });

    it('explains every other refusal it looks into from the item the refusal carries: a known job, a lost lease, a refused verdict, a held cursor, a refused cancel', async () => {
      let job = newJob();
      const known = await costOf(
        async (ledger) => (job = await succeeded(ledger)),
        (ledger) => ledger.recordQueued({ job, digest: jobDigest(job), now: Date.now() }),
      );
      expect(known.result).toMatchObject({ kind: 'known', record: { status: 'SUCCEEDED' } });
      expect(known.requests).toEqual({ writes: 1, reads: readAfterRefusal });

      const late = { status: 'FAILED', error: { reason: 'TEST_RUN_ERROR', message: 'late' } } as const;
      const lost = await costOf(
        async () => undefined,
        (ledger) =>
          ledger
            .complete({ jobId: job.jobId, owner: 'someone-else', now: Date.now(), verdict: late })
            .catch((error: unknown) => error),
      );
      expect(lost.result).toBeInstanceOf(LeaseLostError);
      expect(lost.requests).toEqual({ writes: 1, reads: readAfterRefusal });

      let running = newJob();
      const verdict = await costOf(
        async (ledger) => (running = await runningJob(ledger, 'b-counted', Date.now() + 60_000)),
        (ledger) =>
          ledger.finishBuild({
            jobId: running.jobId,
            buildId: 'b-other',
            verdict: { status: 'SUCCEEDED', result: {} },
            now: Date.now(),
            reportBy: Date.now(),
          }),
      );
      expect(verdict.result).toMatchObject({
        kind: 'refused',
        record: { status: 'RUNNING', progress: { buildId: 'b-counted' } },
      });
      expect(verdict.requests).toEqual({ writes: 1, reads: readAfterRefusal });

      const workspaceId = `ws-${job.jobId}`;
      const cursor = await costOf(
        (ledger) => ledger.takeWorkspace({ workspaceId, jobId: 'job-a', now: Date.now() }),
        (ledger) => ledger.takeWorkspace({ workspaceId, jobId: 'job-b', now: Date.now() }),
      );
      expect(cursor.result).toMatchObject({ kind: 'predecessorUnfinished', predecessor: 'job-a' });
      expect(cursor.requests).toEqual({ writes: 1, reads: readAfterRefusal });

      // One conditional write (a QUEUED job's); the record it was refused on says no other cancel applies (cancelRule).
      const cancel = await costOf(
        async () => undefined,
        (ledger) => ledger.cancel(job.jobId, Date.now()),
      );
      expect(cancel.result).toMatchObject({ cancelled: false, record: { status: 'SUCCEEDED' } });
      expect(cancel.requests).toEqual({ writes: 1, reads: readAfterRefusal });
    });
  });

  describe('a claim whose write applied but whose answer was lost', () => {
    const lossyClients: DynamoDBDocumentClient[] = [];
    afterAll(() => lossyClients.forEach((c) => c.destroy()));

    /** A client that answers the next write with a 500 after DynamoDB applied it, inside or outside the SDK's retries. */
    function losingClient(where: 'retried' | 'seen'): { ledger: DynamoDbLedger; loseNextAnswer(): void } {
      const lossy = DynamoDBDocumentClient.from(new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb)));
      let lose = false;
      const afterWrite = (command: string | undefined) => {
        if (!lose || command !== 'UpdateItemCommand') return;
        lose = false;
        throw new InternalServerError({ message: 'answer lost', $metadata: { httpStatusCode: 500 } });
      };
      // Below the SDK's retry middleware the SDK retries the 500; at initialize the caller sees it.
      if (where === 'retried') {
        lossy.middlewareStack.add(
          (next, context) => async (args) => {
            const output = await next(args);
            afterWrite(context.commandName);
            return output;
          },
          { step: 'finalizeRequest', priority: 'low', name: 'loseAnswer' },
        );
      } else {
        lossy.middlewareStack.add(
          (next, context) => async (args) => {
            const output = await next(args);
            afterWrite(context.commandName);
            return output;
          },
          { step: 'initialize', name: 'loseAnswer' },
        );
      }
      lossyClients.push(lossy);
      return {
        ledger: new DynamoDbLedger({ client: lossy, tableName: emulators().tableName, retentionDays: 30 }),
        loseNextAnswer: () => (lose = true),
      };
    }

    it.each(['retried', 'seen'] as const)(
      "is the caller's claim, not a lease held by someone else (500 %s)",
      async (where) => {
        const { ledger, loseNextAnswer } = losingClient(where);
        const job = newJob();
        const claim = claimOf(job, { now: Date.now() });
        loseNextAnswer();

        const outcome = await ledger.claim(claim);

        expect(outcome).toMatchObject({ kind: 'claimed', record: { leaseOwner: claim.owner, attempt: 1 } });
        expect(await ledger.claim(claimOf(job, { now: Date.now() }))).toMatchObject({ kind: 'busy' });
      },
    );

    // Seen in a chaos run: the completion applied, the SDK's retry of it met the job no longer
    // IN_FLIGHT and the worker took its own write for a takeover, so it never announced the outcome.
    it.each(['retried', 'seen'] as const)(
      'completes the job for its caller when the completion applied with its answer lost (500 %s)',
      async (where) => {
        const { ledger, loseNextAnswer } = losingClient(where);
        const claim = claimOf(newJob(), { now: Date.now() });
        await ledger.claim(claim);
        loseNextAnswer();

        const done = await ledger.complete({
          jobId: claim.job.jobId,
          owner: claim.owner,
          now: Date.now(),
          verdict: { status: 'SUCCEEDED', result: { prUrl: 'https://example.invalid/pr/1' } },
        });

        expect(done).toMatchObject({
          status: 'SUCCEEDED',
          result: { prUrl: 'https://example.invalid/pr/1' },
          attempt: 1,
        });
      },
    );

    // Seen in a chaos run: the verdict's write applied, its answer was lost, and the redelivered
    // completion found the job no longer RUNNING: nobody reported it until the reconciler's grace.
    it.each(['retried', 'seen'] as const)(
      "finishes the build for its caller when the verdict's write applied with its answer lost (500 %s)",
      async (where) => {
        const { ledger, loseNextAnswer } = losingClient(where);
        const job = await runningJob(ledger, 'b-lost-answer', Date.now() + 60_000);
        loseNextAnswer();

        const outcome = await ledger.finishBuild({
          jobId: job.jobId,
          buildId: 'b-lost-answer',
          verdict: { status: 'SUCCEEDED', result: { verdict: 'passed' } },
          now: Date.now(),
          reportBy: Date.now() + 300_000,
        });

        expect(outcome).toMatchObject({
          kind: 'finished',
          record: { status: 'SUCCEEDED', result: { verdict: 'passed' } },
        });
        expect(
          await ledger.finishBuild({
            jobId: job.jobId,
            buildId: 'b-lost-answer',
            verdict: { status: 'SUCCEEDED', result: { verdict: 'passed' } },
            now: Date.now() + 1,
            reportBy: Date.now(),
          }),
        ).toMatchObject({ kind: 'refused' });
      },
    );

    it('still refuses a completion by a worker whose lease was taken over', async () => {
      const { ledger, loseNextAnswer } = losingClient('seen');
      const job = newJob();
      const first = claimOf(job, { now: Date.now() - 10 * 60_000 });
      await ledger.claim(first);
      const second = claimOf(job, { now: Date.now() });
      await ledger.claim(second);
      await ledger.complete({
        jobId: job.jobId,
        owner: second.owner,
        now: Date.now(),
        verdict: { status: 'SUCCEEDED', result: {} },
      });
      loseNextAnswer();

      await expect(
        ledger.complete({
          jobId: job.jobId,
          owner: first.owner,
          now: Date.now(),
          verdict: { status: 'SUCCEEDED', result: {} },
        }),
      ).rejects.toThrow(/taken over before completion/);
    });
  });

  it("pages a workspace's jobs whose records pass DynamoDB's 1 MB per query: the page is whole", async () => {
    const ledger = new DynamoDbLedger({
      client: DynamoDBDocumentClient.from(new DynamoDBClient(localClientConfig(emulators().endpoints.dynamodb))),
      tableName: emulators().tableName,
      retentionDays: 30,
    });
    const workspaceId = `ws-big-${Date.now()}`;
    // 130 records of about 10 KiB (a test result keeps 8 KiB of its log): a page of 120 passes 1 MB.
    const logTail = 'x'.repeat(10 * 1024);
    const jobs = Array.from({ length: 130 }, () => newJob({ workspaceId }));
    for (const [index, job] of jobs.entries()) {
      const claim = claimOf(job);
      await ledger.claim(claim);
      await ledger.complete({
        jobId: job.jobId,
        owner: claim.owner,
        now: claim.now,
        verdict: { status: 'SUCCEEDED', result: { verdict: 'passed', logTail } },
        workspace: { workspaceId, seq: index + 1 },
      });
    }
    const page = await ledger.pageWorkspaceJobs(workspaceId, { order: 'oldest', limit: 120 });
    expect(page.jobs.map((j) => j.jobId)).toEqual(jobs.slice(0, 120).map((j) => j.jobId));
    expect(page.more).toBe(true);
  });
});
