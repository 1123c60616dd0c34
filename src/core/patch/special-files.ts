/**
 * Files git itself reads from the tree, in any directory and any case, and `git fsck` checks:
 * `.gitmodules` (submodule URLs, paths and update commands that clients act on when they clone)
 * and `.gitattributes` (git ignores a line of 2,048 bytes or more, and fsck refuses the blob).
 */
import { unsafePatch } from './operations';

/** git's ATTR_MAX_LINE_LENGTH: a longer .gitattributes line is ignored by git and refused by fsck. */
export const MAX_GITATTRIBUTES_LINE_BYTES = 2_047;

const baseName = (path: string) => path.slice(path.lastIndexOf('/') + 1).toLowerCase();

/** `.gitmodules` is never written: submodules are refused (mode 160000), so it has no use here. */
export function checkWrittenPath(path: string): void {
  if (baseName(path) === '.gitmodules') {
    throw unsafePatch(
      path,
      'writes .gitmodules: submodules are not supported, and git clients act on its URLs and commands',
    );
  }
}

/** Checks the content a patch leaves at `path`, for the files git reads. */
export function checkWrittenContent(path: string, bytes: Uint8Array): void {
  if (baseName(path) !== '.gitattributes') return;
  let line = 1;
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i < bytes.length && bytes[i] !== 0x0a) continue;
    const length = i - start;
    if (length > MAX_GITATTRIBUTES_LINE_BYTES) {
      throw unsafePatch(
        path,
        `line ${line} is ${length} bytes: git ignores .gitattributes lines of 2,048 bytes or more, and git fsck refuses them`,
      );
    }
    line++;
    start = i + 1;
  }
}

/** True for the files whose content checkWrittenContent looks at. */
export function isCheckedContent(path: string): boolean {
  return baseName(path) === '.gitattributes';
}
