/**
 * `npm run release:templates`: keeps the synthesized templates of the release being cut, the
 * version in package.json, under release/<version>/ (one per shipped environment, asset hashes
 * masked), and removes the previous release's (git keeps them). The accepted replacements belong
 * to the change from the previous release: they are printed, for the CHANGELOG's upgrade notes,
 * and the list is emptied. How a release is cut: CHANGELOG.md.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, relative } from 'node:path';
import { shippedEnvironments, synthesizeEnvironment } from '../lib/platform-app';
import {
  ACCEPTED_REPLACEMENTS_FILE,
  RELEASE_DIR,
  acceptedReplacements,
  isSemver,
  maskAssetHashes,
  releaseDirectories,
  releaseTemplateFile,
  releasedVersion,
} from '../lib/release-templates';

const version = releasedVersion();
if (!isSemver(version)) throw new Error(`package.json version ${JSON.stringify(version)} is not a semantic version`);
for (const old of releaseDirectories().filter((v) => v !== version))
  rmSync(`${RELEASE_DIR}/${old}`, { recursive: true });
rmSync(`${RELEASE_DIR}/${version}`, { recursive: true, force: true });
for (const env of shippedEnvironments()) {
  const { stackName, template } = synthesizeEnvironment(env);
  const file = releaseTemplateFile(version, stackName);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(maskAssetHashes(template), null, 2)}\n`);
  process.stdout.write(`wrote ${relative(process.cwd(), file)}\n`);
}
const accepted = acceptedReplacements();
if (accepted.length > 0) {
  process.stdout.write(`accepted in this release (each migration goes in CHANGELOG.md, under ${version}):\n`);
  for (const a of accepted)
    process.stdout.write(`  ${a.stack} ${a.logicalId} ${a.property}: ${a.reason}\n    migration: ${a.migration}\n`);
}
writeFileSync(ACCEPTED_REPLACEMENTS_FILE, '[]\n');
