/**
 * Where the local platform keeps its state, and the file that tells clients it is running. One
 * definition for the platform and the CLI, so `agent-jobs status` finds the platform `npm start`
 * started whatever directory it runs from. Kept free of heavy imports: every CLI command loads it.
 */
import * as path from 'node:path';

/** `<project>/.agent-jobs` (git-ignored). */
export const DEFAULT_STATE_DIR = path.resolve(__dirname, '..', '..', '.agent-jobs');
export const PLATFORM_FILE = 'platform.json';
