/** Processes as seen from the test, whatever namespace they run in (Linux /proc). */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Whether this machine lets an unprivileged process make user namespaces (the confined test runs). */
export const MACHINE_CONFINES =
  process.platform === 'linux' && spawnSync('unshare', ['--user', '--map-root-user', '--mount', 'true']).status === 0;

/** Whether bubblewrap runs here (the sandbox level; `.ci/run` installs it). */
export const MACHINE_SANDBOX =
  process.platform === 'linux' && spawnSync('bwrap', ['--unshare-all', '--ro-bind', '/', '/', 'true']).status === 0;

/** Whether the platform finds cgroups it may make run groups in (tools/local/cgroups.ts asked in a process of its own). */
export const MACHINE_CGROUPS =
  process.platform === 'linux' &&
  spawnSync(
    process.execPath,
    [
      '-r',
      'tsx/cjs',
      '-e',
      "require('./tools/local/cgroups').findCgroupParents().then((found) => process.exit('unavailable' in found ? 1 : 0))",
    ],
    {
      cwd: join(__dirname, '..', '..'),
    },
  ).status === 0;

/** Alive and not a zombie waiting to be reaped by whatever adopted it. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
  return !/^\d+ \(.*\) Z/.test(stat);
}

/**
 * Live processes running `sleep <tag>`. A pid said from inside a PID namespace means nothing out
 * here, so a process a test command leaves behind is found by a sleep duration no other has.
 */
export function processesSleeping(tag: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      const argv = readOr(`/proc/${pid}/cmdline`).split('\0');
      return argv[0]?.endsWith('sleep') === true && argv[1] === tag && isAlive(Number(pid));
    })
    .map(Number);
}

function readOr(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return ''; // gone in between
  }
}
