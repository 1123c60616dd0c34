/**
 * The synthesized templates of the latest release, kept in the repository under
 * `release/<version>/<stack>.template.json` (the version is package.json's: between releases it
 * names the last one cut). The upgrade guard (test/infra/upgrade-guard.test.ts) compares today's
 * templates with them; bin/release-templates.ts rewrites them when a release is cut (CHANGELOG.md).
 *
 * Asset hashes are masked: they change with any handler's code or dependency and say nothing
 * about what a deploy would replace.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// Not platform-app.ts's PROJECT_ROOT: the snapshot serializer reads ASSET_HASH from here, and must not load the stack.
const PROJECT_ROOT = join(__dirname, '..');
export const RELEASE_DIR = join(PROJECT_ROOT, 'release');
/** Replacements and removals accepted on purpose since the latest release, each with its migration. */
export const ACCEPTED_REPLACEMENTS_FILE = join(RELEASE_DIR, 'accepted-replacements.json');
/** A content hash: asset hashes, S3 asset keys, asset parameter names. */
export const ASSET_HASH = /[0-9a-f]{64}/g;
export const ASSET_HASH_PLACEHOLDER = '[ASSET-HASH]';
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$/;

export function isSemver(version: string): boolean {
  return SEMVER.test(version);
}

/** package.json's version: the latest release. */
export function releasedVersion(root = PROJECT_ROOT): string {
  return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
}

export function releaseTemplateFile(version: string, stackName: string): string {
  return join(RELEASE_DIR, version, `${stackName}.template.json`);
}

/** The directories under release/ that hold a release's templates (named by a version). */
export function releaseDirectories(): string[] {
  return existsSync(RELEASE_DIR) ? readdirSync(RELEASE_DIR).filter(isSemver) : [];
}

/** A template with every asset hash masked, as it is kept. */
export function maskAssetHashes<T>(template: T): T {
  return JSON.parse(JSON.stringify(template).replace(ASSET_HASH, ASSET_HASH_PLACEHOLDER)) as T;
}

/** The kept template of `stackName` at `version`, or undefined when that release had no such stack. */
export function keptTemplate(version: string, stackName: string): Record<string, unknown> | undefined {
  const file = releaseTemplateFile(version, stackName);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : undefined;
}

/** One replacement or removal a change may make on purpose, and what an operator does about it. */
export interface AcceptedReplacement {
  readonly stack: string;
  readonly logicalId: string;
  /** The property whose change replaces the resource, `Type`, or `(removed)`. */
  readonly property: string;
  readonly reason: string;
  /** What an operator runs, before or after the deploy, so that nothing is lost. */
  readonly migration: string;
}

export function acceptedReplacements(file = ACCEPTED_REPLACEMENTS_FILE): AcceptedReplacement[] {
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as AcceptedReplacement[]) : [];
}
