/**
 * What every caller of GitHub's API in the platform shares (the pull-request host, the GitHub App's
 * token minting): a GitHub App's key as a secret holds it, the repository a clone URL names,
 * GitHub's errors as data, and GitHub's rate limits as one container keeps to them. Light on
 * purpose (no Octokit, no SDK): the sequencer's git engine imports it whatever its secret holds.
 *
 * The rules are GitHub's (docs.github.com, "Rate limits for the REST API"): a 403 or 429 with
 * `retry-after` means not before that many seconds; with `x-ratelimit-remaining: 0`, not before
 * `x-ratelimit-reset` (epoch seconds); a secondary limit without either, at least a minute; and no
 * request at all meanwhile ("continuing to make requests while you are rate limited may result in
 * the banning of your integration"). Content-creating requests are limited to 80 a minute and 500
 * an hour: each container keeps to its share in sliding windows of a minute and an hour, as GitHub
 * counts them. Written here rather than taken from @octokit/plugin-throttling, which applies the same
 * rules by queueing and retrying inside the process (Bottleneck): a Lambda function would then
 * wait, billed and holding a slot of its event source mapping, for up to an hour. Here a limit is
 * a RetryAfterError, and the pipeline gives the wait back to the queue (src/core/pipeline.ts).
 */
import type { ContentShare } from '../../contract/limits';
import { PermanentJobError, RetryAfterError } from '../core/errors';
import type { Clock } from '../core/ports';

/** A GitHub App secret's value: `{"appId", "privateKey", "installationId"?}` (github-app.ts mints its tokens; secrets.ts reads it). */
export interface GitHubAppKey {
  readonly appId: string;
  /** The app's private key, PEM (PKCS#1 as GitHub issues it, or PKCS#8). */
  readonly privateKey: string;
  /** The installation to act as; absent: found per repository owner. */
  readonly installationId?: number;
}

/** Whether a credential secret's value is a GitHub App's (else a token, or git's user and password). */
export function isGitHubAppKey(value: unknown): value is GitHubAppKey {
  return typeof value === 'object' && value !== null && 'appId' in value && 'privateKey' in value;
}

export interface RepoCoordinates {
  readonly owner: string;
  readonly repo: string;
}

const NAME = /^[A-Za-z0-9_.-]+$/;

/**
 * Owner and repository of a GitHub (or GitHub Enterprise) clone URL: https://host/owner/repo(.git).
 * Throws a permanent error naming the URL: retrying cannot make it parse.
 */
export function parseRepoUrl(repoUrl: string): RepoCoordinates {
  let url: URL;
  try {
    url = new URL(repoUrl);
  } catch {
    throw new PermanentJobError('INVALID_JOB', `repository URL ${JSON.stringify(repoUrl)} is not a URL`);
  }
  const segments = url.pathname.replace(/\/+$/, '').split('/').filter(Boolean);
  const [owner, name] = segments;
  const repo = name?.replace(/\.git$/, '');
  if (segments.length !== 2 || owner === undefined || !repo || !NAME.test(owner) || !NAME.test(repo)) {
    throw new PermanentJobError(
      'INVALID_JOB',
      `repository URL ${url.origin}${url.pathname} is not of the form https://host/owner/repo(.git)`,
    );
  }
  return { owner, repo };
}

/** An answer of GitHub's as Octokit throws it (RequestError): its status, headers and body. */
export interface HttpErrorShape {
  status: number;
  response?: { headers?: Record<string, string | number | undefined>; data?: unknown };
}

export function httpError(error: unknown): HttpErrorShape | undefined {
  if (!(error instanceof Error)) return undefined;
  const status = (error as { status?: unknown }).status;
  return typeof status === 'number' ? (error as Error & HttpErrorShape) : undefined;
}

/** GitHub's messages from an error body: the top-level message and each entry of `errors`. */
export function validationMessages(error: HttpErrorShape): string[] {
  const data = error.response?.data as { message?: unknown; errors?: unknown } | undefined;
  const messages = (Array.isArray(data?.errors) ? data.errors : []).map(entryMessage);
  return typeof data?.message === 'string' ? [data.message, ...messages] : messages;
}

/** An entry of a 422's `errors`: a string, or an object with or without a `message`. */
function entryMessage(entry: unknown): string {
  if (typeof entry === 'string') return entry;
  const message = (entry as { message?: unknown } | null)?.message;
  return typeof message === 'string' ? message : JSON.stringify(entry);
}

