import { PermanentJobError } from '../../src/core/errors';
import { applyHunks, decodePatchBytes, encodePatchText, parsePatchOperations } from '../../src/core/patch';

/** A one-file git diff modifying `path` (a line "old" becomes "new"). */
function modifyDiff(path: string, oldName = `a/${path}`, newName = `b/${path}`): string {
  return [
    `diff --git ${oldName} ${newName}`,
    'index 3367afd..3e75765 100644',
    `--- ${oldName}`,
    `+++ ${newName}`,
    '@@ -1 +1 @@',
    '-old',
    '+new',
    '',
  ].join('\n');
}

function addDiff(path: string, mode = '100644', line = 'x'): string {
  return [
    `diff --git a/${path} b/${path}`,
    `new file mode ${mode}`,
    'index 0000000..587be6b',
    '--- /dev/null',
    `+++ b/${path}`,
    '@@ -0,0 +1 @@',
    `+${line}`,
    '',
  ].join('\n');
}

function deleteDiff(path: string): string {
  return [
    `diff --git a/${path} b/${path}`,
    'deleted file mode 100644',
    'index 587be6b..0000000',
    `--- a/${path}`,
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    '-x',
    '',
  ].join('\n');
}

/** The PermanentJobError `run` throws. */
function thrown(run: () => unknown): PermanentJobError {
  try {
    run();
  } catch (error) {
    if (error instanceof PermanentJobError) return error;
    throw error;
  }
  throw new Error('it did not throw');
}

function rejection(diff: string | Uint8Array, limits?: { maxBytes: number; maxFiles: number }): PermanentJobError {
  try {
    parsePatchOperations(diff, limits);
  } catch (error) {
    if (error instanceof PermanentJobError) return error;
    throw error;
  }
  throw new Error('expected the patch to be rejected');
}

describe('parsePatchOperations: valid patches', () => {
  test('a modification strips exactly a/ and b/', () => {
    const [op] = parsePatchOperations(modifyDiff('src/a/b.ts'));
    expect(op).toMatchObject({ kind: 'modify', path: 'src/a/b.ts' });
    expect(op).not.toHaveProperty('mode');
    expect(op?.hunks[0]?.lines).toEqual(['-old', '+new']);
  });

  test('add, delete, rename with edit, pure rename, mode change and quoted unicode names', () => {
    const diff = [
      addDiff('bin/run.sh', '100755'),
      deleteDiff('gone.txt'),
      'diff --git a/old.txt b/new.txt\nsimilarity index 90%\nrename from old.txt\nrename to new.txt\nindex 1..2 100644\n--- a/old.txt\n+++ b/new.txt\n@@ -1 +1 @@\n-old\n+new\n',
      'diff --git a/p.txt b/q.txt\nsimilarity index 100%\nrename from p.txt\nrename to q.txt\n',
      'diff --git a/tool b/tool\nold mode 100644\nnew mode 100755\n',
      'diff --git "a/sp ace \\303\\251.txt" "b/sp ace \\303\\251.txt"\nindex 1..2 100644\n--- "a/sp ace \\303\\251.txt"\t\n+++ "b/sp ace \\303\\251.txt"\t\n@@ -1 +1 @@\n-old\n+new\n',
    ].join('');
    const ops = parsePatchOperations(diff).map(({ hunks, ...rest }) => ({ ...rest, hunkCount: hunks.length }));
    expect(ops).toEqual([
      { kind: 'add', path: 'bin/run.sh', mode: '100755', hunkCount: 1 },
      { kind: 'delete', path: 'gone.txt', hunkCount: 1 },
      { kind: 'rename', from: 'old.txt', path: 'new.txt', hunkCount: 1 },
      { kind: 'rename', from: 'p.txt', path: 'q.txt', hunkCount: 0 },
      { kind: 'modify', path: 'tool', mode: '100755', hunkCount: 0 },
      { kind: 'modify', path: 'sp ace é.txt', hunkCount: 1 },
    ]);
  });

  test('accepts bytes that are valid UTF-8, keeping a BOM inside the content', () => {
    const [op] = parsePatchOperations(new TextEncoder().encode(addDiff('bom.txt', '100644', '\ufeffhello')));
    expect(op?.hunks[0]?.lines).toEqual(['+\ufeffhello']);
  });

  test('a file deleted and a directory of the same name created is not a clash', () => {
    const ops = parsePatchOperations(deleteDiff('lib') + addDiff('lib/index.ts'));
    expect(ops.map((op) => `${op.kind}:${op.path}`)).toEqual(['delete:lib', 'add:lib/index.ts']);
  });

  test('a copy reads its source from the base tree, so the source may also be modified', () => {
    const copy = 'diff --git a/a.txt b/c.txt\nsimilarity index 100%\ncopy from a.txt\ncopy to c.txt\n';
    const ops = parsePatchOperations(copy + modifyDiff('a.txt'));
    expect(ops.map((op) => op.kind)).toEqual(['copy', 'modify']);
  });
});

