/**
 * Encodings: a patch reaches the tree byte for byte whatever its encoding (Latin-1, stray bytes,
 * characters outside the BMP, CRLF), inline as text or base64 or by reference, exactly as `git
 * apply` makes it; a diff that cannot be read as what it claims is refused on the first delivery
 * with the reason, the remote untouched (harness.ts).
 */
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { gitApplyTree } from '../support/git-fixtures';
import {
  addFileDiff,
  applyPatchJob,
  fsckStrict,
  gitIn,
  hostileSuite,
  type HostileRow,
  type HostileSuite,
  type HostileWorkspace,
} from './harness';

const latin1 = (text: string) => Buffer.from(text, 'latin1');
const utf8 = (text: string) => Buffer.from(text, 'utf8');

/** Edits legacy/latin1.txt (Latin-1 bytes in the base commit) with a Latin-1 hunk. */
const LATIN1_EDIT = latin1(
  'diff --git a/legacy/latin1.txt b/legacy/latin1.txt\n--- a/legacy/latin1.txt\n+++ b/legacy/latin1.txt\n@@ -1,2 +1,2 @@\n-caf\xe9\n+caf\xe9 cr\xe8me br\xfbl\xe9e\n na\xefve\n',
);
/** A new file mixing an emoji, U+FFFE, CRLF, a BOM and a byte that is not UTF-8. */
const MIXED_ADD = Buffer.concat([
  utf8(
    'diff --git a/notes/mixed.txt b/notes/mixed.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes/mixed.txt\n@@ -0,0 +1,3 @@\n+\ufeffship it \u{1f680}\r\n+non-character \ufffe here\r\n+stray ',
  ),
  Buffer.from([0x93, 0xff, 0x94]),
  utf8('\n'),
]);
const EMOJI_ADD = utf8(
  'diff --git a/docs/\u{1f600}.md b/docs/\u{1f600}.md\nnew file mode 100644\n--- /dev/null\n+++ b/docs/\u{1f600}.md\n@@ -0,0 +1 @@\n+\u{1f9ea} tests \u{1f680}\n',
);

type Send = (ws: HostileWorkspace, suite: HostileSuite) => Promise<{ jobId: string }>;
const inline =
  (diff: Buffer, field: 'diff' | 'diffBase64'): Send =>
  async (ws, suite) => {
    const message = applyPatchJob(
      ws,
      field === 'diff' ? { diff: diff.toString('utf8') } : { diff: undefined, diffBase64: diff.toString('base64') },
    );
    await suite.sendRaw(ws, message);
    return message;
  };
const byReference =
  (diff: Buffer): Send =>
  async (ws, suite) => {
    const message = applyPatchJob(ws, { diff: undefined });
    const diffRef = await suite.diffStore().put(`${ws.workspaceId}/${message.jobId}`, diff);
    const body = message.body as { payload: Record<string, unknown> };
    await suite.sendRaw(ws, { ...message, body: { ...body, payload: { ...body.payload, diffRef } } });
    return message;
  };

describe('a patch reaches the tree byte for byte (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each<[string, Buffer, Send]>([
    ['a Latin-1 edit of a Latin-1 file, as diffBase64', LATIN1_EDIT, inline(LATIN1_EDIT, 'diffBase64')],
    ['an emoji, U+FFFE, CRLF, a BOM and stray bytes, as diffBase64', MIXED_ADD, inline(MIXED_ADD, 'diffBase64')],
    [
      'an emoji in the name and the content, as diff text (ASCII JSON on the queue)',
      EMOJI_ADD,
      inline(EMOJI_ADD, 'diff'),
    ],
    ['a Latin-1 edit by reference (claim-check)', LATIN1_EDIT, byReference(LATIN1_EDIT)],
  ])('%s: the tree is the one git apply makes', async (_what, diff, send) => {
    const ws = await suite.newWorkspace();
    const job = await send(ws, suite);

    expect(await suite.deliverOnce()).toEqual({ batchItemFailures: [] });

    expect(await suite.ledger().getJob(job.jobId)).toMatchObject({ status: 'SUCCEEDED', attempt: 1 });
    expect(await gitIn(ws.gitDir, 'rev-parse', 'main^{tree}')).toBe(await gitApplyTree(ws.gitDir, ws.baseSha, diff));
    await fsckStrict(ws.gitDir);
  });
});

const refused =
  (payload: Record<string, unknown>): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, payload);
const tamperedReference: HostileRow['message'] = async (ws, suite) => {
  const message = applyPatchJob(ws, { diff: undefined });
  const diffRef = await suite.diffStore().put(`${ws.workspaceId}/${message.jobId}`, LATIN1_EDIT);
  // The object is replaced after the reference was made: the consumer must not apply other bytes.
  await suite
    .emulators()
    .clients.s3.send(new PutObjectCommand({ Bucket: diffRef.bucket, Key: diffRef.key, Body: MIXED_ADD }));
  const body = message.body as { payload: Record<string, unknown> };
  return { ...message, body: { ...body, payload: { ...body.payload, diffRef } } };
};

