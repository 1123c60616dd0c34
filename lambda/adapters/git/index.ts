/** Git adapter: apply_patch's commit-and-push and branch heads over smart HTTP (isomorphic-git). */
export { applyPatchCommit, type ApplyPatchCommitInput, type ApplyPatchCommitResult, type ApplyPatchOptions } from './apply-patch-commit';
export { resolveBranchHead, type GitAuth } from './remote';
