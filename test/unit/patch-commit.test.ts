import { commitFields, commitMessage, hasJobTrailer, preparePatchCommit } from '../../src/core/patch';

describe('commit message trailer', () => {
  test('the message ends with a blank line and the job trailer', () => {
    expect(commitMessage('Fix the parser\n\nDetails here.\n\n\n', 'job-1')).toBe(
      'Fix the parser\n\nDetails here.\n\nAgent-Job-Id: job-1\n',
    );
  });

  test('a message made by commitMessage carries exactly its own job id', () => {
    const message = commitMessage('Edit', 'job-1');
    expect(hasJobTrailer(message, 'job-1')).toBe(true);
    expect(hasJobTrailer(message, 'job-10')).toBe(false);
    expect(hasJobTrailer(message, 'job')).toBe(false);
  });

  test('only the last paragraph counts: a trailer quoted in the body is not the job', () => {
    const message = commitMessage('Revert\n\nAgent-Job-Id: job-7\nwas wrong', 'job-8');
    expect(hasJobTrailer(message, 'job-7')).toBe(false);
    expect(hasJobTrailer(message, 'job-8')).toBe(true);
  });

  test('other trailers may sit next to it', () => {
    expect(hasJobTrailer('Edit\n\nSigned-off-by: A <a@b>\nAgent-Job-Id: job-2\n', 'job-2')).toBe(true);
  });
});

describe('commit fields, checked again before any object is written', () => {
  const request = { jobId: 'job-1', message: 'Edit', createdAt: '2026-03-01T12:00:00.000Z' };

  test('the job author, or the platform, at the job time in UTC', () => {
    expect(commitFields({ ...request, author: { name: 'Agent', email: 'agent@example.com' } })).toEqual({
      message: 'Edit\n\nAgent-Job-Id: job-1\n',
      author: { name: 'Agent', email: 'agent@example.com', timestamp: 1772366400, timezoneOffset: 0 },
      committer: { name: 'Agent', email: 'agent@example.com', timestamp: 1772366400, timezoneOffset: 0 },
    });
    expect(commitFields(request).author.name).toBe('agent-jobs');
  });

  test.each([
    [
      'a header injected through the author name',
      { author: { name: 'Eve\ncommitter X <x@y> 0 +0000', email: 'e@x.com' } },
      /invalid commit: author\.name: must not contain control characters/,
    ],
    [
      'an e-mail that closes the bracket',
      { author: { name: 'Eve', email: 'e@x.com> 1 +0000' } },
      /invalid commit: author\.email/,
    ],
    ['a NUL hiding the trailer', { message: 'fix\0' }, /invalid commit: message: must not contain NUL/],
    [
      'a time before the epoch',
      { createdAt: '1900-01-01T00:00:00Z' },
      /invalid commit: createdAt: must be 1970-01-01 or later/,
    ],
  ])('refuses %s as INVALID_JOB', (_what, change, problem) => {
    expect(() => commitFields({ ...request, ...change })).toThrow(
      expect.objectContaining({ reason: 'INVALID_JOB', message: expect.stringMatching(problem) }),
    );
  });

  test('a branch git would misread is refused with the patch, before anything else', () => {
    const diff = 'diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+x\n';
    expect(() =>
      preparePatchCommit({ ...request, repoUrl: 'https://git.example.com/a.git', branch: 'HEAD', diff }),
    ).toThrow(/invalid commit: branch: must name a branch, not HEAD/);
  });
});
