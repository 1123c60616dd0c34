/**
 * What isomorphic-git uses of pako (`inflate`, `deflate` and the streaming `Inflate` it reads
 * fetched packs with), over Node's own zlib. Bundles take it in place of pako (ESM_ALIASES in
 * lib/constructs/worker.ts): pako is 45 KiB of JavaScript reimplementing what the runtime has
 * natively, and native inflate is also what makes reading objects from a pack cheap.
 *
 * isomorphic-git's pack reader pushes chunks to an `Inflate` until `result` is set, then reads
 * `strm.avail_in` to find where the object's deflated data ended inside the last chunk. zlib's
 * one-shot inflate stops at the end of the stream and reports the input it consumed, which gives
 * both; a stream that is still incomplete is retried with the next chunk appended. That retry
 * costs the bytes received so far each time, so many small chunks would make it quadratic; the
 * pack reader (GitPackIndex.fromPack) hands over the whole fetched pack as one chunk, so each
 * object is inflated once.
 */
import { constants, deflateSync, inflateSync } from 'node:zlib';

/** zlib's one-shot inflate of the first deflate stream in `input` and the bytes of input it took. */
function inflateFirst(input: Uint8Array): { output: Buffer; consumed: number } {
  const { buffer, engine } = inflateSync(input, { info: true }) as unknown as {
    buffer: Buffer;
    engine: { bytesWritten: number };
  };
  return { output: buffer, consumed: engine.bytesWritten };
}

export class Inflate {
  /** The inflated object once its stream ended; unset while more input is needed. */
  result: Buffer | undefined = undefined;
  /** Non-zero after a zlib error (pako's contract), with `msg` saying which. */
  err = 0;
  msg = '';
  /** Bytes of the last chunk pushed that lie after the end of the stream. */
  readonly strm = { avail_in: 0 };
  private readonly pending: Buffer[] = [];

  push(chunk: Uint8Array, _last?: boolean): boolean {
    if (this.result !== undefined || this.err !== 0) return false;
    this.pending.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    const input = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending);
    try {
      const { output, consumed } = inflateFirst(input);
      this.result = output;
      this.strm.avail_in = input.length - consumed;
      this.pending.length = 0;
      return true;
    } catch (error) {
      // The stream goes on in a later chunk: keep what came so far.
      if ((error as { errno?: number }).errno === constants.Z_BUF_ERROR) return true;
      this.err = (error as { errno?: number }).errno ?? constants.Z_DATA_ERROR;
      this.msg = error instanceof Error ? error.message : String(error);
      return false;
    }
  }
}

export function inflate(input: Uint8Array): Buffer {
  return inflateFirst(input).output;
}

export function deflate(input: Uint8Array): Buffer {
  return deflateSync(input);
}

export default { Inflate, inflate, deflate };
