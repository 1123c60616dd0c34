/**
 * What git accepts in what the platform writes, at the edge: the envelope refuses a branch name or
 * commit field that git would refuse or misread (contract/git-objects.ts), naming the field.
 */
import { parseEnvelope } from '../../src/core/envelope';
import { InvalidJobError } from '../../src/core/errors';

const patch = {
  jobId: 'job-1',
  workspaceId: 'ws-1',
  tenantId: 'acme',
  type: 'apply_patch',
  createdAt: '2026-11-29T10:00:00.000Z',
  payload: {
    repo: { url: 'https://git.example.com/acme/app.git', branch: 'agent/ws-1' },
    diff: 'diff --git a/x b/x\n',
    message: 'Fix it',
  },
} as const;

function refusal(change: { payload?: Record<string, unknown>; envelope?: Record<string, unknown> }): string {
  try {
    parseEnvelope({ ...patch, ...change.envelope, payload: { ...patch.payload, ...change.payload } });
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidJobError);
    return (error as Error).message;
  }
  throw new Error('expected the envelope to be refused');
}

const withBranch = (branch: string) => ({ payload: { repo: { ...patch.payload.repo, branch } } });
const withAuthor = (name: string, email = 'agent@example.com') => ({ payload: { author: { name, email } } });

describe('branch names', () => {
  test.each([
    ['HEAD', 'HEAD', /payload\.repo\.branch: must name a branch, not HEAD/],
    ['a full ref', 'refs/heads/main', /payload\.repo\.branch: must be a branch name, not a ref: use "main"/],
    ['a leading dash', '-f', /must not start with "-"/],
    ['a component starting with a dot', 'agent/.hidden', /component starting with "\."/],
    ['a .lock component inside', 'a.lock/b', /component ending with "\.lock"/],
    ['a trailing dot', 'agent.', /must not end with "\."/],
    ['".."', 'a..b', /must not contain "\.\."/],
    ['"//"', 'a//b', /"\/\/"/],
    ['a trailing slash', 'agent/', /must not start or end with "\/"/],
    ['a space', 'my branch', /may only contain/],
    ['a reflog expression', 'main@{1}', /may only contain/],
    ['201 characters', 'b'.repeat(201), /at most 200 characters/],
  ])('refuses %s', (_what, branch, problem) => {
    expect(refusal(withBranch(branch))).toMatch(problem);
  });

  test.each(['main', 'agent/ws-1', 'release/1.2.x', 'feature/HEAD-less', 'x.lockfile'])('accepts %s', (branch) => {
    expect(parseEnvelope({ ...patch, payload: { ...patch.payload, ...withBranch(branch).payload } })).toMatchObject({
      payload: { repo: { branch } },
    });
  });

  test("open_pr's base branch follows the same rules", () => {
    const openPr = { ...patch, type: 'open_pr', payload: { baseBranch: 'HEAD', title: 'x' } };
    expect(() => parseEnvelope(openPr)).toThrow(/payload\.baseBranch: must name a branch, not HEAD/);
  });
});

describe('commit fields (what git fsck --strict accepts)', () => {
  test.each([
    [
      'a newline in the author name (a header injection)',
      withAuthor('Eve\ncommitter Mallory <m@example.com> 0 +0000'),
      /payload\.author\.name: must not contain control characters \(U\+000A\)/,
    ],
    [
      '"<" in the author name',
      withAuthor('Eve <evil@example.com>'),
      /payload\.author\.name: must not contain "<" or ">"/,
    ],
    ['a blank author name', withAuthor('   '), /payload\.author\.name: must not be blank/],
    ['an ESC in the author name', withAuthor('Eve\u001b[2J'), /U\+001B/],
    ['a lone surrogate in the author name', withAuthor('Eve \ud800'), /well-formed Unicode/],
    ['">" in the e-mail address', withAuthor('Eve', 'eve@example.com>'), /payload\.author\.email/],
    [
      'a NUL in the message (it hides the trailer)',
      { payload: { message: 'fix\0Agent-Job-Id: other' } },
      /payload\.message: must not contain NUL/,
    ],
    ['a blank message', { payload: { message: ' \n\t' } }, /payload\.message: must not be blank/],
    [
      'an ESC in the message',
      { payload: { message: 'fix \u001b]0;pwned\u0007' } },
      /payload\.message: must not contain control characters other than tab and line breaks \(U\+001B\)/,
    ],
    [
      'a lone surrogate in the message',
      { payload: { message: 'fix \udc00' } },
      /payload\.message: must be well-formed Unicode/,
    ],
    [
      'a createdAt before 1970 (git dates start at the epoch)',
      { envelope: { createdAt: '1969-12-31T23:59:59Z' } },
      /createdAt: createdAt must be 1970-01-01 or later/,
    ],
  ])('refuses %s', (_what, change, problem) => {
    expect(refusal(change)).toMatch(problem);
  });

  test('accepts what git accepts: Unicode, quotes, tabs, CRLF and an emoji', () => {
    const job = parseEnvelope({
      ...patch,
      createdAt: '1970-01-01T00:00:00Z',
      payload: {
        ...patch.payload,
        author: { name: 'José O\'Brien "JB" 😀', email: 'jose@example.com' },
        message: 'Fix\tit\r\n\r\nBody 😀\n',
      },
    });
    expect(job).toMatchObject({ payload: { author: { name: 'José O\'Brien "JB" 😀' } } });
  });
});
