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
  return new PermanentJobError('UNSAFE_PATCH', `unsafe patch: ${JSON.stringify(path)}: ${rule}`);
}

export function isFileMode(mode: string): mode is FileMode {
  return (FILE_MODES as readonly string[]).includes(mode);
}
