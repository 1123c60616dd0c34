/**
 * What waits on the local DLQs survives a restart, `kill -9` included. fauxqs keeps its queues in
 * memory (1.9.2, the last version for Node 20, has no store of its own), so the platform saves
 * every message it sends to a DLQ in the state directory (`dlq-copies/`) before sending it, and at
 * start puts back the copy of every job the ledger lists as waiting on a DLQ.
 *
 * The ledger stays the one source of truth of what waits there (its `dlq` list: FAILED and
 * SKIPPED jobs); these files only hold the message bodies it does not keep. So a copy whose job
 * was replayed, redriven, dropped or cancelled since is never put back, whatever the files say,
 * and needs no bookkeeping when the CLI (another process) deletes or moves DLQ messages. Each file
 * is written whole before its message exists (write aside, then rename): a platform killed after
 * the send finds it at the next start. Decisions §32 says why not a snapshot of fauxqs' state.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { SendMessageCommand, type SendMessageCommandInput, type SQSClient } from '@aws-sdk/client-sqs';
import { stringAttributes } from '../../contract/messages';
import { queueTopology } from '../../contract/topology';
import { dlqQueueOf, waitsOnDlq } from '../../src/core/ledger';
import type { JobRecord, Ledger } from '../../src/core/ports';
import { copyMismatch } from '../operator/dlq-messages';
import { DLQ_COPIES_DIR } from './state-dir';
import { writeFileAtomic } from './write-atomic';

/** One message the platform sent to the DLQ of `queue` (a topology base name). */
export interface DlqCopy {
  readonly queue: string;
  readonly jobId: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, string>>;
  readonly groupId?: string;
}

/** The saved copies of one state directory: one file per queue, job and body (a refused request reusing a job id is another body). */
export class DlqCopyStore {
  readonly dir: string;

  constructor(stateDir: string) {
    this.dir = path.join(stateDir, DLQ_COPIES_DIR);
  }

  async save(copy: DlqCopy): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await writeFileAtomic(
      path.join(this.dir, `${jobPrefix(copy.queue, copy.jobId)}-${sha256(copy.body).slice(0, 16)}.json`),
      JSON.stringify(copy),
    );
  }

  /** The saved copies of a job on the DLQ of `queue`, any body. */
  async copiesOf(queue: string, jobId: string): Promise<{ file: string; copy: DlqCopy }[]> {
    const prefix = `${jobPrefix(queue, jobId)}-`;
    const names = (await this.names()).filter((name) => name.startsWith(prefix));
    const read = await Promise.all(
      names.map(async (name) => ({
        file: name,
        copy: parseCopy(await readFile(path.join(this.dir, name), 'utf8').catch(() => '')),
      })),
    );
    return read.flatMap((r) => (r.copy ? [{ file: r.file, copy: r.copy }] : []));
  }

  /** The saved copy that is `record`'s own message (copyMismatch: its body, request digest and pin). */
  async matching(record: JobRecord): Promise<{ file: string; copy: DlqCopy } | undefined> {
    const queue = dlqQueueOf(record);
    const copies = await this.copiesOf(queue, record.jobId);
    return copies.find(
      ({ copy }) =>
        copyMismatch(
          { fifo: isFifo(queue) },
          { ...copy, queue, messageId: '', receiptHandle: '', receiveCount: 0 },
          record,
        ) === undefined,
    );
  }

  /** Removes every file but `keep` (names), a write a crash cut short included. */
  async keepOnly(keep: ReadonlySet<string>): Promise<void> {
    for (const name of await this.entries()) if (!keep.has(name)) await rm(path.join(this.dir, name), { force: true });
  }

  private async names(): Promise<string[]> {
    return (await this.entries()).filter((name) => name.endsWith('.json'));
  }

  private async entries(): Promise<string[]> {
    try {
      return await readdir(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }
}

/** Whether the queue `name` (a topology base name) is the FIFO one: its DLQ needs a group and a dedup id. */
function isFifo(name: string): boolean {
  return queueTopology().find((q) => q.name === name)?.fifo ?? false;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** Job ids are restricted, but a file name derived from a hash needs no trust in that. */
function jobPrefix(queue: string, jobId: string): string {
  return sha256(`${queue}\n${jobId}`).slice(0, 32);
}

function parseCopy(text: string): DlqCopy | undefined {
  try {
    const value = JSON.parse(text) as Partial<DlqCopy>;
    return typeof value.queue === 'string' &&
      typeof value.jobId === 'string' &&
      typeof value.body === 'string' &&
      typeof value.attributes === 'object'
      ? (value as DlqCopy)
      : undefined;
  } catch {
    return undefined; // a file that is not a copy restores nothing; keepOnly removes it
  }
}

/**
 * Saves every SendMessage to one of `dlqUrls` (by queue base name) before it goes out: SDK
 * middleware on the platform's SQS client, so every worker's DLQ move (the pipeline's, the build
 * completion's) is covered by one registration. A message without a `jobId` attribute names no
 * job the ledger could list, and is not saved.
 */
export function saveDlqSends(sqs: SQSClient, dlqUrls: Readonly<Record<string, string>>, store: DlqCopyStore): void {
  const queueOfDlq = new Map(Object.entries(dlqUrls).map(([queue, url]) => [url, queue]));
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as Partial<SendMessageCommandInput>;
      const queue =
        context.commandName === 'SendMessageCommand' && input.QueueUrl !== undefined
          ? queueOfDlq.get(input.QueueUrl)
          : undefined;
      const jobId = input.MessageAttributes?.jobId?.StringValue;
      if (queue !== undefined && jobId !== undefined && input.MessageBody !== undefined) {
        const attributes = Object.fromEntries(
          Object.entries(input.MessageAttributes ?? {}).flatMap(([k, v]) =>
            v.StringValue === undefined ? [] : [[k, v.StringValue]],
          ),
        );
        await store.save({
          queue,
          jobId,
          body: input.MessageBody,
          attributes,
          ...(input.MessageGroupId !== undefined && { groupId: input.MessageGroupId }),
        });
      }
      return next(args);
    },
    { step: 'initialize', name: 'saveDlqSends' },
  );
}

