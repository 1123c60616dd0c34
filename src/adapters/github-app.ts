/**
 * A GitHub App as the platform's credential: its private key lives in Secrets Manager, and
 * installation tokens are minted from it when needed (@octokit/auth-app signs the app's JWT and
 * asks for them), each cached until REFRESH_MARGIN_MS before GitHub's `expires_at`, so a token
 * outlives the push or the pull request it starts. The installation is the secret's
 * `installationId`, or found per repository owner (GET /repos/{owner}/{repo}/installation, as the
 * app) and remembered for that owner.
 *
 * Tokens are per installation (every repository the app may reach there): the sequencer and
 * open_pr are the platform's own code, and a token per repository would multiply the requests
 * that mint them (GitHub counts them against the app's rate limit).
 *
 * A test build's checkout gets a token of its own (`checkoutToken`): minted for its one
 * repository with `contents: read` and nothing else, so the build that runs the agent's code never
 * holds a credential that could push, or reach another repository. Those are kept per repository.
 *
 * auth-app caches tokens itself, 59 minutes from when it minted them whatever GitHub's
 * `expires_at` says; the platform decides when to refresh from `expires_at` and its own clock (so
 * a test can move it), and asks auth-app for a fresh token then (`refresh: true`).
 */
import { createAppAuth } from '@octokit/auth-app';
import { Octokit } from '@octokit/core';
import { PermanentJobError, TransientJobError, errorMessage } from '../core/errors';
import type { Clock } from '../core/ports';
import type { GitAuth } from './git/remote';
import {
  GitHubLimits,
  httpError,
  isGitHubAppKey,
  parseRepoUrl,
  type GitHubAppKey,
  type RepoCoordinates,
} from './github-api';

/** An installation token is refreshed this long before GitHub's expires_at (tokens last an hour). */
export const REFRESH_MARGIN_MS = 5 * 60_000;

/**
 * A checkout token is handed out with at least this long to live: the build it is given to starts
 * and fetches within minutes (the project refuses starts beyond its concurrent build limit rather
 * than queueing them: lib/constructs/test-runner.ts).
 */
export const CHECKOUT_MARGIN_MS = 20 * 60_000;

/** What a test build's checkout may do with a repository: read its contents. */
const CHECKOUT_PERMISSIONS: Readonly<Record<string, 'read'>> = { contents: 'read' };

/** GitHub's user name for an installation token used over git's HTTP basic auth. */
export const INSTALLATION_TOKEN_USER = 'x-access-token';

export interface GitHubAppTokensOptions {
  readonly app: GitHubAppKey;
  /** GitHub's REST API (api.github.com, or https://<host>/api/v3). */
  readonly baseUrl: string;
  readonly clock: Clock;
  /** GitHub's limits as this container keeps to them (the minting requests count against the app's). */
  readonly limits: GitHubLimits;
}

export interface HeldToken {
  readonly token: string;
  /** Epoch ms. */
  readonly expiresAt: number;
}

export class GitHubAppTokens {
  private readonly octokit: Octokit;
  private readonly installations = new Map<string, Promise<number>>();
  private readonly tokens = new Map<number, HeldToken>();
  /** Checkout tokens by `owner/repo` (lower case). */
  private readonly checkoutTokens = new Map<string, HeldToken>();

  constructor(private readonly options: GitHubAppTokensOptions) {
    this.octokit = appOctokit(options.app, options.baseUrl);
  }

  /** An installation token that reaches `repository`, valid for at least REFRESH_MARGIN_MS. */
  async token(repository: RepoCoordinates): Promise<string> {
    const installationId = await this.installationOf(repository);
    const held = this.tokens.get(installationId);
    if (held && held.expiresAt - this.options.clock.now() > REFRESH_MARGIN_MS) return held.token;
    const token = await this.mint(installationId, `mint an installation token of installation ${installationId}`);
    this.tokens.set(installationId, token);
    return token.token;
  }

  /**
   * A token for a test build's checkout of `repository`: that repository only, `contents: read`
   * only, valid for at least CHECKOUT_MARGIN_MS. The same token while it lives that long.
   */
  async checkoutToken(repository: RepoCoordinates): Promise<HeldToken> {
    const key = `${repository.owner}/${repository.repo}`.toLowerCase();
    const held = this.checkoutTokens.get(key);
    if (held && held.expiresAt - this.options.clock.now() > CHECKOUT_MARGIN_MS) return held;
    const installationId = await this.installationOf(repository);
    const token = await this.mint(
      installationId,
      `mint a read-only token of ${repository.owner}/${repository.repo} (installation ${installationId})`,
      {
        repositoryNames: [repository.repo],
        permissions: { ...CHECKOUT_PERMISSIONS },
      },
    );
    this.checkoutTokens.set(key, token);
    return token;
  }

  private async mint(
    installationId: number,
    what: string,
    scope: { repositoryNames?: string[]; permissions?: Record<string, 'read'> } = {},
  ): Promise<HeldToken> {
    const minted = await this.call(
      what,
      () =>
        this.octokit.auth({ type: 'installation', installationId, refresh: true, ...scope }) as Promise<{
          token: string;
          expiresAt: string;
        }>,
    );
    return { token: minted.token, expiresAt: Date.parse(minted.expiresAt) };
  }

