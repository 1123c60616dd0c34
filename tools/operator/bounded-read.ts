/**
 * Reads that stop at a limit, for every surface that reads a file a caller names (the CLI's
 * `--diff-file`, the MCP server's `diffFile`). What is named may be anything: a 1 GiB sparse file,
 * `/dev/zero`, /proc/self/pagemap (size 0, endless), a pipe whose writer never closes it. A regular file is
 * refused by its size before a byte of it is read; anything else is read through a stream that is
 * abandoned as soon as the byte after the limit arrives, so the memory a read takes is bounded by
 * the limit (plus one chunk), never by what the source would give.
 */
import { close, constants, createReadStream, fstat as fstatCallback, open, type Stats } from 'node:fs';
import { Socket } from 'node:net';
import { promisify } from 'node:util';
import { errorMessage } from '../../src/core/errors';

const openFd = promisify(open);
const fstat = promisify(fstatCallback);
const closeFd = promisify(close);

/** The name is not a regular file, and only one was asked for (BoundedReadOptions.regularOnly). */
export class NotAFileError extends Error {
  override readonly name = 'NotAFileError';
  constructor(readonly file: string) {
    super(`${file} is not a file`);
  }
}

export interface BoundedReadOptions {
  /**
   * Refuse anything but a regular file, and open without blocking (a FIFO with no writer would
   * hold the open itself): for a long-lived server, where no user is there to end a wait.
   */
  readonly regularOnly?: boolean;
}

/** The source holds more than the limit: `size` when known without reading (a regular file). */
export class TooLargeError extends Error {
  override readonly name = 'TooLargeError';
  constructor(
    readonly limit: number,
    readonly size?: number,
  ) {
    super(
      size === undefined ? `more than ${limit} bytes, over the limit` : `${size} bytes, over the ${limit}-byte limit`,
    );
  }
}

/** At most `limit` bytes of `source`; TooLargeError as soon as there are more (the rest is never read). */
export async function readAtMost(
  source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  limit: number,
): Promise<Buffer> {
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
export async function readFileAtMost(file: string, limit: number, options: BoundedReadOptions = {}): Promise<Buffer> {
  const fd = await openFd(file, options.regularOnly ? constants.O_RDONLY | constants.O_NONBLOCK : constants.O_RDONLY);
  let stat: Stats;
  try {
    stat = await fstat(fd);
    if (options.regularOnly && !stat.isFile()) throw new NotAFileError(file);
    if (stat.isFile() && stat.size > limit) throw new TooLargeError(limit, stat.size);
  } catch (error) {
    await closeFd(fd);
    throw error;
  }
  // Each source owns the descriptor from here and closes it when read, refused or destroyed.
  // A regular file may still grow after the stat: it is read through the same bound.
  const source =
    stat.isFIFO() || stat.isSocket()
      ? new Socket({ fd, readable: true, writable: false })
      : createReadStream('', { fd });
  try {
    return await readAtMost(source, limit);
  } finally {
    source.destroy();
  }
}

/** Why a named file could not be read, in words for the one who named it. */
export function unreadableReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EISDIR') return 'it is a directory';
  if (code === 'EACCES') return 'permission denied';
  return errorMessage(error);
}