export interface RestoredDlqs {
  /** Jobs put back on their DLQ. */
  readonly restored: number;
  /** Jobs the ledger lists on a DLQ with no saved copy: nothing can replay them (`unfinished` lists the skipped ones). */
  readonly missing: readonly JobRecord[];
}

/**
 * At start, before any worker runs and while the DLQs are empty: puts back, in the ledger's
 * order (oldest first, so each FIFO group keeps its order), the saved copy of every FAILED or
 * SKIPPED job the ledger lists on a DLQ, and forgets every other file. Refused requests that
 * reused a job id are listed by the ledger but not put back: they were refused, and `dlq show`
 * keeps them from the ledger.
 */
export async function restoreDlqCopies(input: {
  readonly ledger: Pick<Ledger, 'listDlq'>;
  readonly sqs: SQSClient;
  readonly dlqUrls: Readonly<Record<string, string>>;
  readonly store: DlqCopyStore;
  readonly now: number;
}): Promise<RestoredDlqs> {
  const waiting = (await input.ledger.listDlq()).flatMap((entry) =>
    entry.kind === 'job' && waitsOnDlq(entry.record) ? [entry.record] : [],
  );
  const kept = new Set<string>();
  const missing: JobRecord[] = [];
  for (const record of waiting) {
    const found = await input.store.matching(record);
    const dlqUrl = input.dlqUrls[dlqQueueOf(record)];
    if (found === undefined || dlqUrl === undefined) {
      missing.push(record);
      continue;
    }
    await input.sqs.send(
      new SendMessageCommand({
        QueueUrl: dlqUrl,
        MessageBody: found.copy.body,
        MessageAttributes: stringAttributes(found.copy.attributes),
        ...(found.copy.groupId !== undefined && { MessageGroupId: found.copy.groupId }),
        // One send per job and start: a fresh id, so no window of the last run's sends can swallow it.
        ...(isFifo(found.copy.queue) && { MessageDeduplicationId: sha256(`${record.jobId}:restore:${input.now}`) }),
      }),
    );
    kept.add(found.file);
  }
  await input.store.keepOnly(kept);
  return { restored: kept.size, missing };
}