/** A new-file diff whose name is the given bytes, as diffBase64. */
const nameBytes = (name: number[]) => {
  const n = Buffer.from(name);
  return Buffer.concat([
    latin1('diff --git a/'),
    n,
    latin1(' b/'),
    n,
    latin1('\nnew file mode 100644\n--- /dev/null\n+++ b/'),
    n,
    latin1('\n@@ -0,0 +1 @@\n+x\n'),
  ]).toString('base64');
};

const ROWS: HostileRow[] = [
  {
    what: 'a diff string with a lone surrogate',
    message: refused({ diff: 'diff --git a/x b/x\n+\ud800\n' }),
    reason: 'INVALID_JOB',
    says: /payload\.diff: must be well-formed Unicode text: send bytes that are not UTF-8 as diffBase64/,
  },
  {
    what: 'diffBase64 with stray bits (two spellings of one byte)',
    message: refused({ diff: undefined, diffBase64: 'eR==' }),
    reason: 'INVALID_JOB',
    says: /payload\.diffBase64: must be canonical base64/,
  },
  {
    what: 'diffBase64 that is not base64',
    message: refused({ diff: undefined, diffBase64: '@@ -1 +1 @@' }),
    reason: 'INVALID_JOB',
    says: /payload\.diffBase64: must be canonical base64/,
  },
  {
    what: 'both diff and diffBase64',
    message: refused({ diffBase64: LATIN1_EDIT.toString('base64') }),
    reason: 'INVALID_JOB',
    says: /exactly one of diff, diffBase64 or diffRef/,
  },
  {
    what: 'a file name whose bytes are not UTF-8',
    message: refused({
      diff: undefined,
      diffBase64: Buffer.concat([
        latin1(
          'diff --git a/caf\xe9 b/caf\xe9\nnew file mode 100644\n--- /dev/null\n+++ b/caf\xe9\n@@ -0,0 +1 @@\n+x\n',
        ),
      ]).toString('base64'),
    }),
    reason: 'UNSAFE_PATCH',
    says: /name is not valid UTF-8/,
  },
  {
    what: 'a body that is not JSON',
    message: (ws) => ({ jobId: `hostile-${ws.workspaceId}`, body: '{"jobId": "x", "diff": "\\ud83d' }),
    reason: 'INVALID_JOB',
    says: /body is not JSON/,
  },
  {
    what: 'a claim-checked diff whose object was replaced',
    message: tamperedReference,
    reason: 'INVALID_JOB',
    says: /does not match its size or sha256/,
  },
  {
    what: 'a name with an overlong UTF-8 encoding of "/" (C0 AF)',
    message: refused({ diff: undefined, diffBase64: nameBytes([0x2e, 0x2e, 0xc0, 0xaf, 0x78]) }),
    reason: 'UNSAFE_PATCH',
    says: /name is not valid UTF-8/,
  },
  {
    what: 'a name with a UTF-8-encoded surrogate (ED A0 80)',
    message: refused({ diff: undefined, diffBase64: nameBytes([0x78, 0xed, 0xa0, 0x80]) }),
    reason: 'UNSAFE_PATCH',
    says: /name is not valid UTF-8/,
  },
  {
    what: 'a git-quoted name whose octal escapes are Latin-1 ("caf\\351")',
    message: refused({
      diff: 'diff --git "a/caf\\351.txt" "b/caf\\351.txt"\nnew file mode 100644\n--- /dev/null\n+++ "b/caf\\351.txt"\n@@ -0,0 +1 @@\n+x\n',
    }),
    reason: 'UNSAFE_PATCH',
    says: /name is not valid UTF-8/,
  },
  {
    what: 'a diff in UTF-16 (every other byte NUL)',
    message: refused({
      diff: undefined,
      diffBase64: Buffer.from(`\ufeff${addFileDiff('utf16.txt')}`, 'utf16le').toString('base64'),
    }),
    reason: 'INVALID_JOB',
    says: /diff is not a valid unified diff: a file section has no ---\/\+\+\+ or diff --git header/,
  },
  { what: 'an empty diff', message: refused({ diff: '' }), reason: 'INVALID_JOB', says: /payload\.diff: Too small/ },
  {
    what: 'a diffRef whose object is missing',
    message: (ws, suite) =>
      applyPatchJob(ws, {
        diff: undefined,
        diffRef: {
          bucket: suite.emulators().bucketName,
          key: `${ws.workspaceId}/never-put`,
          sha256: 'a'.repeat(64),
          bytes: 10,
        },
      }),
    reason: 'INVALID_JOB',
    says: /diffRef s3:\/\/.*\/never-put does not exist/,
  },
  {
    what: 'a diffRef to another bucket',
    message: refused({
      diff: undefined,
      diffRef: { bucket: 'someone-elses', key: 'k', sha256: 'a'.repeat(64), bytes: 1 },
    }),
    reason: 'INVALID_JOB',
    says: /diffRef bucket someone-elses is not the diff bucket/,
  },
];

describe('diffs that cannot be read as what they claim (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
