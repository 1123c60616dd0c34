/**
 * The validated form of a patch: one operation per file, paths already stripped of `a/` / `b/`
 * and checked, so an adapter can apply them without re-validating anything but the tree itself.
 */
import type { StructuredPatchHunk } from 'diff';
import { PermanentJobError } from '../errors';

/** The only file modes a patch may produce or touch: regular and executable files. */
const FILE_MODES = ['100644', '100755'] as const;
export type FileMode = (typeof FILE_MODES)[number];

export type PatchHunk = Readonly<StructuredPatchHunk>;

/**
 * - `modify` covers content edits and mode changes (`mode` is set when the mode changes).
 * - `rename` and `copy` read `from` in the base tree; `rename` also removes it.
 * Every operation reads the base tree (the preimage), never another operation's output.
 */
export type FileOperation =
  | { readonly kind: 'add'; readonly path: string; readonly mode: FileMode; readonly hunks: readonly PatchHunk[] }
  | { readonly kind: 'delete'; readonly path: string; readonly hunks: readonly PatchHunk[] }
  | { readonly kind: 'modify'; readonly path: string; readonly mode?: FileMode; readonly hunks: readonly PatchHunk[] }
  | {
      readonly kind: 'rename' | 'copy';
      readonly from: string;
      readonly path: string;
      readonly mode?: FileMode;
      readonly hunks: readonly PatchHunk[];
    };

/** A patch that must not touch the repository; the message names the file and the rule it breaks. */
export function unsafePatch(path: string, rule: string): PermanentJobError {
  return new PermanentJobError('UNSAFE_PATCH', `unsafe patch: ${displayPath(path)}: ${rule}`);
}

/** Longest path shown whole in a message; longer ones are cut (the rule says how long they are). */
const DISPLAY_CHARS = 160;
/** Characters a reader cannot see (C1 controls, format characters, separators, noncharacters). */
const HIDDEN = /[\u0080-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff0-\uffff]/g;

/** A path as messages show it: quoted, hidden characters as \u escapes, a long path cut. */
export function displayPath(path: string): string {
  const cut = path.length > DISPLAY_CHARS ? `${path.slice(0, DISPLAY_CHARS)}…` : path;
  return JSON.stringify(cut).replace(HIDDEN, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function isFileMode(mode: string): mode is FileMode {
  return (FILE_MODES as readonly string[]).includes(mode);
}
