/**
 * Parses a `git diff` (unified format with git's extended headers) into validated file operations.
 * Everything here is pure: a hostile or oversize patch is rejected before any I/O.
 */
import { parsePatch, type StructuredPatch } from 'diff';
import { MAX_DIFF_BYTES } from '../../../contract/runtime-env';
import { InvalidJobError } from '../errors';
import { isFileMode, unsafePatch, type FileMode, type FileOperation } from './operations';
import { decodePatchBytes } from './bytes';
import { checkPathSet, stripAndCheckPath } from './paths';

export interface PatchLimits {
  /** Largest diff in bytes. */
  readonly maxBytes: number;
  /** Most files one patch may touch. */
  readonly maxFiles: number;
}

const DEFAULT_PATCH_LIMITS: PatchLimits = { maxBytes: MAX_DIFF_BYTES, maxFiles: 2_000 };

const DEV_NULL = '/dev/null';
const LONE_SURROGATE = /[\ud800-\udfff]/u;
// Header lines only: hunk lines start with ' ', '+', '-' or '\', so these cannot match hunk content.
const BINARY_MARKER = /^(GIT binary patch|Binary files .* differ)$/;
const INDEX_LINE_MODE = /^index [0-9a-f]+\.\.[0-9a-f]+ ([0-7]+)$/;
const MODE_LINE = /^(?:old mode|new mode|deleted file mode|new file mode) /;
const MODE_HEADER = /^(?:old mode|new mode|deleted file mode|new file mode) ([0-7]+)$/;

/**
 * Validates and parses a diff. Throws PermanentJobError('UNSAFE_PATCH') naming the file and the
 * rule for a hostile patch, InvalidJobError for text that is not a diff at all.
 */
export function parsePatchOperations(
  diff: string | Uint8Array,
  limits: PatchLimits = DEFAULT_PATCH_LIMITS,
): FileOperation[] {
  const text = decodeDiff(diff, limits);
  rejectUnsafeHeaders(text);
  let files: StructuredPatch[];
  try {
    files = parsePatch(text);
  } catch (error) {
    throw new InvalidJobError(`diff is not a valid unified diff: ${(error as Error).message}`);
  }
  const operations = files.map(toOperation);
  if (operations.length === 0) throw new InvalidJobError('diff changes no files');
  if (operations.length > limits.maxFiles) {
    throw unsafePatch('(patch)', `touches ${operations.length} files, more than the limit of ${limits.maxFiles}`);
  }
  checkPathSet(
    operations.flatMap(touchedPaths),
    operations.flatMap((op) => (op.kind === 'delete' ? [] : [op.path])),
  );
  return operations;
}

/**
 * The diff as text for jsdiff, every byte kept (bytes.ts): a diff of Latin-1 or any other
 * encoding applies byte for byte. A string must be well-formed (it is UTF-8 text by contract).
 */
function decodeDiff(diff: string | Uint8Array, limits: PatchLimits): string {
  const bytes = typeof diff === 'string' ? Buffer.byteLength(diff, 'utf8') : diff.byteLength;
  if (bytes > limits.maxBytes)
    throw unsafePatch('(patch)', `${bytes} bytes, more than the limit of ${limits.maxBytes}`);
  if (typeof diff !== 'string') return decodePatchBytes(diff);
  if (LONE_SURROGATE.test(diff))
    throw unsafePatch(
      '(patch)',
      'not well-formed Unicode text (lone surrogate): send bytes that are not UTF-8 as diffBase64',
    );
  return diff;
}

/**
 * Checks what jsdiff does not report reliably: binary patches parse as silent no-ops, and the mode
 * of a modified symlink or submodule appears only on the `index` line.
 */
function rejectUnsafeHeaders(text: string): void {
  let file = '(patch)';
  for (const line of text.split('\n')) {
    const header = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (header.startsWith('diff --git ')) file = header.slice('diff --git '.length);
    else if (BINARY_MARKER.test(header)) throw unsafePatch(file, 'binary patches are not supported');
    // jsdiff reads the digits a mode starts with ("10064x" as 10064): the whole line must be octal.
    else if (MODE_LINE.test(header) && !MODE_HEADER.test(header))
      throw unsafePatch(file, `malformed mode line ${JSON.stringify(header)}: a mode is octal digits`);
    else {
      const mode = INDEX_LINE_MODE.exec(header)?.[1] ?? MODE_HEADER.exec(header)?.[1];
      if (mode !== undefined && !isFileMode(mode)) throw unsafePatch(file, modeRule(mode));
    }
  }
}

function modeRule(mode: string): string {
  if (mode === '120000') return 'symlinks (mode 120000) are not allowed';
  if (mode === '160000') return 'submodules (mode 160000) are not allowed';
  return `mode ${mode} is not allowed (only 100644 and 100755)`;
}

function checkedMode(name: string, mode: string | undefined): FileMode | undefined {
  if (mode === undefined) return undefined;
  if (!isFileMode(mode)) throw unsafePatch(name, modeRule(mode));
  return mode;
}

function toOperation(file: StructuredPatch): FileOperation {
  const { oldFileName, newFileName, hunks } = file;
  if (oldFileName === undefined || newFileName === undefined) {
    throw new InvalidJobError('diff is not a valid unified diff: a file section has no ---/+++ or diff --git header');
  }
  if (file.isBinary) throw unsafePatch(newFileName, 'binary patches are not supported');
  const oldMode = checkedMode(oldFileName, file.oldMode);
  const newMode = checkedMode(newFileName, file.newMode);

  if (file.isCreate || oldFileName === DEV_NULL) {
    return { kind: 'add', path: stripAndCheckPath(newFileName, 'b/'), mode: newMode ?? '100644', hunks };
  }
  if (file.isDelete || newFileName === DEV_NULL) {
    return { kind: 'delete', path: stripAndCheckPath(oldFileName, 'a/'), hunks };
  }
  const from = stripAndCheckPath(oldFileName, 'a/');
  const path = stripAndCheckPath(newFileName, 'b/');
  const mode = newMode !== undefined && newMode !== oldMode ? newMode : undefined;
  if (file.isRename || file.isCopy) {
    return { kind: file.isRename ? 'rename' : 'copy', from, path, ...(mode && { mode }), hunks };
  }
  if (from !== path) throw unsafePatch(newFileName, `old name "${from}" differs without a rename or copy header`);
  return { kind: 'modify', path, ...(mode && { mode }), hunks };
}

/** Paths an operation writes or removes (a copy's source is only read). */
function touchedPaths(op: FileOperation): string[] {
  return op.kind === 'rename' ? [op.from, op.path] : [op.path];
}
