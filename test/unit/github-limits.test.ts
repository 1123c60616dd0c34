/** GitHub's rate limits as the platform reads them from GitHub's answers, and its pacing of content-creating requests. */
import { GITHUB_CONTENT_LIMITS, contentShare } from '../../contract/limits';
import { GitHubLimits, rateLimitedUntil, type HttpErrorShape } from '../../src/adapters/github-api';
import { RetryAfterError } from '../../src/core/errors';

const NOW = Date.parse('2026-12-01T10:00:00Z');
const answer = (status: number, headers: Record<string, string> = {}, message = 'Forbidden'): HttpErrorShape => ({
  status,
  response: { headers, data: { message } },
});
const octokitError = (shape: HttpErrorShape) => Object.assign(new Error('HttpError'), shape);

describe('rateLimitedUntil', () => {
  it.each([
    [
      'retry-after in seconds',
      answer(403, { 'retry-after': '30' }, 'You have exceeded a secondary rate limit'),
      NOW + 30_000,
    ],
    ['retry-after as an HTTP date', answer(429, { 'retry-after': 'Tue, 01 Dec 2026 10:02:00 GMT' }), NOW + 120_000],
    [
      'a primary limit: remaining 0, until the reset',
      answer(
        403,
        { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(NOW / 1000 + 900) },
        'API rate limit exceeded',
      ),
      NOW + 900_000,
    ],
    [
      'a secondary limit naming no time: at least a minute',
      answer(403, {}, 'You have exceeded a secondary rate limit'),
      NOW + 60_000,
    ],
    ['a 429 naming no time', answer(429), NOW + 60_000],
  ])('%s', (_case, error, until) => {
    expect(rateLimitedUntil(error, NOW)).toBe(until);
  });

  it.each([
    [
      'a 403 for missing access',
      answer(403, { 'x-ratelimit-remaining': '4999' }, 'Resource not accessible by integration'),
    ],
    ['a 422', answer(422, { 'retry-after': '30' })],
    ['a 500', answer(500)],
  ])('is no limit for %s', (_case, error) => {
    expect(rateLimitedUntil(error, NOW)).toBeUndefined();
  });
});

describe('GitHubLimits', () => {
  it('after a rate-limited answer, admits no request before its time: the wait is a RetryAfterError with that time', () => {
    let now = NOW;
    const limits = new GitHubLimits({ clock: { now: () => now } });

    const limit = limits.observe(
      octokitError(answer(403, { 'retry-after': '30' }, 'secondary rate limit')),
      'GitHub acme/app',
    );

    expect(limit).toBeInstanceOf(RetryAfterError);
    expect(limit).toMatchObject({ limit: 'github-rate-limit', retryAt: NOW + 30_000 });
    expect(() => limits.admit('GET', 'GitHub acme/app')).toThrow(
      expect.objectContaining({ limit: 'github-rate-limit', retryAt: NOW + 30_000 }),
    );
    now += 30_000;
    expect(() => limits.admit('GET', 'GitHub acme/app')).not.toThrow();
    expect(limits.observe(octokitError(answer(404)), 'GitHub acme/app')).toBeUndefined();
  });

  it("opens a container's minute share back to back, then waits until the oldest leaves the minute; reads are not paced", () => {
    let now = NOW;
    const limits = new GitHubLimits({ contentShare: { perMinute: 3, perHour: 5 }, clock: { now: () => now } });

    for (const step of [0, 1_000, 1_000]) {
      now += step;
      limits.admit('POST', 'pr');
    }
    expect(() => limits.admit('POST', 'pr')).toThrow(
      expect.objectContaining({ limit: 'github-pacing', retryAt: NOW + 60_000 }),
    );
    expect(() => limits.admit('GET', 'pr')).not.toThrow();
    // The first has left the minute, not the second: one more now.
    now = NOW + 60_000;
    limits.admit('POST', 'pr');
    expect(() => limits.admit('POST', 'pr')).toThrow(expect.objectContaining({ retryAt: NOW + 61_000 }));
    now = NOW + 61_000;
    limits.admit('POST', 'pr');
    // Five in the hour: the next when the first of them leaves it.
    now = NOW + 200_000;
    expect(() => limits.admit('PATCH', 'pr')).toThrow(
      expect.objectContaining({ limit: 'github-pacing', retryAt: NOW + 3_600_000 }),
    );
    now = NOW + 3_600_000;
    expect(() => limits.admit('POST', 'pr')).not.toThrow();
  });

  it("shares GitHub's 500 an hour and 80 a minute between N containers, so that together they never pass them", () => {
    for (const containers of [1, 5, 7, 50, 80]) {
      const share = contentShare(containers);
      expect(share.perHour * containers).toBeLessThanOrEqual(GITHUB_CONTENT_LIMITS.perHour);
      expect(share.perMinute * containers).toBeLessThanOrEqual(GITHUB_CONTENT_LIMITS.perMinute);
      expect(share.perMinute).toBeGreaterThanOrEqual(1);
    }
    // A GitHub Enterprise allowing more an hour is still held to 80 a minute; a lower setting to itself.
    expect(contentShare(2, 100_000).perMinute * 2).toBeLessThanOrEqual(GITHUB_CONTENT_LIMITS.perMinute);
    expect(contentShare(1, 30)).toEqual({ perMinute: 30, perHour: 30 });
  });
});
