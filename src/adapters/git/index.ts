/** Git adapter: apply_patch's commit-and-push and branch heads over smart HTTP (isomorphic-git). */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { PatchCommitRequest, PatchCommitResult, WorkspaceGit } from '../../core/ports';
import { applyPatchCommit, type ApplyPatchOptions } from './apply-patch-commit';
import { resolveBranchHead, type GitAuth } from './remote';
import { RepoCache } from './repo-cache';

export {
  applyPatchCommit,
  repoCacheKey,
  type ApplyPatchCommitInput,
  type ApplyPatchCommitResult,
  type ApplyPatchOptions,
} from './apply-patch-commit';
export { guardedGitHttp } from './host-guard';
export { resolveBranchHead, type GitAuth } from './remote';
export { RepoCache, type RepoCacheOptions } from './repo-cache';

export interface IsomorphicGitWorkspaceOptions extends Omit<ApplyPatchOptions, 'cache'> {
  /**
   * Credentials for a remote, asked per call so a rotated secret (or a GitHub App's next
   * installation token) is picked up; undefined: none needed.
   */
  readonly credentials: (repoUrl: string) => Promise<GitAuth | undefined>;
  /** Scratch space for the repositories (Lambda: under /tmp); created when missing. */
  readonly workRoot: string;
  /**
   * Bytes of idle workspace repositories kept between jobs under `<workRoot>/repo-cache`, least
   * recently used removed first (src/adapters/git/repo-cache.ts). @default 0: none kept
   */
  readonly cacheBytes?: number;
}

/** The WorkspaceGit port over isomorphic-git. */
export class IsomorphicGitWorkspace implements WorkspaceGit {
  private readonly cache: RepoCache | undefined;

  constructor(private readonly options: IsomorphicGitWorkspaceOptions) {
    const { cacheBytes = 0, workRoot } = options;
    this.cache =
      cacheBytes > 0 ? new RepoCache({ dir: join(workRoot, 'repo-cache'), maxBytes: cacheBytes }) : undefined;
  }

  async commitPatch(request: PatchCommitRequest): Promise<PatchCommitResult> {
    const { credentials, workRoot, cacheBytes: _cacheBytes, ...applyOptions } = this.options;
    await mkdir(workRoot, { recursive: true });
    return applyPatchCommit(
      { ...request, auth: await credentials(request.repoUrl), workDir: workRoot },
      { ...applyOptions, cache: this.cache },
    );
  }

  async branchHead(repoUrl: string, branch: string): Promise<string | undefined> {
    return resolveBranchHead(repoUrl, branch, await this.options.credentials(repoUrl), this.options.http);
  }
}
