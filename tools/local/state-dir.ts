/**
 * Where the local platform keeps its state, and the file that tells clients it is running. One
 * definition for the platform and the CLI, so `agent-jobs status` finds the platform `npm start`
 * started whatever directory it runs from. Kept free of heavy imports: every CLI command loads it.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The project's root: the nearest directory above this file with a package.json. Found by
 * walking up rather than by a fixed `../..`, because this file also runs bundled (dist/).
 */
function findProjectRoot(from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) return path.resolve(from, '..', '..');
  }
}

export const PROJECT_ROOT = findProjectRoot(__dirname);

/** `<project>/.agent-jobs` (git-ignored). */
export const DEFAULT_STATE_DIR = path.join(PROJECT_ROOT, '.agent-jobs');
export const PLATFORM_FILE = 'platform.json';
/** `<stateDir>/platform.log`: the handlers' JSON log lines (what `agent-jobs logs` reads locally). */
export const PLATFORM_LOG_FILE = 'platform.log';
/** `<stateDir>/test-runs`: the local test runner's state and each run's kept output. */
export const TEST_RUNS_DIR = 'test-runs';
/** Bytes of a run's output the local test runner keeps (the end of it), for `agent-jobs logs`. */
export const OUTPUT_KEEP_BYTES = 1024 * 1024;
/**
 * `<stateDir>/repos`: the platform's bare repositories (`<name>.git`). The git server lets only the
 * platform and test checkouts in, so people read a repository here: `git clone <stateDir>/repos/<name>.git`.
 */
export const REPOSITORIES_DIR = 'repos';
/** `<stateDir>/dlq-copies`: what the platform put on its DLQs, so a restart can put it back (dlq-copies.ts). */
export const DLQ_COPIES_DIR = 'dlq-copies';

/** The bare repository `<name>` of the platform at `stateDir`. */
/** A repository's name on the local git server (`<gitUrl>/<name>.git`), and so of its directory. */
export const REPO_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export function repositoryDir(stateDir: string, name: string): string {
  return path.join(stateDir, REPOSITORIES_DIR, `${name}.git`);
}

/** The bare repository behind one of the local git server's URLs (`<gitUrl>/<name>.git`), if it is there. */
export function platformRepositoryOf(stateDir: string, repoUrl: string): string | undefined {
  let name: string;
  try {
    name = path.posix.basename(new URL(repoUrl).pathname, '.git');
  } catch {
    return undefined;
  }
  const dir = repositoryDir(stateDir, name);
  return REPO_NAME.test(name) && existsSync(dir) ? dir : undefined;
}
