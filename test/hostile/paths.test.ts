/**
 * Hostile paths and modes: every name a clone could not check out, or that git gives a meaning,
 * is refused as UNSAFE_PATCH on the first delivery, the remote untouched (harness.ts); the
 * README's recovery for it, followed step by step, makes the workspace usable again.
 */
import { runbookAdvice } from '../../tools/operator';
import { addFileDiff, applyPatchJob, hostileSuite, type HostileRow } from './harness';

const modifyReadme = (name: string) =>
  `diff --git a/${name} b/${name}\n--- a/${name}\n+++ b/${name}\n@@ -1 +1 @@\n-# hostile\n+# changed\n`;
const add =
  (path: string): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, { diff: addFileDiff(path) });
const diff =
  (text: string): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, { diff: text });
const deepPath = Array.from({ length: 25 }, (_, i) => `${i}`.padEnd(200, 'd')).join('/');

const ROWS: HostileRow[] = [
  { what: 'a 300-byte name', message: add('x'.repeat(300)), reason: 'UNSAFE_PATCH', says: /a name of 300 bytes/ },
  { what: 'a 5,024-byte path', message: add(deepPath), reason: 'UNSAFE_PATCH', says: /path is 5024 bytes/ },
  {
    what: '".git." (".git" on Windows)',
    message: add('.git./hooks/post-checkout'),
    reason: 'UNSAFE_PATCH',
    says: /is "\.git" on Windows/,
  },
  {
    what: '".git " (".git" on Windows)',
    message: add('.git /config'),
    reason: 'UNSAFE_PATCH',
    says: /is "\.git" on Windows/,
  },
  {
    what: 'the NTFS short name GIT~1',
    message: add('GIT~1/config'),
    reason: 'UNSAFE_PATCH',
    says: /"GIT~1" is "\.git" on Windows/,
  },
  {
    what: 'an NTFS stream of .git',
    message: add('.git::$INDEX_ALLOCATION/config'),
    reason: 'UNSAFE_PATCH',
    says: /is "\.git" on Windows/,
  },
  {
    what: 'a zero-width joiner in ".git" (".git" on macOS)',
    message: add('.gi\u200dt/config'),
    reason: 'UNSAFE_PATCH',
    says: /invisible character U\+200D/,
  },
  {
    what: 'an HFS+ ignorable in ".git"',
    message: add('.g\u206ait/config'),
    reason: 'UNSAFE_PATCH',
    says: /invisible character U\+206A/,
  },
  { what: '".GIT" in any case', message: add('src/.GIT/config'), reason: 'UNSAFE_PATCH', says: /"\.git" segment/ },
  {
    what: 'a Windows device name',
    message: add('docs/aux.md'),
    reason: 'UNSAFE_PATCH',
    says: /device name reserved on Windows/,
  },
  { what: 'a name Windows forbids', message: add('a:b.txt'), reason: 'UNSAFE_PATCH', says: /":" in a name/ },
  { what: 'a trailing dot', message: add('notes.'), reason: 'UNSAFE_PATCH', says: /ends with a dot or a space/ },
  { what: 'an NTFS short name', message: add('PROGRA~1/x.txt'), reason: 'UNSAFE_PATCH', says: /NTFS short name/ },
  {
    what: 'a name that is README.md on macOS and Windows',
    message: add('readme.MD'),
    reason: 'UNSAFE_PATCH',
    says: /differ only in case/,
  },
  { what: 'a path through ".."', message: add('../outside.txt'), reason: 'UNSAFE_PATCH', says: /"\.\." segment/ },
  {
    what: 'an absolute path',
    message: diff(modifyReadme('/etc/passwd')),
    reason: 'UNSAFE_PATCH',
    says: /absolute path/,
  },
  { what: 'a .gitmodules', message: add('.gitmodules'), reason: 'UNSAFE_PATCH', says: /writes \.gitmodules/ },
  {
    what: 'a symlink',
    message: diff(
      'diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n',
    ),
    reason: 'UNSAFE_PATCH',
    says: /symlinks \(mode 120000\)/,
  },
  {
    what: 'a submodule',
    message: diff(
      'diff --git a/sub b/sub\nnew file mode 160000\n--- /dev/null\n+++ b/sub\n@@ -0,0 +1 @@\n+Subproject commit 1111111111111111111111111111111111111111\n',
    ),
    reason: 'UNSAFE_PATCH',
    says: /submodules \(mode 160000\)/,
  },
  {
    what: 'mode 100777',
    message: diff('diff --git a/README.md b/README.md\nold mode 100644\nnew mode 100777\n'),
    reason: 'UNSAFE_PATCH',
    says: /mode 100777 is not allowed/,
  },
  {
    what: 'a file turned into a symlink by a mode change',
    message: diff('diff --git a/README.md b/README.md\nold mode 100644\nnew mode 120000\n'),
    reason: 'UNSAFE_PATCH',
    says: /symlinks \(mode 120000\)/,
  },
  {
    what: 'a file turned into a submodule by a mode change',
    message: diff('diff --git a/README.md b/README.md\nold mode 100644\nnew mode 160000\n'),
    reason: 'UNSAFE_PATCH',
    says: /submodules \(mode 160000\)/,
  },
  {
    what: "a new file with a tree's mode (040000)",
    message: diff('diff --git a/dir b/dir\nnew file mode 040000\n--- /dev/null\n+++ b/dir\n@@ -0,0 +1 @@\n+x\n'),
    reason: 'UNSAFE_PATCH',
    says: /mode 040000 is not allowed/,
  },
  {
    what: 'a group-writable mode (100664, fsck: zero-padded or bad mode)',
    message: diff('diff --git a/g.txt b/g.txt\nnew file mode 100664\n--- /dev/null\n+++ b/g.txt\n@@ -0,0 +1 @@\n+x\n'),
    reason: 'UNSAFE_PATCH',
    says: /mode 100664 is not allowed/,
  },
  {
    what: 'a zero-padded mode (0100644)',
    message: diff('diff --git a/z.txt b/z.txt\nnew file mode 0100644\n--- /dev/null\n+++ b/z.txt\n@@ -0,0 +1 @@\n+x\n'),
    reason: 'UNSAFE_PATCH',
    says: /mode 0100644 is not allowed/,
  },
  {
    what: 'a symlink mode on the index line',
    message: diff(
      'diff --git a/README.md b/README.md\nindex 1111111..2222222 120000\n--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# hostile\n+/etc/passwd\n',
    ),
    reason: 'UNSAFE_PATCH',
    says: /symlinks \(mode 120000\)/,
  },
  {
    what: 'a deletion that calls a file a symlink',
    message: diff(
      'diff --git a/README.md b/README.md\ndeleted file mode 120000\n--- a/README.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# hostile\n',
    ),
    reason: 'UNSAFE_PATCH',
    says: /symlinks \(mode 120000\)/,
  },
  {
    what: 'a mode that is not octal',
    message: diff('diff --git a/o.txt b/o.txt\nnew file mode 10064x\n--- /dev/null\n+++ b/o.txt\n@@ -0,0 +1 @@\n+x\n'),
    reason: 'UNSAFE_PATCH',
    says: /malformed mode line "new file mode 10064x": a mode is octal digits/,
  },
  {
    what: 'a GIT binary patch',
    message: diff(
      'diff --git a/img.png b/img.png\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 3\nKcmZ>Y%K!iX1ONm8\n\nliteral 0\nHcmV?d00001\n\n',
    ),
    reason: 'UNSAFE_PATCH',
    says: /binary patches/,
  },
];

