/** Patch engine: pure parsing, validation and hunk application (no I/O). */
export { applyHunks } from './apply';
export { decodePatchBytes, encodePatchText } from './bytes';
export {
  commitFields,
  commitMessage,
  hasJobTrailer,
  preparePatchCommit,
  type CommitFields,
  type PreparedPatchCommit,
} from './commit';
export { fileMismatch, PATCH_MISMATCH_BYTES } from './mismatch';
export { displayPath, isFileMode, unsafePatch, type FileMode, type FileOperation, type PatchHunk } from './operations';
export { parsePatchOperations, type PatchLimits } from './parse';
export { caseClash, portableNameKey } from './paths';
export { checkWrittenContent, isCheckedContent } from './special-files';
