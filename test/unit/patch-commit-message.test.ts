import { commitMessage, hasJobTrailer } from '../../src/core/patch';

describe('commit message trailer', () => {
  test('the message ends with a blank line and the job trailer', () => {
    expect(commitMessage('Fix the parser\n\nDetails here.\n\n\n', 'job-1')).toBe('Fix the parser\n\nDetails here.\n\nAgent-Job-Id: job-1\n');
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
