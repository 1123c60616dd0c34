/**
 * Live regions over server-sent events. An open page subscribes to its view (its path and query);
 * one watch per view reads the region again on an interval, whoever watches it, and sends it to
 * each subscriber whose page shows something else (compared by hash), so an unchanged page is left
 * alone: nothing redraws under the operator's cursor unless the ledger changed. A slow read (a
 * large page) spaces the next one by its own duration, so watching never means reading without a
 * pause.
 */
import { createHash } from 'node:crypto';
import type { ServerResponse } from 'node:http';

export const LIVE_EVENT = 'region';

export function regionHash(text: string): string {
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

/**
 * One `event:` of a text/event-stream: every line of the data on a `data:` line of its own. A line
 * ends at CRLF, LF or a bare CR, as an EventSource reads them: data split on LF alone would let a
 * CR in a test's output or a patch end the event and frame one of its own.
 */
export function sseEvent(event: string, data: string): string {
  return `event: ${event}\n${data
    .split(/\r\n|\r|\n/)
    .map((line) => `data: ${line}`)
    .join('\n')}\n\n`;
}

interface Watch {
  readonly render: () => Promise<string>;
  /** Each subscriber with the hash of what its page shows. */
  readonly subscribers: Map<ServerResponse, string>;
  last?: { text: string; hash: string };
  timer?: NodeJS.Timeout;
}

export class LiveViews {
  private readonly watches = new Map<string, Watch>();
  private closed = false;

  constructor(
    private readonly intervalMs: number,
    /** What a subscriber is sent when a read fails (the error in words), until one succeeds. */
    private readonly failure: (error: unknown) => string,
  ) {}

  /** Streams the view to `response` until the client goes away; `shown` is the hash of the region the page has. */
  subscribe(key: string, render: () => Promise<string>, response: ServerResponse, shown: string): void {
    response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      Connection: 'keep-alive',
      'X-Accel-Buffering': 'no',
    });
    response.write(': live\n\n');
    let watch = this.watches.get(key);
    if (!watch) {
      watch = { render, subscribers: new Map() };
      this.watches.set(key, watch);
      this.schedule(key, watch, 0);
    }
    watch.subscribers.set(response, shown);
    if (watch.last) this.send(watch, watch.last);
    response.on('close', () => {
      watch.subscribers.delete(response);
      if (watch.subscribers.size === 0) {
        clearTimeout(watch.timer);
        this.watches.delete(key);
      }
    });
  }

  private schedule(key: string, watch: Watch, delayMs: number): void {
    watch.timer = setTimeout(() => {
      const started = Date.now();
      void watch
        .render()
        .catch((error: unknown) => this.failure(error))
        .then((text) => {
          if (this.closed || this.watches.get(key) !== watch) return;
          watch.last = { text, hash: regionHash(text) };
          this.send(watch, watch.last);
          this.schedule(key, watch, Math.max(this.intervalMs - (Date.now() - started), Date.now() - started));
        });
    }, delayMs);
  }

  private send(watch: Watch, region: { text: string; hash: string }): void {
    for (const [response, shown] of watch.subscribers) {
      if (shown === region.hash) continue;
      response.write(sseEvent(LIVE_EVENT, region.text));
      watch.subscribers.set(response, region.hash);
    }
  }

  /** Ends every stream (the pages' EventSource reconnects to whatever serves the port next). */
  close(): void {
    this.closed = true;
    for (const watch of this.watches.values()) {
      clearTimeout(watch.timer);
      for (const response of watch.subscribers.keys()) response.end();
    }
    this.watches.clear();
  }
}
