/** Applies the hunks of one file to its text. Pure: the adapter reads and writes the blobs. */
import { applyPatch } from 'diff';
import { PermanentJobError } from '../errors';
import { hunkHeader, hunkMismatch } from './mismatch';
import type { PatchHunk } from './operations';

/**
 * Returns the patched text. Like `git apply`: no fuzz, hunks may move but their context must match
 * exactly, and line endings are compared as bytes (a CRLF file is never silently converted).
 * Throws PATCH_DOES_NOT_APPLY naming the file and the first hunk that does not fit, with that hunk
 * and the file's lines where it should apply (mismatch.ts).
 */
export function applyHunks(path: string, source: string, hunks: readonly PatchHunk[]): string {
  if (hunks.length === 0) return source;
  const result = tryApply(source, hunks);
  if (result !== false) return result;
  // Find the first failing hunk only on the failure path: applying prefixes keeps jsdiff's offset rules.
  const index = hunks.findIndex((_, i) => tryApply(source, hunks.slice(0, i + 1)) === false);
  const hunk = hunks[index] ?? hunks[hunks.length - 1];
  const header = hunk ? hunkHeader(hunk) : '';
  throw new PermanentJobError(
    'PATCH_DOES_NOT_APPLY',
    `patch does not apply: ${JSON.stringify(path)}: hunk ${index + 1} of ${hunks.length} (${header}) does not match the file`,
    // What the agent needs to write the next patch: that hunk, and the file's lines where it should apply.
    { repositoryData: hunkMismatch(path, source, hunks, index === -1 ? hunks.length - 1 : index) },
  );
}

function tryApply(source: string, hunks: readonly PatchHunk[]): string | false {
  const patch = {
    oldFileName: undefined,
    newFileName: undefined,
    oldHeader: undefined,
    newHeader: undefined,
    hunks: [...hunks],
  };
  return applyPatch(source, patch, { fuzzFactor: 0, autoConvertLineEndings: false });
}
