/**
 * Path rules for files named by a patch. They run on the parsed names before any I/O, so a hostile
 * patch never reaches the object store or a working directory.
 *
 * The rules are those of a path every clone can check out: on Linux, macOS and Windows, by git
 * itself (its verify_path() with core.protectNTFS and core.protectHFS, and `git fsck --strict`).
 * A path git would refuse there is refused here, once and permanently (UNSAFE_PATCH), instead of
 * deep in the git library or, worse, on every later checkout of the branch.
 */
import { unsafePatch } from './operations';
import { checkWrittenPath } from './special-files';

/** Longest name of one file or directory: NAME_MAX of Linux and macOS (UTF-8 bytes). */
export const MAX_SEGMENT_BYTES = 255;
/**
 * Longest repository-relative path, in UTF-8 bytes. macOS refuses a path of PATH_MAX (1,024) bytes
 * or more in any call, and git passes paths relative to the top of the work tree.
 */
export const MAX_PATH_BYTES = 1_023;

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;
/** Characters Windows does not allow in a name (`:` also names NTFS streams: `.git::$INDEX_ALLOCATION`). */
const WINDOWS_FORBIDDEN = /[<>:"|?*]/;
/**
 * Code points HFS+ ignores in names (the list git's is_hfs_dotgit() skips: `.g\u200cit` is `.git` on
 * a Mac), plus the other invisible ones (zero-width space, word joiner, invisible operators):
 * a name that hides characters is never what a reviewer reads.
 */
const INVISIBLE = /[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]/;
/**
 * Windows device names: reserved whatever the extension (`con.txt`) or the case. The superscript
 * digits are written as escapes: esbuild copies a regular expression's characters as they are, and
 * node reads a bundle with one character beyond ASCII several times slower (the CLI's: 30 ms).
 */
const WINDOWS_DEVICE =
  /^(?:con|prn|aux|nul|conin\$|conout\$|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3]) *(?:\..*)?$/i;
/**
 * An NTFS 8.3 short name (`PROGRA~1`, `GIT~1`, `GITMOD~1.TXT`): on Windows it may name another,
 * existing file, so a patch writing it could write that file, or the repository's own `.git`.
 */
const SHORT_NAME = /^[^.~]{1,6}~[0-9]+(?:\.[^.]{0,3})?$/;

/**
 * Strips the exact `a/` or `b/` prefix git puts on diff names and checks what remains.
 * Returns the repository-relative path.
 */
export function stripAndCheckPath(name: string, prefix: 'a/' | 'b/'): string {
  if (!name.startsWith(prefix))
    throw unsafePatch(name, `name must start with "${prefix}" (generate the diff with git's default prefixes)`);
  const path = name.slice(prefix.length);
  checkPath(path);
  return path;
}

/** Throws UNSAFE_PATCH unless `path` is a plain relative path that checks out everywhere. */
export function checkPath(path: string): void {
  if (path.length === 0) throw unsafePatch(path, 'empty path');
  if (path.includes('\0')) throw unsafePatch(path, 'NUL character in path');
  if (path.includes('\\')) throw unsafePatch(path, 'backslash in path');
  if (CONTROL_CHARACTER.test(path)) throw unsafePatch(path, 'control character in path');
  if (/[\ud800-\udfff\ufffd]/u.test(path)) throw unsafePatch(path, 'name is not valid UTF-8');
  const invisible = INVISIBLE.exec(path)?.[0];
  if (invisible !== undefined) {
    throw unsafePatch(
      path,
      `invisible character ${codePoint(invisible)} in path (macOS ignores it in names, and a reader cannot see it)`,
    );
  }
  if (path.startsWith('/')) throw unsafePatch(path, 'absolute path');
  const bytes = utf8Length(path);
  if (bytes > MAX_PATH_BYTES)
    throw unsafePatch(path, `path is ${bytes} bytes, more than the ${MAX_PATH_BYTES} a checkout on macOS allows`);
  for (const segment of path.split('/')) checkSegment(path, segment);
}