/** A secondary limit named no time: GitHub asks for at least a minute. */
const SECONDARY_LIMIT_WAIT_MS = 60_000;

/**
 * When GitHub's answer says to come back (epoch ms), or undefined when it is no rate limit (a 403
 * for missing access is GitHub refusing the request, not a limit).
 */
export function rateLimitedUntil(error: HttpErrorShape, now: number): number | undefined {
  if (error.status !== 403 && error.status !== 429) return undefined;
  const headers = error.response?.headers ?? {};
  const header = (name: string): string | undefined => {
    const value = headers[name] ?? headers[name.toLowerCase()];
    return value === undefined ? undefined : String(value);
  };
  const retryAfter = header('retry-after');
  if (retryAfter !== undefined) {
    const seconds = Number(retryAfter);
    const at = Number.isFinite(seconds) ? now + seconds * 1000 : Date.parse(retryAfter);
    if (Number.isFinite(at)) return Math.max(now, at);
  }
  const reset = Number(header('x-ratelimit-reset'));
  if (header('x-ratelimit-remaining') === '0' && Number.isFinite(reset)) return Math.max(now, reset * 1000);
  if (error.status === 429 || validationMessages(error).some((m) => /rate limit/i.test(m)))
    return now + SECONDARY_LIMIT_WAIT_MS;
  return undefined;
}

export interface GitHubLimitsOptions {
  /** This container's share of GitHub's content-creation limits (contract/limits.ts contentShare). @default no pacing */
  readonly contentShare?: ContentShare;
  readonly clock: Clock;
}

/** Requests that create content (GitHub's secondary limits count them apart). */
const CONTENT_METHODS = new Set(['POST', 'PATCH', 'PUT', 'DELETE']);
const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/**
 * GitHub's limits as one container keeps to them (one per container: the state is what this
 * container knows). `admit` before each request; `observe` every error GitHub answers.
 */
export class GitHubLimits {
  /** No request goes out before this (epoch ms): GitHub said so. */
  private blockedUntil = 0;
  /** When this container's content-creating requests of the last hour went out (epoch ms), oldest first. */
  private creates: number[] = [];

  constructor(private readonly options: GitHubLimitsOptions) {}

  /** Throws RetryAfterError when GitHub asked to wait, or when a content-creating request is beyond the container's share; else counts it. */
  admit(method: string, what: string): void {
    const now = this.options.clock.now();
    if (now < this.blockedUntil) {
      throw new RetryAfterError(
        'github-rate-limit',
        `${what}: GitHub asked for no requests before ${new Date(this.blockedUntil).toISOString()}`,
        this.blockedUntil,
      );
    }
    const share = this.options.contentShare;
    if (!share || !CONTENT_METHODS.has(method.toUpperCase())) return;
    this.creates = this.creates.filter((at) => at > now - HOUR_MS);
    const inMinute = this.creates.filter((at) => at > now - MINUTE_MS);
    // The earliest time the window holds one fewer than the share: when its oldest counted create leaves it.
    const freeAt = Math.max(
      inMinute.length >= share.perMinute ? inMinute[inMinute.length - share.perMinute]! + MINUTE_MS : 0,
      this.creates.length >= share.perHour ? this.creates[this.creates.length - share.perHour]! + HOUR_MS : 0,
    );
    if (freeAt > now) {
      throw new RetryAfterError(
        'github-pacing',
        `${what}: this container's share of GitHub's content-creation limits is spent (${share.perMinute} a minute, ${share.perHour} an hour)`,
        freeAt,
      );
    }
    this.creates.push(now);
  }

  /** A RetryAfterError for an answer that is a rate limit (remembered: no request before its time), else undefined. */
  observe(error: unknown, what: string): RetryAfterError | undefined {
    const http = httpError(error);
    const until = http && rateLimitedUntil(http, this.options.clock.now());
    if (until === undefined) return undefined;
    this.blockedUntil = Math.max(this.blockedUntil, until);
    return new RetryAfterError(
      'github-rate-limit',
      `${what}: GitHub's rate limit (${http?.status}), no requests before ${new Date(until).toISOString()}`,
      until,
      { cause: error },
    );
  }
}