  /** The secret's installation, else the one installed on the repository's owner (remembered per owner). */
  private installationOf({ owner, repo }: RepoCoordinates): Promise<number> {
    const configured = this.options.app.installationId;
    if (configured !== undefined) return Promise.resolve(configured);
    let found = this.installations.get(owner.toLowerCase());
    if (found === undefined) {
      found = this.call(
        `find the installation of app ${this.options.app.appId} on ${owner}/${repo}`,
        async () => (await appInstallation(this.octokit, { owner, repo })).id,
      );
      found.catch(() => this.installations.delete(owner.toLowerCase()));
      this.installations.set(owner.toLowerCase(), found);
    }
    return found;
  }

  /**
   * GitHub's answers, classified: a rate limit is a wait; 404 (the app is not installed there) and
   * 403 (not allowed) are GitHub refusing; 401 (a key GitHub does not know: rotated, or the wrong
   * app id), 5xx and the network are transient, as for a token.
   */
  private async call<T>(what: string, request: () => Promise<T>): Promise<T> {
    // Minting and looking up create no content: held to GitHub's time only, never to the pacing of creates.
    this.options.limits.admit('GET', what);
    try {
      return await request();
    } catch (error) {
      const limit = this.options.limits.observe(error, what);
      if (limit) throw limit;
      const http = httpError(error);
      if (http && (http.status === 404 || http.status === 403 || http.status === 422)) {
        throw new PermanentJobError(
          'REJECTED_BY_TARGET',
          `GitHub App: could not ${what} (${http.status}): ${errorMessage(error)}`,
          { cause: error },
        );
      }
      if (http) throw new TransientJobError(`GitHub App: could not ${what}: ${errorMessage(error)}`, { cause: error });
      throw error;
    }
  }
}

/** Octokit acting as the app itself (its JWT), which auth-app also asks for installation tokens. */
export function appOctokit(app: GitHubAppKey, baseUrl: string): Octokit {
  return new Octokit({ baseUrl, authStrategy: createAppAuth, auth: { appId: app.appId, privateKey: app.privateKey } });
}

/** What the platform needs of an installation: push and fetch the workspace branches, open pull requests. */
export const REQUIRED_APP_PERMISSIONS: Readonly<Record<string, 'write'>> = {
  contents: 'write',
  pull_requests: 'write',
};

export interface AppInstallation {
  readonly id: number;
  /** GitHub's permission levels by name: `read`, `write` or `admin`. */
  readonly permissions: Readonly<Record<string, string | undefined>>;
}

/** The app's installation that reaches a repository (GET /repos/{owner}/{repo}/installation, as the app). */
export async function appInstallation(octokit: Octokit, { owner, repo }: RepoCoordinates): Promise<AppInstallation> {
  const { data } = await octokit.request('GET /repos/{owner}/{repo}/installation', { owner, repo });
  return { id: data.id, permissions: { ...data.permissions } };
}

/** The required permissions an installation lacks, as `name: write` (`admin` covers `write`). */
export function missingPermissions(installation: AppInstallation): string[] {
  return Object.entries(REQUIRED_APP_PERMISSIONS)
    .filter(([name]) => !['write', 'admin'].includes(installation.permissions[name] ?? ''))
    .map(([name, level]) => `${name}: ${level}`);
}

/**
 * One GitHubAppTokens per app key seen: a rotated secret (another key or app) gets its own, and
 * the tokens of the previous one are no longer used.
 */
export function appTokensCache(create: (app: GitHubAppKey) => GitHubAppTokens): (app: GitHubAppKey) => GitHubAppTokens {
  const byKey = new Map<string, GitHubAppTokens>();
  return (app) => {
    const key = `${app.appId}\u0000${app.installationId ?? ''}\u0000${app.privateKey}`;
    let tokens = byKey.get(key);
    if (!tokens) {
      if (byKey.size > 0) byKey.clear();
      tokens = create(app);
      byKey.set(key, tokens);
    }
    return tokens;
  };
}

/**
 * A container's app tokens, minted at `baseUrl`: one GitHubAppTokens per app key (appTokensCache),
 * all under one view of GitHub's limits (`limits`, a new one by default: what GitHub said holds for
 * every mint this container asks for).
 */
export function appTokensAt(options: {
  baseUrl: string;
  clock: Clock;
  limits?: GitHubLimits;
}): (app: GitHubAppKey) => GitHubAppTokens {
  const { baseUrl, clock } = options;
  const limits = options.limits ?? new GitHubLimits({ clock });
  return appTokensCache((app) => new GitHubAppTokens({ app, baseUrl, clock, limits }));
}

/**
 * Git credentials for a repository from a credential secret's value: git's user and password as
 * they are, or a GitHub App's installation token as GitHub takes it over HTTPS.
 */
export async function gitAuthFor(
  repoUrl: string,
  secret: GitAuth | GitHubAppKey | undefined,
  tokensOf: (app: GitHubAppKey) => GitHubAppTokens,
): Promise<GitAuth | undefined> {
  if (!isGitHubAppKey(secret)) return secret;
  return { username: INSTALLATION_TOKEN_USER, password: await tokensOf(secret).token(parseRepoUrl(repoUrl)) };
}

/** The token for GitHub's REST API on a repository: the secret's token, or the app's installation token. */
export async function restTokenFor(
  repository: RepoCoordinates,
  secret: string | GitHubAppKey | undefined,
  tokensOf: (app: GitHubAppKey) => GitHubAppTokens,
): Promise<string | undefined> {
  return isGitHubAppKey(secret) ? tokensOf(secret).token(repository) : secret;
}
