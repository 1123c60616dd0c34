/**
 * Path rules for files named by a patch. They run on the parsed names before any I/O, so a hostile
 * patch never reaches the object store or a working directory.
 */
import { unsafePatch } from './operations';

const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

/**
 * Strips the exact `a/` or `b/` prefix git puts on diff names and checks what remains.
 * Returns the repository-relative path.
 */
export function stripAndCheckPath(name: string, prefix: 'a/' | 'b/'): string {
  if (!name.startsWith(prefix)) throw unsafePatch(name, `name must start with "${prefix}" (generate the diff with git's default prefixes)`);
  const path = name.slice(prefix.length);
  checkPath(path);
  return path;
}

/** Throws UNSAFE_PATCH unless `path` is a plain relative path inside the work tree. */
export function checkPath(path: string): void {
  if (path.length === 0) throw unsafePatch(path, 'empty path');
  if (path.includes('\0')) throw unsafePatch(path, 'NUL character in path');
  if (path.includes('\\')) throw unsafePatch(path, 'backslash in path');
  if (CONTROL_CHARACTER.test(path)) throw unsafePatch(path, 'control character in path');
  if (path.startsWith('/')) throw unsafePatch(path, 'absolute path');
  for (const segment of path.split('/')) {
    if (segment === '') throw unsafePatch(path, 'empty path segment');
    if (segment === '.' || segment === '..') throw unsafePatch(path, `"${segment}" segment`);
    // Case-insensitive: on case-insensitive file systems ".GIT" is the repository's own directory.
    if (segment.toLowerCase() === '.git') throw unsafePatch(path, '".git" segment');
  }
}

/**
 * Checks the paths a patch writes or removes: none twice, and no file that is also a directory of
 * another file after the patch (`a` and `a/b`). `written` are the paths that exist after the patch.
 */
export function checkPathSet(touched: readonly string[], written: readonly string[]): void {
  const seen = new Set<string>();
  for (const path of touched) {
    if (seen.has(path)) throw unsafePatch(path, 'path appears more than once in the patch');
    seen.add(path);
  }
  const files = new Set(written);
  for (const path of written) {
    const segments = path.split('/');
    for (let i = 1; i < segments.length; i++) {
      const dir = segments.slice(0, i).join('/');
      if (files.has(dir)) throw unsafePatch(path, `file/directory clash with "${dir}"`);
    }
  }
}
