/** The CLI's bounded reads of stdin; files a flag names are read by tools/operator/bounded-read.ts. */
import { MAX_DIFF_BYTES } from '../../contract/runtime-env';
import { readAtMost } from '../operator/bounded-read';
import type { CliIo } from './context';

/**
 * The most a job document on stdin (`enqueue -`) may hold: a diff at its limit written as JSON text,
 * where an escape (`\\u0000`) spells one byte in six.
 */
export const STDIN_DOCUMENT_LIMIT_BYTES = 6 * MAX_DIFF_BYTES;

/** At most `limit` bytes of the terminal's stdin (TooLargeError beyond them). */
export async function readStdinAtMost(io: Pick<CliIo, 'stdin'>, limit: number): Promise<Buffer> {
  return readAtMost(io.stdin(), limit);
}
