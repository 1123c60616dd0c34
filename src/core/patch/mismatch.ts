/**
 * What a patch that does not apply met, for the agent that writes the next one: the hunk that does
 * not fit and the branch's lines where it should apply, bounded (PATCH_MISMATCH_BYTES as JSON, a
 * long line or section cut with a marker) since the ledger keeps it with the failure.
 */
import { REPOSITORY_DATA_NOTE, type PatchMismatch } from '../errors';
import type { PatchHunk } from './operations';

/** The most a mismatch takes as JSON. */
export const PATCH_MISMATCH_BYTES = 8 * 1024;
/** The branch's lines shown before and after the place a hunk names. */
export const CONTEXT_LINES = 3;
/** What ends a cut line, and stands for the lines cut from a section. */
// An escape, not the character: the CLI's bundle stays ASCII (test/unit/cli-bundle.test.ts).
export const CUT_MARKER = '[\u2026]';
const LINE_BYTES = 512;
const PATH_BYTES = 256;
const HUNK_BYTES = 4 * 1024;
const BRANCH_BYTES = 3 * 1024;
/** A byte the patch engine kept as a lone surrogate (bytes.ts): not text, shown as U+FFFD. */
const ESCAPED_BYTE = /[\udc80-\udcff]/gu;

/** `@@ -a,b +c,d @@`, as the messages name a hunk. */
export function hunkHeader(hunk: PatchHunk): string {
  return `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@`;
}

/** The mismatch of hunk `index` (0-based) of `hunks`, against the file's text `source`. */
export function hunkMismatch(path: string, source: string, hunks: readonly PatchHunk[], index: number): PatchMismatch {
  const hunk = hunks[index];
  const base = fileMismatch(path);
  if (hunk === undefined) return base;
  const hunkLines = bounded(hunk.lines, HUNK_BYTES);
  const branchLines = branchWindow(source, hunk);
  const shown = bounded(branchLines.lines, BRANCH_BYTES);
  return {
    ...base,
    hunk: { index: index + 1, of: hunks.length, header: hunkHeader(hunk), lines: hunkLines.lines },
    branch: { startLine: branchLines.startLine, lines: shown.lines, fileLines: branchLines.fileLines },
    ...(base.truncated || hunkLines.cut || shown.cut ? { truncated: true } : {}),
  };
}

/** A mismatch that names the file only (it is missing, or in the way). */
export function fileMismatch(path: string): PatchMismatch {
  const shown = cutLine(path, PATH_BYTES);
  return { note: REPOSITORY_DATA_NOTE, path: shown.text, ...(shown.cut ? { truncated: true } : {}) };
}

/**
 * The file's lines where the hunk should apply, CONTEXT_LINES around the place it names; the end
 * of the file when it names a place past it.
 */
function branchWindow(source: string, hunk: PatchHunk): { startLine: number; lines: string[]; fileLines: number } {
  const lines = source === '' ? [] : source.replace(/\n$/, '').split('\n');
  const span = Math.max(hunk.oldLines, 1) + 2 * CONTEXT_LINES;
  const first = Math.min(Math.max(hunk.oldStart - 1 - CONTEXT_LINES, 0), Math.max(lines.length - span, 0));
  return { startLine: first + 1, lines: lines.slice(first, first + span), fileLines: lines.length };
}

/** Lines up to `budget` bytes as JSON, each cut to LINE_BYTES; the lines left out become one marker line. */
function bounded(lines: readonly string[], budget: number): { lines: string[]; cut: boolean } {
  const kept: string[] = [];
  let used = 0;
  let cut = false;
  for (const [i, line] of lines.entries()) {
    const shown = cutLine(line, LINE_BYTES);
    // Its quotes and comma in the array.
    const bytes = jsonBytes(shown.text) + 3;
    if (used + bytes > budget - 32) {
      kept.push(`${CUT_MARKER} ${lines.length - i} more lines`);
      return { lines: kept, cut: true };
    }
    kept.push(shown.text);
    used += bytes;
    cut ||= shown.cut;
  }
  return { lines: kept, cut };
}

/** The line as text (escaped bytes as U+FFFD), cut to at most `limit` bytes as JSON with the marker at its end. */
function cutLine(line: string, limit: number): { text: string; cut: boolean } {
  const text = line.replace(ESCAPED_BYTE, '\ufffd');
  if (jsonBytes(text) <= limit) return { text, cut: false };
  // JSON takes 1 to 6 bytes a code unit: shorten until it fits, never splitting a surrogate pair.
  let end = Math.min(text.length, limit);
  while (end > 0 && jsonBytes(text.slice(0, end)) > limit - jsonBytes(CUT_MARKER)) end = Math.floor(end * 0.9);
  if (end > 0 && /[\ud800-\udbff]/u.test(text.charAt(end - 1))) end -= 1;
  return { text: `${text.slice(0, end)}${CUT_MARKER}`, cut: true };
}

function jsonBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text)) - 2;
}