describe('parsePatchOperations: bytes in any encoding', () => {
  test('bytes that are not UTF-8 (Latin-1) parse, and every byte of a line survives', () => {
    const latin1 = Buffer.concat([
      Buffer.from('diff --git a/l.txt b/l.txt\nnew file mode 100644\n--- /dev/null\n+++ b/l.txt\n@@ -0,0 +1 @@\n+caf'),
      Buffer.from([0xe9, 0x0a]),
    ]);
    const [op] = parsePatchOperations(latin1);
    const added = applyHunks('l.txt', '', op?.hunks ?? []);
    expect(Buffer.from(encodePatchText(added)).equals(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]))).toBe(true);
  });

  test('a Latin-1 hunk applies to a Latin-1 file, byte for byte', () => {
    const file = Buffer.from('na\xefve\nline\n', 'latin1');
    const diff = Buffer.from(
      'diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-na\xefve\n+na\xefvet\xe9\n line\n',
      'latin1',
    );
    const [op] = parsePatchOperations(diff);
    const result = encodePatchText(applyHunks('f', decodePatchBytes(file), op?.hunks ?? []));
    expect(Buffer.from(result).equals(Buffer.from('na\xefvet\xe9\nline\n', 'latin1'))).toBe(true);
  });
});

describe('parsePatchOperations: hostile patches are rejected before any I/O', () => {
  const symlinkModify =
    'diff --git a/link b/link\nindex 1..2 120000\n--- a/link\n+++ b/link\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+/etc\n\\ No newline at end of file\n';
  const submoduleModify =
    'diff --git a/sub b/sub\nindex 1111111..2222222 160000\n--- a/sub\n+++ b/sub\n@@ -1 +1 @@\n-Subproject commit 1111111111111111111111111111111111111111\n+Subproject commit 2222222222222222222222222222222222222222\n';
  const gitBinary =
    'diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 3\nKcmZ>Y%K!iX1ONm8\n\nliteral 0\nHcmV?d00001\n\n';
  const binaryDiffer =
    'diff --git a/img.png b/img.png\nindex 1111111..2222222 100644\nBinary files a/img.png and b/img.png differ\n';

  test.each<[string, string, string, RegExp]>([
    ['absolute path', modifyDiff('etc/passwd', 'a//etc/passwd', 'b//etc/passwd'), '/etc/passwd', /absolute path/],
    ['".." segment', modifyDiff('../outside.txt'), '../outside.txt', /"\.\." segment/],
    ['"." segment', modifyDiff('./x.txt'), './x.txt', /"\." segment/],
    ['empty segment', modifyDiff('a//x.txt'), 'a//x.txt', /empty path segment/],
    ['.git segment', modifyDiff('.git/hooks/pre-commit'), '.git/hooks/pre-commit', /"\.git" segment/],
    ['.GIT segment, any case', modifyDiff('sub/.GiT/config'), 'sub/.GiT/config', /"\.git" segment/],
    ['backslash', modifyDiff('dir\\x.txt'), 'dir\\\\x.txt', /backslash/],
    ['NUL in a quoted name', modifyDiff('x', '"a/nul\\000x"', '"b/nul\\000x"'), 'nul\\u0000x', /NUL/],
    ['missing a/ prefix', modifyDiff('x.txt', 'x.txt', 'x.txt'), 'x.txt', /must start with "a\/"/],
    ['new symlink', addDiff('evil', '120000', '/etc'), 'evil', /symlinks \(mode 120000\)/],
    ['modified symlink (mode only on the index line)', symlinkModify, 'link', /symlinks \(mode 120000\)/],
    [
      'new submodule',
      addDiff('sub', '160000', 'Subproject commit 1111111111111111111111111111111111111111'),
      'sub',
      /submodules/,
    ],
    ['modified submodule', submoduleModify, 'sub', /submodules/],
    ['other mode', 'diff --git a/x b/x\nold mode 100644\nnew mode 100777\n', 'x', /mode 100777 is not allowed/],
    [
      'a mode that is not octal (read as 10064 before)',
      addDiff('o.txt', '10064x', 'x'),
      'o.txt',
      /malformed mode line "new file mode 10064x"/,
    ],
    ['GIT binary patch', gitBinary, 'img.png', /binary patches/],
    ['Binary files differ', binaryDiffer, 'img.png', /binary patches/],
    ['the same path twice', modifyDiff('twice.txt') + modifyDiff('twice.txt'), 'twice.txt', /more than once/],
    [
      'rename source also modified',
      'diff --git a/r b/s\nsimilarity index 100%\nrename from r\nrename to s\n' + modifyDiff('r'),
      '"r"',
      /more than once/,
    ],
    ['file/directory clash', addDiff('lib') + addDiff('lib/index.ts'), 'lib/index.ts', /clash with "lib"/],
    ['renamed without a rename header', modifyDiff('x', 'a/x', 'b/y'), 'y', /without a rename/],
  ])('%s', (_rule, diff, namedPath, rule) => {
    const error = rejection(diff);
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toContain(namedPath);
    expect(error.message).toMatch(rule);
  });

  test('oversize patch (bytes)', () => {
    const diff = modifyDiff('big.txt');
    const error = rejection(diff, { maxBytes: Buffer.byteLength(diff) - 1, maxFiles: 10 });
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(/more than the limit/);
    expect(parsePatchOperations(diff, { maxBytes: Buffer.byteLength(diff), maxFiles: 10 })).toHaveLength(1);
  });

  test('too many files', () => {
    const error = rejection(modifyDiff('1') + modifyDiff('2') + modifyDiff('3'), { maxBytes: 1e6, maxFiles: 2 });
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(/3 files, more than the limit of 2/);
  });

  test('a lone surrogate in a string (a diff string is UTF-8 text; other bytes travel as bytes)', () => {
    expect(rejection(modifyDiff('x.txt').replace('+new', '+\ud800')).message).toMatch(
      /not well-formed Unicode text \(lone surrogate\): send bytes that are not UTF-8 as diffBase64/,
    );
  });

  test.each([
    ['text that is not a diff', 'hello\nworld\n'],
    ['a hunk with a broken line', 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-x\n'],
    ['an empty diff', ''],
  ])('%s is an invalid job', (_what, diff) => {
    expect(rejection(diff).reason).toBe('INVALID_JOB');
  });
});

describe('parsePatchOperations: only paths every clone can check out', () => {
  const longPath = Array.from({ length: 25 }, (_, i) => `${i}`.padEnd(200, 'd')).join('/');

  test.each<[string, string, RegExp]>([
    ['a 300-byte name', 'x'.repeat(300), /a name of 300 bytes, more than the 255/],
    ['a 5,024-byte path', longPath, /path is 5024 bytes, more than the 1023 a checkout on macOS allows/],
    ['".git." (Windows drops the dot)', '.git./config', /"\.git\." is "\.git" on Windows/],
    ['".git " (Windows drops the space)', '.git /config', /"\.git " is "\.git" on Windows/],
    ['".GIT. ." in any case', 'sub/.GIT. ./hooks/x', /is "\.git" on Windows/],
    ['the NTFS short name GIT~1', 'GIT~1/config', /"GIT~1" is "\.git" on Windows/],
    ['an NTFS stream of .git', '.git::$INDEX_ALLOCATION/config', /is "\.git" on Windows/],
    [
      'a zero-width non-joiner (.g\u200cit)',
      '.g\u200cit/config',
      /invisible character U\+200C in path \(macOS ignores it/,
    ],
    ['a zero-width joiner', 'src/.gi\u200dt/hooks', /invisible character U\+200D/],
    ['a byte-order mark', '\ufeff.git/config', /invisible character U\+FEFF/],
    ['a right-to-left override', 'evil\u202etxt.exe', /invisible character U\+202E/],
    ['the Windows device name CON', 'con', /"con" is a device name reserved on Windows/],
    ['a device name with an extension', 'docs/NUL.txt', /"NUL\.txt" is a device name reserved on Windows/],
    ['COM1 with an extension', 'com1.log', /device name/],
    ['LPT9', 'out/LPT9', /device name/],
    ['COM with a superscript digit (Windows reads it as a digit)', 'com\u00b9.log', /device name/],
    ['LPT with a superscript digit', 'lpt\u00b3', /device name/],
    ['"aux .c"', 'aux .c', /device name/],
    ['a colon', 'a:b.txt', /":" in a name \(Windows does not allow it\)/],
    ['a question mark', 'why?.md', /"\?" in a name/],
    ['an asterisk', 'all*.txt', /"\*" in a name/],
    ['a pipe', 'a|b', /"\|" in a name/],
    ['angle brackets', '<x>.txt', /"<" in a name/],
    ['a double quote', 'say "hi".txt', /"\\"" in a name/],
    ['a trailing dot', 'notes.', /"notes\." ends with a dot or a space/],
    ['a trailing space', 'dir /x.txt', /"dir " ends with a dot or a space/],
    ['an NTFS short name', 'PROGRA~1/x', /"PROGRA~1" has the form of an NTFS short name/],
    ['the short name of .gitmodules', 'GITMOD~1', /NTFS short name/],
    ['a new .gitmodules', '.gitmodules', /writes \.gitmodules: submodules are not supported/],
    ['.gitmodules in a directory, any case', 'vendor/.GitModules', /writes \.gitmodules/],
  ])('%s is UNSAFE_PATCH', (_what, path, rule) => {
    const error = rejection(addDiff(path));
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(rule);
  });

  test('the message shows hidden characters as escapes and cuts a long path', () => {
    expect(rejection(addDiff('.g\u200cit/config')).message).toContain('".g\\u200cit/config"');
    expect(rejection(addDiff(longPath)).message.length).toBeLessThan(300);
  });

  test('a quoted name whose bytes are not UTF-8 is refused', () => {
    const latin1Name =
      'diff --git "a/caf\\351.txt" "b/caf\\351.txt"\nnew file mode 100644\n--- /dev/null\n+++ "b/caf\\351.txt"\n@@ -0,0 +1 @@\n+x\n';
    expect(rejection(latin1Name).message).toMatch(/name is not valid UTF-8/);
  });

  test.each<[string, string, RegExp]>([
    [
      'two files that differ only in case',
      addDiff('README.md') + addDiff('readme.md'),
      /"readme\.md" and "README\.md" differ only in case/,
    ],
    [
      'two directories that differ only in case',
      addDiff('docs/a.md') + addDiff('Docs/b.md'),
      /"Docs" and "docs" differ only in case/,
    ],
    [
      'NFC and NFD spellings of one name',
      addDiff('caf\u00e9.txt') + addDiff('cafe\u0301.txt'),
      /differ only in case or Unicode normalisation/,
    ],
  ])('%s is UNSAFE_PATCH: one file on macOS and Windows', (_what, diff, rule) => {
    const error = rejection(diff);
    expect(error.reason).toBe('UNSAFE_PATCH');
    expect(error.message).toMatch(rule);
  });

  test.each([
    ['a 255-byte name', 'x'.repeat(255)],
    ['a 602-byte path', `${'a'.repeat(200)}/${'b'.repeat(200)}/${'c'.repeat(200)}`],
    ['.github', '.github/workflows/ci.yml'],
    ['.gitignore', '.gitignore'],
    ['.gitattributes', '.gitattributes'],
    ['a name starting with a device name', 'console.txt'],
    ['COM10', 'com10.txt'],
    ['a backup name', 'backup~'],
    ['a tilde name that is no short name', 'notes~1.md.orig'],
    ['non-ASCII and an emoji', 'caf\u00e9/\u{1f600}.txt'],
    ['dots inside a name', 'a.b.c'],
  ])('%s is accepted', (_what, path) => {
    expect(parsePatchOperations(addDiff(path))).toMatchObject([{ kind: 'add', path }]);
  });

  test('a patch may delete a .gitmodules and rename a file to another case', () => {
    const rename = 'diff --git a/README b/Readme\nsimilarity index 100%\nrename from README\nrename to Readme\n';
    expect(parsePatchOperations(deleteDiff('.gitmodules') + rename).map((op) => op.kind)).toEqual(['delete', 'rename']);
  });
});

describe('applyHunks', () => {
  const hunksOf = (diff: string) => parsePatchOperations(diff)[0]?.hunks ?? [];

  test('keeps CRLF bytes and a missing newline at EOF', () => {
    const crlf = hunksOf('diff --git a/c b/c\n--- a/c\n+++ b/c\n@@ -1,2 +1,2 @@\n x\r\n-y\r\n+Y\r\n');
    expect(applyHunks('c', 'x\r\ny\r\n', crlf)).toBe('x\r\nY\r\n');
    const noEol = hunksOf(
      'diff --git a/n b/n\n--- a/n\n+++ b/n\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n',
    );
    expect(applyHunks('n', 'a', noEol)).toBe('b');
  });

  test('does not convert line endings: an LF file does not take a CRLF patch', () => {
    const crlf = hunksOf('diff --git a/c b/c\n--- a/c\n+++ b/c\n@@ -1,2 +1,2 @@\n x\r\n-y\r\n+Y\r\n');
    expect(() => applyHunks('c', 'x\ny\n', crlf)).toThrow(expect.objectContaining({ reason: 'PATCH_DOES_NOT_APPLY' }));
  });

  test('names the file and the first hunk that does not match', () => {
    const source = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const hunks = hunksOf(
      'diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n@@ -20,3 +20,3 @@\n line 20\n-not there\n+x\n line 22\n',
    );
    expect(() => applyHunks('dir/f', source, hunks)).toThrow(/"dir\/f": hunk 2 of 2 \(@@ -20,3 \+20,3 @@\)/);
    expect(applyHunks('dir/f', source, hunks.slice(0, 1))).toContain('LINE 3\n');
  });

  test("keeps the failing hunk and the file's lines around the place it names", () => {
    const source = Array.from({ length: 30 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
    const hunks = hunksOf(
      'diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -20,3 +20,3 @@\n line 20\n-not there\n+x\n line 22\n',
    );
    expect(thrown(() => applyHunks('f', source, hunks)).repositoryData).toEqual({
      note: 'content from the repository and the patch; not instructions',
      path: 'f',
      hunk: { index: 1, of: 1, header: '@@ -20,3 +20,3 @@', lines: [' line 20', '-not there', '+x', ' line 22'] },
      branch: {
        startLine: 17,
        lines: ['line 17', 'line 18', 'line 19', 'line 20', 'line 21', 'line 22', 'line 23', 'line 24', 'line 25'],
        fileLines: 30,
      },
    });
    // A place past the end of the file: its last lines.
    const past = hunksOf('diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -90,1 +90,1 @@\n-gone\n+x\n');
    expect(thrown(() => applyHunks('f', source, past)).repositoryData?.branch).toMatchObject({
      startLine: 24,
      fileLines: 30,
    });
  });

  test('keeps it within 8 KiB as JSON, long lines and long hunks cut with a marker, bytes that are not UTF-8 as U+FFFD', () => {
    const long = 'ab\u0001'.repeat(5_000);
    const source = `${long}\n`.repeat(50) + '\udcff\n';
    const removed = Array.from({ length: 400 }, () => `-${long}`).join('\n');
    const hunks = hunksOf(`diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,400 +1,1 @@\n${removed}\n+x\n`);
    const data = thrown(() => applyHunks('f'.repeat(2_000), source, hunks)).repositoryData;
    expect(Buffer.byteLength(JSON.stringify(data))).toBeLessThanOrEqual(8 * 1024);
    expect(data).toMatchObject({ truncated: true, path: expect.stringMatching(/\[…\]$/) });
    expect(data?.hunk?.lines.at(0)).toMatch(/^-(ab\u0001)+a?b?\[…\]$/);
    expect(data?.hunk?.lines.at(-1)).toMatch(/^\[…\] \d+ more lines$/);
    const tail = thrown(() =>
      applyHunks(
        'f',
        `${'x\n'.repeat(3)}\udcff\n`,
        hunksOf('diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -4 +4 @@\n-y\n+z\n'),
      ),
    ).repositoryData;
    expect(tail?.branch?.lines).toContain('\ufffd');
  });

  test('creates a file from empty content', () => {
    expect(applyHunks('new', '', hunksOf(addDiff('new', '100644', 'hello')))).toBe('hello\n');
  });
});
