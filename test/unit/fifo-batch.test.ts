import type { SQSRecord } from 'aws-lambda';
import { groupRecords, processFifoBatch, processStandardBatch } from '../../src/core/fifo-batch';
import { sqsRecordFactory } from '../support/sqs-records';

const rec = (id: string, group?: string): SQSRecord =>
  sqsRecordFactory(`body-${id}`, { messageId: id, messageGroupId: group });
const ids = (response: { batchItemFailures: { itemIdentifier: string }[] }) =>
  response.batchItemFailures.map((f) => f.itemIdentifier);

/** A promise resolved from outside: lets a test order events without timers. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('groupRecords', () => {
  it('keeps batch order inside each group and groups in order of first appearance', () => {
    const groups = groupRecords([rec('a1', 'A'), rec('b1', 'B'), rec('a2', 'A'), rec('b2', 'B'), rec('c1', 'C')]);
    expect(groups.map((g) => g.map((r) => r.messageId))).toEqual([['a1', 'a2'], ['b1', 'b2'], ['c1']]);
  });
});

describe('processFifoBatch', () => {
  it('runs the records of a group strictly in order', async () => {
    const seen: string[] = [];
    const response = await processFifoBatch([rec('a1', 'A'), rec('a2', 'A'), rec('a3', 'A')], async (r) => {
      seen.push(`start ${r.messageId}`);
      await Promise.resolve();
      seen.push(`end ${r.messageId}`);
      return true;
    });
    expect(seen).toEqual(['start a1', 'end a1', 'start a2', 'end a2', 'start a3', 'end a3']);
    expect(ids(response)).toEqual([]);
  });

  it('runs groups concurrently: a group waits for another one without deadlock', async () => {
    // a1 can only finish after b1 ran: a sequential planner would never get there.
    const b1Ran = deferred();
    const response = await processFifoBatch([rec('a1', 'A'), rec('b1', 'B')], async (r) => {
      if (r.messageId === 'a1') await b1Ran.promise;
      else b1Ran.resolve();
      return true;
    });
    expect(ids(response)).toEqual([]);
  });

  it('fails a record and every later record of its group without running them; other groups go on', async () => {
    const ran: string[] = [];
    const released: string[] = [];
    const batch = [rec('a1', 'A'), rec('b1', 'B'), rec('a2', 'A'), rec('b2', 'B'), rec('a3', 'A')];
    const response = await processFifoBatch(
      batch,
      async (r) => {
        ran.push(r.messageId);
        return r.messageId !== 'a2';
      },
      async (r) => {
        released.push(r.messageId);
      },
    );
    expect(ran.sort()).toEqual(['a1', 'a2', 'b1', 'b2']);
    expect(ids(response)).toEqual(['a2', 'a3']);
    expect(released).toEqual(['a3']);
  });

  it('treats a processor that throws as a failed record, and a release that throws as harmless', async () => {
    const response = await processFifoBatch(
      [rec('a1', 'A'), rec('a2', 'A'), rec('b1', 'B')],
      async (r) => {
        if (r.messageId === 'a1') throw new Error('escaped');
        return true;
      },
      async () => {
        throw new Error('release failed');
      },
    );
    expect(ids(response)).toEqual(['a1', 'a2']);
  });
});

describe('processStandardBatch', () => {
  it('runs records independently and reports only the failures', async () => {
    const response = await processStandardBatch([rec('1'), rec('2'), rec('3')], async (r) => r.messageId !== '2');
    expect(ids(response)).toEqual(['2']);
  });

  it('never runs more than the concurrency bound at once, and runs every record', async () => {
    let running = 0;
    let peak = 0;
    const ran: string[] = [];
    const records = Array.from({ length: 7 }, (_, i) => rec(String(i)));
    await processStandardBatch(
      records,
      async (r) => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((resolve) => setImmediate(resolve));
        running--;
        ran.push(r.messageId);
        return true;
      },
      3,
    );
    expect(peak).toBe(3);
    expect(ran.sort()).toEqual(records.map((r) => r.messageId).sort());
  });
});