describe('hostile paths and modes (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});

describe("the README's advice for an unsafe patch, followed in its order", () => {
  const suite = hostileSuite();

  it('the workspace is BLOCKED, as the row says; its recovery unblocks before the fixed patch is sent again, which then applies', async () => {
    const ws = await suite.newWorkspace();
    const unsafe = applyPatchJob(ws, { diff: addFileDiff('.git/hooks/post-checkout') });
    await suite.sendRaw(ws, unsafe);
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });
    expect(await suite.ledger().getWorkspace(ws.workspaceId)).toMatchObject({
      state: 'BLOCKED',
      blockedBy: unsafe.jobId,
      blockedReason: 'UNSAFE_PATCH',
    });

    const advice = runbookAdvice('UNSAFE_PATCH');
    expect(advice?.blocksWorkspace).toBe(true);
    // Sent before the unblock, the fixed patch would be SKIPPED behind the fence: the steps come in that order.
    const recovery = advice?.recovery ?? '';
    const unblockAt = recovery.indexOf('`workspace unblock <id> --drop`');
    expect({ recovery, unblockFirst: unblockAt >= 0 && unblockAt < recovery.indexOf('new job id') }).toEqual({
      recovery,
      unblockFirst: true,
    });

    const unblock = await suite.cli('workspace', 'unblock', ws.workspaceId, '--drop');
    expect({ code: unblock.code, stderr: unblock.stderr }).toEqual({ code: 0, stderr: '' });
    const fixed = applyPatchJob(ws, { diff: addFileDiff('hooks-moved/post-checkout', ['fixed']) });
    await suite.sendRaw(ws, fixed);
    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });
    expect(await suite.ledger().getJob(fixed.jobId)).toMatchObject({ status: 'SUCCEEDED' });
  });
});
