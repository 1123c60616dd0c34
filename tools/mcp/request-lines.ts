/**
 * Stdin as whole request lines for the SDK's stdio transport, each at most MAX_REQUEST_LINE_BYTES.
 * The SDK's own buffer refuses more than 10 MiB and then closes the transport, so one oversized
 * call (an inline diff under the 20 MiB diff limit, JSON-escaped) ended the session. Here a line
 * over the limit is dropped as it arrives (only its ends are kept, to find its id) and answered
 * with a JSON-RPC error naming the limit; every other line reaches the transport in one chunk, so
 * its buffer copies a large request once instead of at every chunk.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';

/**
 * The largest request line: a diff at the 20 MiB limit inline, JSON-escaped (a line break takes
 * two bytes), with room for the rest of the call. A diff mostly of characters JSON escapes to six
 * bytes (control characters) may not fit: diffFile carries any diff the limit allows.
 */
export const MAX_REQUEST_LINE_BYTES = 2 * MAX_DIFF_BYTES + 4 * 1024 * 1024;

/** JSON-RPC's code for a request that is not a valid one. */
const INVALID_REQUEST = -32600;
/** How much of an oversized line's ends is kept: its id is there (the SDK's client writes it last). */
const END_BYTES = 256;
const NEWLINE = 0x0a;

export interface OversizedLine {
  readonly bytes: number;
  /** The request's id, when one of the line's ends shows it; null otherwise (as JSON-RPC answers an unreadable request). */
  readonly id: number | string | null;
}

export class RequestLines extends Transform {
  private parts: Buffer[] = [];
  private size = 0;
  /** The line being dropped: its first and last bytes. */
  private dropped?: { head: Buffer; tail: Buffer };

  constructor(
    private readonly maxBytes: number,
    private readonly onOversized: (line: OversizedLine) => void,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    let start = 0;
    for (let end = chunk.indexOf(NEWLINE); end !== -1; end = chunk.indexOf(NEWLINE, start)) {
      this.addPart(chunk.subarray(start, end + 1));
      this.endLine();
      start = end + 1;
    }
    if (start < chunk.length) this.addPart(chunk.subarray(start));
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.size > 0) this.endLine();
    done();
  }

  private addPart(part: Buffer): void {
    this.size += part.length;
    if (this.dropped) {
      this.dropped.tail = lastBytes(Buffer.concat([this.dropped.tail, part]));
      return;
    }
    this.parts.push(part);
    if (this.size <= this.maxBytes) return;
    const line = Buffer.concat(this.parts);
    this.dropped = { head: Buffer.from(line.subarray(0, END_BYTES)), tail: lastBytes(line) };
    this.parts = [];
  }

  private endLine(): void {
    if (this.dropped)
      this.onOversized({ bytes: this.size, id: requestId(this.dropped.tail) ?? requestId(this.dropped.head) ?? null });
    else this.push(Buffer.concat(this.parts));
    this.parts = [];
    this.size = 0;
    this.dropped = undefined;
  }
}

/** The JSON-RPC error that answers an oversized line. */
export function oversizedAnswer(line: OversizedLine, maxBytes: number) {
  const message = `the request is ${line.bytes} bytes, over the ${maxBytes}-byte limit of a request line: it was not read. Send a diff this large as diffFile (a file path the server reads).`;
  return { jsonrpc: '2.0' as const, id: line.id as string | number, error: { code: INVALID_REQUEST, message } };
}

function lastBytes(buffer: Buffer): Buffer {
  return Buffer.from(buffer.subarray(Math.max(0, buffer.length - END_BYTES)));
}

/** The last `"id": <number or string>` in a piece of a request line (a key inside a string value has its quotes escaped). */
function requestId(piece: Buffer): number | string | undefined {
  const found = [...piece.toString('utf8').matchAll(/"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/g)].pop()?.[1];
  return found === undefined ? undefined : (JSON.parse(found) as number | string);
}
