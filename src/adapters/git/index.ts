/** Git adapter: apply_patch's commit-and-push and branch heads over smart HTTP (isomorphic-git). */
import { mkdir } from 'node:fs/promises';
import type { PatchCommitRequest, PatchCommitResult, WorkspaceGit } from '../../core/ports';
import { applyPatchCommit, type ApplyPatchOptions } from './apply-patch-commit';
import { resolveBranchHead, type GitAuth } from './remote';

export { applyPatchCommit, type ApplyPatchCommitInput, type ApplyPatchCommitResult, type ApplyPatchOptions } from './apply-patch-commit';
export { resolveBranchHead, type GitAuth } from './remote';

export interface IsomorphicGitWorkspaceOptions extends ApplyPatchOptions {
  /** Credentials for the remotes, fetched per call so a rotated secret is picked up; undefined: none needed. */
  readonly credentials: () => Promise<GitAuth | undefined>;
  /** Scratch space for the per-job repositories (Lambda: under /tmp); created when missing. */
  readonly workRoot: string;
}

/** The WorkspaceGit port over isomorphic-git. */
export class IsomorphicGitWorkspace implements WorkspaceGit {
  constructor(private readonly options: IsomorphicGitWorkspaceOptions) {}

  async commitPatch(request: PatchCommitRequest): Promise<PatchCommitResult> {
    const { credentials, workRoot, ...applyOptions } = this.options;
    await mkdir(workRoot, { recursive: true });
    return applyPatchCommit({ ...request, auth: await credentials(), workDir: workRoot }, applyOptions);
  }

  async branchHead(repoUrl: string, branch: string): Promise<string | undefined> {
    return resolveBranchHead(repoUrl, branch, await this.options.credentials());
  }
}
