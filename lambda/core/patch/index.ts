/** Patch engine: pure parsing, validation and hunk application (no I/O). */
export { applyHunks } from './apply';
export { JOB_TRAILER, commitMessage, hasJobTrailer } from './commit-message';
export { FILE_MODES, isFileMode, unsafePatch, type FileMode, type FileOperation, type PatchHunk } from './operations';
export { DEFAULT_PATCH_LIMITS, parsePatchOperations, type PatchLimits } from './parse';
