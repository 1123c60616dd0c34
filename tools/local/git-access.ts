/**
 * Who may do what on the local git server. The platform's server answers two kinds of callers:
 * the platform itself (the sequencer pushes, the PR store and the pins read refs) with a
 * credential made at start and kept in memory only, and a test run's checkout with a read-only
 * credential for one repository, issued for that checkout and revoked before the test command
 * starts. Anyone else, a test command included, gets nothing: no fetch, no push.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

export interface GitCredentials {
  readonly username: string;
  readonly password: string;
}

/** What a request may do with one repository: push and fetch, fetch only, or nothing. */
export type GitPermission = 'write' | 'read' | 'none';

export interface GitAccess {
  /** `repo` is the repository name (`<name>` of `/<name>.git/...`); empty when the path names none. */
  permission(credentials: GitCredentials | undefined, repo: string): GitPermission;
}

/** Everyone may fetch and push: the tests' throw-away servers. */
export const OPEN_ACCESS: GitAccess = { permission: () => 'write' };

/** One credential that may fetch and push everything; no other. */
export function singleCredential(expected: GitCredentials): GitAccess {
  return { permission: (credentials) => (credentials && sameCredentials(credentials, expected) ? 'write' : 'none') };
}

/** A grant for one checkout: the credential, and the call that withdraws it. */
export interface ReadGrant {
  readonly auth: GitCredentials;
  revoke(): void;
}

export class PlatformGitAccess implements GitAccess {
  /** The platform's own credential: fetch and push every repository. Never written to disk. */
  readonly platform: GitCredentials = { username: 'agent-jobs', password: secret() };
  /** Live read-only grants by user name. */
  private readonly grants = new Map<string, { readonly password: string; readonly repo: string }>();

  /** A read-only credential for `repo` alone, valid until revoked. */
  grantRead(repo: string): ReadGrant {
    const username = `run-${secret(8)}`;
    const password = secret();
    this.grants.set(username, { password, repo });
    return { auth: { username, password }, revoke: () => this.grants.delete(username) };
  }

  permission(credentials: GitCredentials | undefined, repo: string): GitPermission {
    if (credentials === undefined) return 'none';
    if (sameCredentials(credentials, this.platform)) return 'write';
    const grant = this.grants.get(credentials.username);
    return grant && grant.repo === repo && sameSecret(credentials.password, grant.password) ? 'read' : 'none';
  }
}

function secret(bytes = 32): string {
  return randomBytes(bytes).toString('hex');
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function sameCredentials(given: GitCredentials, expected: GitCredentials): boolean {
  return given.username === expected.username && sameSecret(given.password, expected.password);
}
