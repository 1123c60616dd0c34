import { Octokit } from '@octokit/core';
import { parseRepoUrl } from '../../src/adapters/github-api';
import { GitHubPullRequestHost } from '../../src/adapters/github-pr-host';
import { PermanentJobError, TransientJobError } from '../../src/core/errors';
import { classifyFailure } from '../../src/core/pipeline';

describe('parseRepoUrl', () => {
  it.each([
    ['https://github.com/acme/widgets', 'acme', 'widgets'],
    ['https://github.com/acme/widgets.git', 'acme', 'widgets'],
    ['https://github.com/acme/widgets.git/', 'acme', 'widgets'],
    ['https://ghe.example.com/team-1/svc.api', 'team-1', 'svc.api'],
  ])('%s -> %s/%s', (url, owner, repo) => {
    expect(parseRepoUrl(url)).toEqual({ owner, repo });
  });

  it.each([
    'not a url',
    'https://github.com/acme',
    'https://github.com/acme/widgets/tree/main',
    'https://github.com/acme/.git',
  ])('rejects %s permanently, naming the URL', (url) => {
    const error = captureError(() => parseRepoUrl(url));
    expect(error).toBeInstanceOf(PermanentJobError);
    expect((error as PermanentJobError).reason).toBe('INVALID_JOB');
    expect(error.message).toMatch(/not (a URL|of the form)/);
  });
});

/**
 * GitHub has no local stand-in, so these cases script its answers through Octokit's injectable
 * fetch (a mock). The loopback fake in test/support/fake-github.ts covers the same flow over HTTP.
 */
type Answer = { status: number; body: unknown; headers?: Record<string, string> } | Error;

function scriptedHost(answers: Answer[]): { host: GitHubPullRequestHost; calls: { method: string; url: string }[] } {
  const calls: { method: string; url: string }[] = [];
  const fetch = async (url: string, init: { method: string }): Promise<Response> => {
    calls.push({ method: init.method, url });
    const answer = answers.shift();
    if (!answer) throw new Error(`unexpected request ${init.method} ${url}`);
    if (answer instanceof Error) throw answer;
    return new Response(JSON.stringify(answer.body), {
      status: answer.status,
      headers: { 'content-type': 'application/json', ...answer.headers },
    });
  };
  const quiet = () => undefined;
  const log = { debug: quiet, info: quiet, warn: quiet, error: quiet };
  const octokit = new Octokit({ baseUrl: 'https://ghe.example/api/v3', request: { fetch }, log });
  return { host: new GitHubPullRequestHost(async () => octokit), calls };
}

const input = {
  repoUrl: 'https://github.com/acme/widgets.git',
  head: 'agent/ws-1',
  base: 'main',
  title: 'Agent changes',
};
const pull = (number: number) => ({ number, html_url: `https://github.com/acme/widgets/pull/${number}` });
const alreadyExists = {
  status: 422,
  body: {
    message: 'Validation Failed',
    errors: [
      { resource: 'PullRequest', code: 'custom', message: 'A pull request already exists for acme:agent/ws-1.' },
    ],
  },
};

describe('GitHubPullRequestHost', () => {
  it('returns the open PR of the head branch without creating one', async () => {
    const { host, calls } = scriptedHost([{ status: 200, body: [pull(7)] }]);

    await expect(host.findOrCreate(input)).resolves.toEqual({ number: 7, url: pull(7).html_url, created: false });

    expect(calls).toHaveLength(1);
    const url = new URL(calls[0]!.url);
    expect(url.origin + url.pathname).toBe('https://ghe.example/api/v3/repos/acme/widgets/pulls');
    expect(url.searchParams.get('head')).toBe('acme:agent/ws-1');
    expect(url.searchParams.get('state')).toBe('open');
  });

  it('creates the PR when none is open', async () => {
    const { host, calls } = scriptedHost([
      { status: 200, body: [] },
      { status: 201, body: pull(8) },
    ]);

    await expect(host.findOrCreate(input)).resolves.toEqual({ number: 8, url: pull(8).html_url, created: true });
    expect(calls.map((c) => c.method)).toEqual(['GET', 'POST']);
  });

  it('treats 422 "already exists" as a race and finds the PR again', async () => {
    const { host, calls } = scriptedHost([{ status: 200, body: [] }, alreadyExists, { status: 200, body: [pull(9)] }]);

    await expect(host.findOrCreate(input)).resolves.toEqual({ number: 9, url: pull(9).html_url, created: false });
    expect(calls.map((c) => c.method)).toEqual(['GET', 'POST', 'GET']);
  });

  it('retries later when GitHub says it exists but does not list it yet', async () => {
    const { host } = scriptedHost([{ status: 200, body: [] }, alreadyExists, { status: 200, body: [] }]);

    await expect(host.findOrCreate(input)).rejects.toBeInstanceOf(TransientJobError);
  });

  it("fails permanently on any other 422, with GitHub's message", async () => {
    const { host } = scriptedHost([
      { status: 200, body: [] },
      {
        status: 422,
        body: {
          message: 'Validation Failed',
          errors: [{ resource: 'PullRequest', code: 'custom', message: 'No commits between main and agent/ws-1' }],
        },
      },
    ]);

    const error = await host.findOrCreate(input).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentJobError);
    expect((error as PermanentJobError).reason).toBe('REJECTED_BY_TARGET');
    expect((error as Error).message).toMatch(/No commits between main and agent\/ws-1/);
  });

  it.each<[string, Answer]>([
    ['a 502', { status: 502, body: { message: 'Bad Gateway' } }],
    ['a 429', { status: 429, body: { message: 'Too Many Requests' } }],
    [
      'a 403 rate limit',
      { status: 403, body: { message: 'API rate limit exceeded' }, headers: { 'x-ratelimit-remaining': '0' } },
    ],
    ['a network error', new TypeError('fetch failed')],
    ['a 401 (a token mid-rotation)', { status: 401, body: { message: 'Bad credentials' } }],
  ])('treats %s as transient', async (_name, answer) => {
    const { host } = scriptedHost([answer]);

    await expect(host.findOrCreate(input)).rejects.toBeInstanceOf(TransientJobError);
  });

  it("passes an error that is no answer of GitHub's (a TypeError on a null listing) to the pipeline, which fails it at once", async () => {
    const { host } = scriptedHost([{ status: 200, body: null }]);

    const error = await host.findOrCreate(input).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect(classifyFailure(error, 1, 5)).toMatchObject({ reason: 'UNEXPECTED_ERROR' });
  });

  it('treats a 404 (no such repository or no access) as permanent', async () => {
    const { host } = scriptedHost([{ status: 404, body: { message: 'Not Found' } }]);

    const error = await host.findOrCreate(input).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PermanentJobError);
    expect((error as Error).message).toMatch(/acme\/widgets refused the pull request \(404\): Not Found/);
  });
});

function captureError(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error');
}