function checkSegment(path: string, segment: string): void {
  if (segment === '') throw unsafePatch(path, 'empty path segment');
  if (segment === '.' || segment === '..') throw unsafePatch(path, `"${segment}" segment`);
  if (segment.toLowerCase() === '.git') throw unsafePatch(path, '".git" segment');
  if (isDotGitAlias(segment))
    throw unsafePatch(
      path,
      `"${segment}" is ".git" on Windows (git refuses it as a look-alike of the repository directory)`,
    );
  const bytes = utf8Length(segment);
  if (bytes > MAX_SEGMENT_BYTES)
    throw unsafePatch(path, `a name of ${bytes} bytes, more than the ${MAX_SEGMENT_BYTES} file systems allow`);
  const forbidden = WINDOWS_FORBIDDEN.exec(segment)?.[0];
  if (forbidden !== undefined)
    throw unsafePatch(path, `${JSON.stringify(forbidden)} in a name (Windows does not allow it)`);
  if (/[. ]$/.test(segment))
    throw unsafePatch(path, `"${segment}" ends with a dot or a space (Windows drops them: the name would change)`);
  if (WINDOWS_DEVICE.test(segment)) throw unsafePatch(path, `"${segment}" is a device name reserved on Windows`);
  if (SHORT_NAME.test(segment))
    throw unsafePatch(path, `"${segment}" has the form of an NTFS short name (on Windows it can name another file)`);
}

/**
 * `.git` as Windows resolves a name: trailing dots and spaces dropped, anything from a `:` (an NTFS
 * stream) ignored, and the short name `git~1` (git's is_ntfs_dotgit()). The characters that make
 * these spellings are refused on their own too; this rule names the look-alike for what it is.
 */
function isDotGitAlias(segment: string): boolean {
  const name = (segment.split(':')[0] ?? '').replace(/[. ]+$/, '').toLowerCase();
  return name === '.git' || /^\.?git~[0-9]+$/.test(name);
}

/**
 * The key under which case-insensitive, normalising file systems (macOS, Windows) store a name:
 * two paths with the same key are one file there.
 */
export function portableNameKey(name: string): string {
  return name.normalize('NFC').toLowerCase();
}

/**
 * Checks the paths a patch writes or removes: none twice, no file that is also a directory of
 * another file after the patch (`a` and `a/b`), no two written paths that are one file on macOS
 * or Windows (`README` and `readme`), and no `.gitmodules` written. `written` are the paths that
 * exist after the patch.
 */
export function checkPathSet(touched: readonly string[], written: readonly string[]): void {
  const seen = new Set<string>();
  for (const path of touched) {
    if (seen.has(path)) throw unsafePatch(path, 'path appears more than once in the patch');
    seen.add(path);
  }
  const files = new Set(written);
  const byKey = new Map<string, string>();
  for (const path of written) {
    checkWrittenPath(path);
    const segments = path.split('/');
    for (let i = 1; i <= segments.length; i++) {
      const prefix = segments.slice(0, i).join('/');
      if (i < segments.length && files.has(prefix)) throw unsafePatch(path, `file/directory clash with "${prefix}"`);
      const key = portableNameKey(prefix);
      const twin = byKey.get(key);
      if (twin !== undefined && twin !== prefix) throw caseClash(path, prefix, twin);
      byKey.set(key, prefix);
    }
  }
}

/** Two names that differ only in case or Unicode normalisation. */
export function caseClash(path: string, name: string, twin: string): ReturnType<typeof unsafePatch> {
  return unsafePatch(
    path,
    `"${name}" and "${twin}" differ only in case or Unicode normalisation: they are one file on macOS and Windows`,
  );
}

function utf8Length(text: string): number {
  return new TextEncoder().encode(text).length;
}

function codePoint(char: string): string {
  return `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
}
