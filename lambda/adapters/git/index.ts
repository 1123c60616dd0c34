/** Git adapter: apply_patch's commit-and-push, branch heads and checkouts over smart HTTP (isomorphic-git). */
export { DEFAULT_AUTHOR, applyPatchCommit, type ApplyPatchCommitInput, type ApplyPatchCommitResult, type ApplyPatchOptions } from './apply-patch-commit';
export { checkoutCommit, resolveBranchHead, type GitAuth } from './remote';
