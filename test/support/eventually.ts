/**
 * The one polling helper of the tests: polls until a condition holds, with a deadline, and fails
 * naming what it waited for and the last state it saw (not a bare jest timeout minutes later).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';

export interface EventuallyOptions {
  /** What is awaited, for the failure message, e.g. 'job-1 to be SUCCEEDED'. */
  readonly what: string;
  /** Keep it under the test's timeout, so this message is the one that reports the failure. @default 30_000 */
  readonly timeoutMs?: number;
  /** @default 100 */
  readonly intervalMs?: number;
}

export class EventuallyTimeoutError extends Error {
  override readonly name = 'EventuallyTimeoutError';
}

/**
 * Resolves with the first value of `probe` that `done` accepts. A probe that throws counts as "not
 * yet" (e.g. a record not written yet); its error is the last state if the deadline passes.
 */
export async function eventually<T>(
  probe: () => Promise<T> | T,
  done: (value: T) => boolean,
  options: EventuallyOptions,
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  let last: { value: T } | { error: unknown } | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (done(value)) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= deadline)
      throw new EventuallyTimeoutError(
        `timed out after ${options.timeoutMs ?? 30_000} ms waiting for ${options.what}; last state: ${describe(last)}`,
      );
    await sleep(options.intervalMs ?? 100);
  }
}

function describe(last: { value: unknown } | { error: unknown } | undefined): string {
  if (last === undefined) return '(never probed)';
  if ('error' in last)
    return `probe threw ${last.error instanceof Error ? `${last.error.name}: ${last.error.message}` : inspect(last.error)}`;
  return inspect(last.value, { depth: 6, breakLength: Infinity, maxStringLength: 2_000, maxArrayLength: 50 });
}
