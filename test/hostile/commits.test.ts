/**
 * Hostile commit fields and files git reads: what `git fsck --strict` would flag in a commit the
 * platform writes is refused on the first delivery (INVALID_JOB at the envelope, UNSAFE_PATCH in
 * the patch), the remote untouched (harness.ts).
 */
import { addFileDiff, applyPatchJob, hostileSuite, type HostileRow } from './harness';

const gitmodules =
  (...lines: string[]): HostileRow['message'] =>
  (ws) =>
    applyPatchJob(ws, { diff: addFileDiff('.gitmodules', lines) });

const ROWS: HostileRow[] = [
  {
    what: 'an author name that injects a committer header',
    message: (ws) =>
      applyPatchJob(ws, {
        author: { name: 'Eve\ncommitter Mallory <m@example.com> 0 +0000', email: 'eve@example.com' },
      }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must not contain control characters \(U\+000A\)/,
  },
  {
    what: 'an author name with "<>" (fsck: bad date)',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve <evil@example.com>', email: 'eve@example.com' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must not contain "<" or ">"/,
  },
  {
    what: 'an e-mail that closes the bracket',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve', email: 'eve@example.com> 0 +0000' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.email/,
  },
  {
    what: 'a message with NUL hiding the Agent-Job-Id trailer',
    message: (ws) => applyPatchJob(ws, { message: 'harmless\0\n\nAgent-Job-Id: someone-else' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must not contain NUL/,
  },
  {
    what: 'a message with terminal escapes',
    message: (ws) => applyPatchJob(ws, { message: 'fix\u001b[2J\u001b[H' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must not contain control characters/,
  },
  {
    what: 'a blank message',
    message: (ws) => applyPatchJob(ws, { message: '\n \t\n' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must not be blank/,
  },
  {
    what: 'a commit time before 1970 (fsck: date overflow)',
    message: (ws) => applyPatchJob(ws, {}, { createdAt: '1900-01-01T00:00:00Z' }),
    reason: 'INVALID_JOB',
    says: /createdAt must be 1970-01-01 or later/,
  },
  {
    what: 'a blank author name',
    message: (ws) => applyPatchJob(ws, { author: { name: ' \t ', email: 'eve@example.com' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must not be blank/,
  },
  {
    what: 'an author name with a lone surrogate (would be U+FFFD in the object)',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve \ud83d', email: 'eve@example.com' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must be well-formed Unicode/,
  },
  {
    what: 'an author name of 201 characters',
    message: (ws) => applyPatchJob(ws, { author: { name: 'E'.repeat(201), email: 'eve@example.com' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must be at most 200 characters/,
  },
  {
    what: 'an author name with a C1 control (U+009B, a terminal CSI)',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve\u009b2J', email: 'eve@example.com' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.name: must not contain control characters \(U\+009B\)/,
  },
  {
    what: 'an e-mail with a line break (a header injection)',
    message: (ws) =>
      applyPatchJob(ws, { author: { name: 'Eve', email: 'eve@example.com\ncommitter M <m@example.com> 0 +0000' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.email/,
  },
  {
    what: 'an e-mail that is no address',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve', email: 'not an address' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author\.email/,
  },
  {
    what: 'an author with a committer of its own (unknown field)',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve', email: 'eve@example.com', committer: 'Mallory' } }),
    reason: 'INVALID_JOB',
    says: /payload\.author.*committer/,
  },
  {
    what: 'a message of 10,001 characters',
    message: (ws) => applyPatchJob(ws, { message: 'm'.repeat(10_001) }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must be at most 10000 characters/,
  },
  {
    what: 'a message with a lone surrogate',
    message: (ws) => applyPatchJob(ws, { message: 'fix \udc00 it' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must be well-formed Unicode/,
  },
  {
    what: 'a message with DEL',
    message: (ws) => applyPatchJob(ws, { message: 'fix\u007f' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must not contain control characters other than tab and line breaks \(U\+007F\)/,
  },
  {
    what: 'a message with a form feed',
    message: (ws) => applyPatchJob(ws, { message: 'fix\fpage two' }),
    reason: 'INVALID_JOB',
    says: /payload\.message: must not contain control characters other than tab and line breaks \(U\+000C\)/,
  },
  {
    what: 'no message',
    message: (ws) => applyPatchJob(ws, { message: undefined }),
    reason: 'INVALID_JOB',
    says: /payload\.message/,
  },
  {
    what: 'a message that is not text',
    message: (ws) => applyPatchJob(ws, { message: ['fix'] }),
    reason: 'INVALID_JOB',
    says: /payload\.message/,
  },
  {
    what: 'a .gitmodules whose url starts with "-"',
    message: gitmodules('[submodule "x"]', '\tpath = x', '\turl = -u./payload'),
    reason: 'UNSAFE_PATCH',
    says: /writes \.gitmodules/,
  },
  {
    what: 'a .gitmodules whose name climbs out (../../x)',
    message: gitmodules('[submodule "../../x"]', '\tpath = x', '\turl = https://example.com/x.git'),
    reason: 'UNSAFE_PATCH',
    says: /writes \.gitmodules/,
  },
  {
    what: 'a .gitmodules whose path starts with "-"',
    message: gitmodules('[submodule "x"]', '\tpath = -x', '\turl = https://example.com/x.git'),
    reason: 'UNSAFE_PATCH',
    says: /writes \.gitmodules/,
  },
  {
    what: 'a .gitmodules with an update command',
    message: gitmodules('[submodule "x"]', '\tpath = x', '\turl = https://example.com/x.git', '\tupdate = !sh -c id'),
    reason: 'UNSAFE_PATCH',
    says: /writes \.gitmodules/,
  },
  {
    what: 'a .gitmodules in a sub-directory (fsck checks every one)',
    message: (ws) =>
      applyPatchJob(ws, { diff: addFileDiff('vendor/.gitmodules', ['[submodule "x"]', '\turl = -oProxyCommand=id']) }),
    reason: 'UNSAFE_PATCH',
    says: /"vendor\/\.gitmodules": writes \.gitmodules/,
  },
  {
    what: 'a .GITMODULES in another case (one file on macOS and Windows)',
    message: (ws) =>
      applyPatchJob(ws, { diff: addFileDiff('.GitModules', ['[submodule "x"]', '\turl = -u./payload']) }),
    reason: 'UNSAFE_PATCH',
    says: /"\.GitModules": writes \.gitmodules/,
  },
  {
    what: 'the NTFS short name of .gitmodules (GITMOD~1)',
    message: (ws) => applyPatchJob(ws, { diff: addFileDiff('GITMOD~1', ['[submodule "x"]', '\turl = -u./payload']) }),
    reason: 'UNSAFE_PATCH',
    says: /NTFS short name/,
  },
  {
    what: 'a .gitmodules with an HFS+ ignorable (.gitmodules on macOS)',
    message: (ws) =>
      applyPatchJob(ws, { diff: addFileDiff('.gitmodu\u200cles', ['[submodule "x"]', '\turl = -u./payload']) }),
    reason: 'UNSAFE_PATCH',
    says: /invisible character U\+200C/,
  },
  {
    what: 'a .gitmodules with a trailing dot (.gitmodules on Windows)',
    message: (ws) =>
      applyPatchJob(ws, { diff: addFileDiff('.gitmodules.', ['[submodule "x"]', '\turl = -u./payload']) }),
    reason: 'UNSAFE_PATCH',
    says: /ends with a dot or a space/,
  },
  {
    what: 'a file renamed to .gitmodules',
    message: (ws) =>
      applyPatchJob(ws, {
        diff: 'diff --git a/README.md b/.gitmodules\nsimilarity index 100%\nrename from README.md\nrename to .gitmodules\n',
      }),
    reason: 'UNSAFE_PATCH',
    says: /"\.gitmodules": writes \.gitmodules/,
  },
  {
    what: 'a .gitattributes line of 2,048 bytes or more',
    message: (ws) => applyPatchJob(ws, { diff: addFileDiff('.gitattributes', [`* ${'a'.repeat(3_000)}`]) }),
    reason: 'UNSAFE_PATCH',
    says: /line 1 is 3002 bytes/,
  },
];

describe('hostile commit fields and git files (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
