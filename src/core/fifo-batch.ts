/**
 * Batch planning for SQS event sources with ReportBatchItemFailures: one well-tested place that
 * turns per-record verdicts into `batchItemFailures`.
 *
 * FIFO: records are grouped by MessageGroupId; groups run concurrently, the records of a group
 * strictly in order; the first failure in a group fails it and every later record of that group
 * without running them (SQS redelivers them in order). Other groups are unaffected.
 *
 * Why not Powertools' SqsFifoPartialProcessor: it walks the batch sequentially (even with
 * skipGroupOnError), so one slow workspace (a large patch) would hold every other workspace of the
 * batch behind it. Groups are independent by construction, so we run them side by side.
 */
import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';

/** Processes one record; resolves true when it may be acknowledged (deleted), false to retry it. */
export type RecordProcessor = (record: SQSRecord) => Promise<boolean>;

/** Records grouped by MessageGroupId, groups in order of first appearance, records in batch order. */
export function groupRecords(records: readonly SQSRecord[]): SQSRecord[][] {
  const groups = new Map<string, SQSRecord[]>();
  for (const record of records) {
    const id = record.attributes.MessageGroupId ?? '';
    const group = groups.get(id);
    if (group) group.push(record);
    else groups.set(id, [record]);
  }
  return [...groups.values()];
}

async function settle(process: RecordProcessor, record: SQSRecord): Promise<boolean> {
  // A processor should classify its own errors; an escaped one still only fails its record.
  try {
    return await process(record);
  } catch {
    return false;
  }
}

/**
 * Called for each record cut from its group without running. Its visibility timeout is still the
 * queue's (minutes), and SQS keeps the whole group locked while it is in flight, so without a
 * release the failed head's back-off would never be the real delay.
 */
export type ReleaseRecord = (record: SQSRecord) => Promise<void>;

async function runGroup(
  group: readonly SQSRecord[],
  process: RecordProcessor,
  release: ReleaseRecord | undefined,
): Promise<string[]> {
  for (const [index, record] of group.entries()) {
    if (await settle(process, record)) continue;
    const cut = group.slice(index + 1);
    // Best effort: a record not released only waits for its visibility timeout.
    if (release) await Promise.all(cut.map((r) => release(r).catch(() => undefined)));
    return [record, ...cut].map((r) => r.messageId);
  }
  return [];
}

export async function processFifoBatch(
  records: readonly SQSRecord[],
  process: RecordProcessor,
  release?: ReleaseRecord,
): Promise<SQSBatchResponse> {
  const failedIds = new Set(
    (await Promise.all(groupRecords(records).map((group) => runGroup(group, process, release)))).flat(),
  );
  // Reported in batch order, as AWS lists them.
  return {
    batchItemFailures: records.filter((r) => failedIds.has(r.messageId)).map((r) => ({ itemIdentifier: r.messageId })),
  };
}

/** Standard queues: records are independent; at most `concurrency` run at once. */
export async function processStandardBatch(
  records: readonly SQSRecord[],
  process: RecordProcessor,
  concurrency = 5,
): Promise<SQSBatchResponse> {
  const ok: boolean[] = new Array<boolean>(records.length).fill(false);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < records.length; i = next++) ok[i] = await settle(process, records[i] as SQSRecord);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, records.length)) }, worker));
  return { batchItemFailures: records.filter((_, i) => !ok[i]).map((r) => ({ itemIdentifier: r.messageId })) };
}
