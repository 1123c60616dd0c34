/**
 * PullRequestHost for the local platform: pull requests kept in one JSON file under the state
 * directory, found or created by (repository, head branch), numbered per repository. Like GitHub it
 * refuses a pull request whose base or head branch the repository does not have. Writes are
 * atomic (temp file + rename) and serialized within the process, so a crash never leaves a torn file.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PermanentJobError } from '../../src/core/errors';
import type { PullRequestHost } from '../../src/core/ports';
import { writeFileAtomic } from './write-atomic';

type FindOrCreateInput = Parameters<PullRequestHost['findOrCreate']>[0];

export interface LocalPullRequest {
  readonly repoUrl: string;
  readonly number: number;
  readonly url: string;
  readonly head: string;
  readonly base: string;
  readonly title: string;
  readonly body?: string;
  readonly state: 'open';
  readonly createdAt: string;
}

interface StoreFile {
  readonly pulls: LocalPullRequest[];
}

export const PR_STORE_FILE = 'pull-requests.json';

export interface LocalPullRequestStoreOptions {
  /** The head commit of a branch of a repository, or undefined when it does not exist (the git server's refs). */
  readonly branchHead: (repoUrl: string, branch: string) => Promise<string | undefined>;
}

/**
 * GitHub's answer to a pull request whose base or head branch does not exist (422), word for word,
 * so a job that fails on GitHub fails the same way locally.
 */
function invalidBranch(field: 'base' | 'head', repoUrl: string, branch: string): PermanentJobError {
  const github = `Validation Failed; ${JSON.stringify({ resource: 'PullRequest', field, code: 'invalid' })}`;
  return new PermanentJobError(
    'REJECTED_BY_TARGET',
    `local PR store ${repoUrl} refused the pull request (422): ${github} (no branch ${branch})`,
  );
}

export class LocalPullRequestStore implements PullRequestHost {
  private readonly path: string;
  /** Serializes read-modify-write cycles: one local platform process owns the file. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly stateDir: string,
    private readonly options: LocalPullRequestStoreOptions,
  ) {
    this.path = join(stateDir, PR_STORE_FILE);
  }

  findOrCreate(input: FindOrCreateInput): Promise<{ number: number; url: string; created: boolean }> {
    return this.exclusive(async () => {
      const file = await this.read();
      const existing = file.pulls.find(
        (p) => p.repoUrl === input.repoUrl && p.head === input.head && p.state === 'open',
      );
      if (existing) return { number: existing.number, url: existing.url, created: false };
      // Like GitHub: both branches must exist when the pull request is created.
      for (const [field, branch] of [
        ['base', input.base],
        ['head', input.head],
      ] as const) {
        if ((await this.options.branchHead(input.repoUrl, branch)) === undefined)
          throw invalidBranch(field, input.repoUrl, branch);
      }
      const number = 1 + Math.max(0, ...file.pulls.filter((p) => p.repoUrl === input.repoUrl).map((p) => p.number));
      const pull: LocalPullRequest = {
        repoUrl: input.repoUrl,
        number,
        url: `${input.repoUrl.replace(/\.git$/, '')}/pull/${number}`,
        head: input.head,
        base: input.base,
        title: input.title,
        ...(input.body === undefined ? {} : { body: input.body }),
        state: 'open',
        createdAt: new Date().toISOString(),
      };
      await this.write({ pulls: [...file.pulls, pull] });
      return { number, url: pull.url, created: true };
    });
  }

  /** Pull requests, optionally of one repository, oldest first. */
  async list(repoUrl?: string): Promise<LocalPullRequest[]> {
    const { pulls } = await this.read();
    return repoUrl === undefined ? pulls : pulls.filter((p) => p.repoUrl === repoUrl);
  }

  async get(repoUrl: string, number: number): Promise<LocalPullRequest | undefined> {
    return (await this.list(repoUrl)).find((p) => p.number === number);
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.queue.then(work);
    this.queue = result.catch(() => undefined);
    return result;
  }

  private async read(): Promise<StoreFile> {
    try {
      return JSON.parse(await readFile(this.path, 'utf8')) as StoreFile;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { pulls: [] };
      throw error;
    }
  }

  private async write(file: StoreFile): Promise<void> {
    await mkdir(this.stateDir, { recursive: true });
    await writeFileAtomic(this.path, `${JSON.stringify(file, null, 2)}\n`);
  }
}
