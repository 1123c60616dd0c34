/**
 * Reads that stop at a limit. What a user names on the command line may be anything: a 1 GiB
 * sparse file, `/dev/zero`, a pipe whose writer never closes it, a terminal. A regular file is
 * refused by its size before a byte of it is read; anything else is read through a stream that is
 * abandoned as soon as the byte after the limit arrives, so the memory a read takes is bounded by
 * the limit (plus one chunk), never by what the source would give.
 */
import { close, createReadStream, fstat as fstatCallback, open, type Stats } from 'node:fs';
import { Socket } from 'node:net';
import { promisify } from 'node:util';
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import type { CliIo } from './context';

const openFd = promisify(open);
const fstat = promisify(fstatCallback);
const closeFd = promisify(close);

/**
 * The most a job document on stdin (`enqueue -`) may hold: a diff at its limit written as JSON text,
 * where an escape (`\\u0000`) spells one byte in six.
 */
export const STDIN_DOCUMENT_LIMIT_BYTES = 6 * MAX_DIFF_BYTES;

/** The source holds more than the limit: `size` when known without reading (a regular file). */
export class TooLargeError extends Error {
  override readonly name = 'TooLargeError';
  constructor(
    readonly limit: number,
    readonly size?: number,
  ) {
    super(size === undefined ? `more than ${limit} bytes, over the limit` : `${size} bytes, over the ${limit}-byte limit`);
  }
}

/** At most `limit` bytes of `source`; TooLargeError as soon as there are more (the rest is never read). */
export async function readAtMost(source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  // Leaving the loop early returns the iterator, which destroys a stream source.
  for await (const chunk of source) {
    total += chunk.byteLength;
    if (total > limit) throw new TooLargeError(limit);
    chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }
  return Buffer.concat(chunks, total);
}

/**
 * A file's bytes: a regular file over `limit` is refused by its size unread; any other file is
 * read up to it. A pipe (or socket) is read as a socket, the way Node reads a piped stdin: closing
 * it when the limit is passed cancels the read in progress, where a file stream's blocked read of a
 * pipe whose writer holds it open would keep the process alive.
 */
export async function readFileAtMost(file: string, limit: number): Promise<Buffer> {
  const fd = await openFd(file, 'r');
  let stat: Stats;
  try {
    stat = await fstat(fd);
    if (stat.isFile() && stat.size > limit) throw new TooLargeError(limit, stat.size);
  } catch (error) {
    await closeFd(fd);
    throw error;
  }
  // Each source owns the descriptor from here and closes it when read, refused or destroyed.
  // A regular file may still grow after the stat: it is read through the same bound.
  const source = stat.isFIFO() || stat.isSocket() ? new Socket({ fd, readable: true, writable: false }) : createReadStream('', { fd });
  try {
    return await readAtMost(source, limit);
  } finally {
    source.destroy();
  }
}

/** At most `limit` bytes of the terminal's stdin (TooLargeError beyond them). */
export async function readStdinAtMost(io: Pick<CliIo, 'stdin' | 'readStdin'>, limit: number): Promise<Buffer> {
  return readAtMost(io.stdin ? io.stdin() : [Buffer.from(await io.readStdin())], limit);
}
