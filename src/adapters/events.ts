/**
 * EventPublisher implementations: EventBridge on AWS, an append-only JSON-lines file locally (the
 * local platform's live view and the CLI read it back). Callers pass ids and outcomes in `detail`,
 * never payloads: diffs can hold secrets.
 */
import { appendFile, mkdir, open } from 'node:fs/promises';
import * as path from 'node:path';
import { PutEventsCommand, type EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { EVENT_SOURCE, type EventType } from '../../contract/runtime-env';
import { TransientJobError } from '../core/errors';
import type { EventPublisher } from '../core/ports';

export class EventBridgePublisher implements EventPublisher {
  constructor(
    private readonly client: EventBridgeClient,
    private readonly busName: string,
  ) {}

  async publish(type: EventType, detail: Record<string, unknown>): Promise<void> {
    const response = await this.client.send(
      new PutEventsCommand({
        Entries: [
          { EventBusName: this.busName, Source: EVENT_SOURCE, DetailType: type, Detail: JSON.stringify(detail) },
        ],
      }),
    );
    // PutEvents reports per-entry failures in a 200 response; they are worth a retry.
    if (response.FailedEntryCount) {
      const entry = response.Entries?.[0];
      throw new TransientJobError(
        `PutEvents rejected ${type} on ${this.busName}: ${entry?.ErrorCode ?? 'unknown'} ${entry?.ErrorMessage ?? ''}`.trim(),
      );
    }
  }
}

/** One line of the local event log. */
export interface LoggedEvent {
  /** ISO-8601 time the event was written. */
  readonly time: string;
  readonly source: string;
  readonly type: EventType;
  readonly detail: Record<string, unknown>;
}

/**
 * The local event bus: one JSON line per event, appended in publish order. Readers in other
 * processes follow it with readFrom(offset), which returns only complete lines.
 */
export class JsonlEventLog implements EventPublisher {
  private tail: Promise<void> = Promise.resolve();
  private ready: Promise<unknown> | undefined;

  constructor(readonly file: string) {}

  publish(type: EventType, detail: Record<string, unknown>): Promise<void> {
    const event: LoggedEvent = { time: new Date().toISOString(), source: EVENT_SOURCE, type, detail };
    const line = `${JSON.stringify(event)}\n`;
    this.ready ??= mkdir(path.dirname(this.file), { recursive: true });
    // Chained so concurrent publishers append whole lines in call order.
    const write = this.tail.then(() => this.ready).then(() => appendFile(this.file, line));
    this.tail = write.catch(() => undefined);
    return write;
  }

  /** Events from byte `offset` on, and the offset to read from next. A missing file is empty. */
  async readFrom(offset = 0): Promise<{ events: LoggedEvent[]; nextOffset: number }> {
    const handle = await open(this.file, 'r').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (!handle) return { events: [], nextOffset: offset };
    try {
      const { size } = await handle.stat();
      if (size <= offset) return { events: [], nextOffset: offset };
      const buffer = Buffer.alloc(size - offset);
      await handle.read(buffer, 0, buffer.length, offset);
      // A line still being written has no newline yet: leave it for the next read.
      const complete = buffer.subarray(0, buffer.lastIndexOf(0x0a) + 1);
      const events = complete
        .toString('utf8')
        .split('\n')
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as LoggedEvent);
      return { events, nextOffset: offset + complete.length };
    } finally {
      await handle.close();
    }
  }
}
