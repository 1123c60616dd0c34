/**
 * Hostile commit fields and files git reads: what `git fsck --strict` would flag in a commit the
 * platform writes is refused on the first delivery (INVALID_JOB at the envelope, UNSAFE_PATCH in
 * the patch), the remote untouched (harness.ts).
 */
import { addFileDiff, applyPatchJob, hostileSuite, type HostileRow } from './harness';

const gitmodules = (...lines: string[]): HostileRow['message'] => (ws) => applyPatchJob(ws, { diff: addFileDiff('.gitmodules', lines) });

const ROWS: HostileRow[] = [
  {
    what: 'an author name that injects a committer header',
    message: (ws) => applyPatchJob(ws, { author: { name: 'Eve\ncommitter Mallory <m@example.com> 0 +0000', email: 'eve@example.com' } }),
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
  { what: 'a .gitmodules whose url starts with "-"', message: gitmodules('[submodule "x"]', '\tpath = x', '\turl = -u./payload'), reason: 'UNSAFE_PATCH', says: /writes \.gitmodules/ },
  { what: 'a .gitmodules whose name climbs out (../../x)', message: gitmodules('[submodule "../../x"]', '\tpath = x', '\turl = https://example.com/x.git'), reason: 'UNSAFE_PATCH', says: /writes \.gitmodules/ },
  { what: 'a .gitmodules whose path starts with "-"', message: gitmodules('[submodule "x"]', '\tpath = -x', '\turl = https://example.com/x.git'), reason: 'UNSAFE_PATCH', says: /writes \.gitmodules/ },
  { what: 'a .gitmodules with an update command', message: gitmodules('[submodule "x"]', '\tpath = x', '\turl = https://example.com/x.git', '\tupdate = !sh -c id'), reason: 'UNSAFE_PATCH', says: /writes \.gitmodules/ },
  { what: 'a .gitmodules in a sub-directory (fsck checks every one)', message: (ws) => applyPatchJob(ws, { diff: addFileDiff('vendor/.gitmodules', ['[submodule "x"]', '\turl = -oProxyCommand=id']) }), reason: 'UNSAFE_PATCH', says: /"vendor\/\.gitmodules": writes \.gitmodules/ },
  { what: 'a .gitattributes line of 2,048 bytes or more', message: (ws) => applyPatchJob(ws, { diff: addFileDiff('.gitattributes', [`* ${'a'.repeat(3_000)}`]) }), reason: 'UNSAFE_PATCH', says: /line 1 is 3002 bytes/ },
];

describe('hostile commit fields and git files (sequencer, first delivery)', () => {
  const suite = hostileSuite();

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
