/**
 * Per-run resource limits through Linux control groups: one group per run, made inside the
 * platform's own group (so whatever bounds the platform bounds its runs too), holding every process
 * of the run from its first instruction (the launcher joins it before it starts the command).
 *
 * - processes: `pids.max`; reaching it counts in `pids.events`.
 * - memory: `memory.limit_in_bytes` (v1) or `memory.max` (v2), swap included where swap is
 *   accounted; the kernel kills a process of the group when it is reached, counted as `oom_kill`.
 *   Files in a tmpfs count too: the sandbox's writable places are charged to the run.
 * - CPU time: read from `cpuacct.usage` (v1) or `cpu.stat` (v2); the runner ends the run at its
 *   limit. Its CPU weight is half a process's, so a busy run leaves the platform its share.
 * - ending: every process in the group is stopped then killed, round after round, until none is
 *   left (a fork cannot outrun it: the process limit bounds how many there are).
 *
 * Version 1 hierarchies (pids and memory mounted, the platform allowed to make groups in its own:
 * root, on this kind of machine) or a version 2 group whose controllers are delegated to the
 * platform (pids and memory in its `cgroup.subtree_control`). Anything else: no cgroups, and the
 * runner falls back to per-process resource limits (confinement.ts says what that leaves open).
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rmdir, statfs, writeFile } from 'node:fs/promises';
import { basename, isAbsolute, join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CommandLimits } from '../../contract/job-types';
import { errorMessage } from '../../src/core/errors';

/** Where run groups are made: per controller (v1, one hierarchy each, possibly shared), or one directory (v2). */
export type CgroupParents =
  | {
      readonly version: 1;
      readonly pids: string;
      readonly memory: string;
      readonly cpu?: string;
      readonly cpuacct?: string;
    }
  | { readonly version: 2; readonly dir: string };

/** A run's own group, by the directories that hold it (one per hierarchy). */
export interface RunGroupDirs {
  readonly version: 1 | 2;
  /** v1: by controller; v2: the one directory under every key. */
  readonly pids: string;
  readonly memory: string;
  readonly cpu?: string;
  readonly cpuacct?: string;
}

/** What the group saw while the run ran. */
export interface RunGroupUsage {
  /** A fork or clone was refused at the process limit. */
  readonly processLimitReached: boolean;
  /** Processes the kernel killed at the memory limit. */
  readonly oomKills: number;
  /** CPU time of every process of the group, so far. */
  readonly cpuSeconds: number;
}

/** Run groups are named so that only they are ever removed: `agent-jobs-<16 hex>`. */
const GROUP_NAME = /^agent-jobs-[0-9a-f]{16}$/;
/** Half the default weight (v1 shares 1024, v2 weight 100). */
const CPU_WEIGHT = { 1: 512, 2: 50 } as const;

/**
 * The directories run groups can be made in, or why there are none: read from /proc/self/cgroup
 * and /proc/self/mountinfo, then tried (a group is made, limited and removed).
 */
export async function findCgroupParents(): Promise<CgroupParents | { readonly unavailable: string }> {
  if (process.platform !== 'linux') return { unavailable: `no cgroups on ${process.platform}` };
  let own: string;
  let mounts: string;
  try {
    [own, mounts] = await Promise.all([
      readFile('/proc/self/cgroup', 'utf8'),
      readFile('/proc/self/mountinfo', 'utf8'),
    ]);
  } catch (error) {
    return { unavailable: `cgroups cannot be read here (${errorMessage(error)})` };
  }
  const candidates = cgroupParentsFrom(own, mounts);
  const problems: string[] = [];
  for (const parents of candidates) {
    try {
      const group = await makeRunGroup(planRunGroup(parents), { processes: 8, memoryMiB: 64 });
      await removeRunGroup(group);
      return parents;
    } catch (error) {
      problems.push(`v${parents.version}: ${errorMessage(error)}`);
    }
  }
  if (candidates.length === 0)
    return {
      unavailable:
        'no cgroup hierarchy with the pids and memory controllers is mounted (v1), and no v2 group delegates them to this process',
    };
  return { unavailable: `the platform may not make cgroups here (${problems.join('; ')})` };
}

/**
 * The candidate parents, v2 first, from the text of /proc/self/cgroup and /proc/self/mountinfo.
 * Pure: the tests give it the files of other machines.
 */
export function cgroupParentsFrom(ownCgroups: string, mountInfo: string): CgroupParents[] {
  const own = new Map<string, string>();
  for (const line of ownCgroups.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, controllers = '', path = ''] = match;
    if (controllers === '') own.set('', path);
    for (const controller of controllers.split(',')) if (controller) own.set(controller, path);
  }
  const mounts = mountInfo.split('\n').flatMap((line) => {
    // <id> <parent> <dev> <root> <mount point> <options> [optional...] - <fstype> <source> <super options>
    const [before, after] = line.split(' - ');
    const fields = before?.split(' ') ?? [];
    const [fstype, , superOptions = ''] = after?.split(' ') ?? [];
    const [root, mountPoint] = [fields[3], fields[4]];
    if (!root || !mountPoint || (fstype !== 'cgroup' && fstype !== 'cgroup2')) return [];
    return [
      {
        fstype,
        root: unescapeMountPath(root),
        mountPoint: unescapeMountPath(mountPoint),
        controllers: superOptions.split(','),
      },
    ];
  });
  /** The platform's own group as a directory of the mount holding `controller` (v1), or of the v2 mount. */
  const ownDir = (mount: (typeof mounts)[number], path: string | undefined): string | undefined => {
    if (path === undefined) return undefined;
    const inside = relative(mount.root, path);
    if (inside.startsWith('..') || isAbsolute(inside)) return undefined;
    return join(mount.mountPoint, inside);
  };
  const candidates: CgroupParents[] = [];
  const unified = mounts.find((m) => m.fstype === 'cgroup2');
  const v2 = unified && ownDir(unified, own.get(''));
  if (v2) candidates.push({ version: 2, dir: v2 });
  const v1 = (controller: string) => {
    const mount = mounts.find((m) => m.fstype === 'cgroup' && m.controllers.includes(controller));
    return mount && ownDir(mount, own.get(controller));
  };
  const [pids, memory, cpu, cpuacct] = [v1('pids'), v1('memory'), v1('cpu'), v1('cpuacct')];
  if (pids && memory) candidates.push({ version: 1, pids, memory, ...(cpu && { cpu }), ...(cpuacct && { cpuacct }) });
  return candidates;
}

/** mountinfo escapes space, tab, newline and backslash as octal. */
function unescapeMountPath(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The directories of a new run group (`agent-jobs-<16 hex>` in each hierarchy), not made yet: a
 * caller records them before makeRunGroup, so a platform killed in between leaves nothing the next
 * start cannot find.
 */
export function planRunGroup(parents: CgroupParents): RunGroupDirs {
  const name = `agent-jobs-${randomBytes(8).toString('hex')}`;
  if (parents.version === 2) {
    const dir = join(parents.dir, name);
    return { version: 2, pids: dir, memory: dir, cpu: dir, cpuacct: dir };
  }
  return {
    version: 1,
    pids: join(parents.pids, name),
    memory: join(parents.memory, name),
    ...(parents.cpu && { cpu: join(parents.cpu, name) }),
    ...(parents.cpuacct && { cpuacct: join(parents.cpuacct, name) }),
  };
}

/** Makes a planned run group with its limits; throws (having removed what it made) when the kernel refuses. */
export async function makeRunGroup(
  dirs: RunGroupDirs,
  limits: Pick<CommandLimits, 'processes' | 'memoryMiB'>,
): Promise<RunGroupDirs> {
  const memoryBytes = String(limits.memoryMiB * 1024 * 1024);
  try {
    for (const dir of distinctDirs(dirs)) await mkdir(dir);
    await writeFile(join(dirs.pids, 'pids.max'), String(limits.processes));
    if (dirs.version === 2) {
      await writeFile(join(dirs.memory, 'memory.max'), memoryBytes);
      await writeOptional(join(dirs.memory, 'memory.swap.max'), '0');
    } else {
      await writeFile(join(dirs.memory, 'memory.limit_in_bytes'), memoryBytes);
      // Present where swap is accounted: memory and swap together may not exceed the limit either.
      await writeOptional(join(dirs.memory, 'memory.memsw.limit_in_bytes'), memoryBytes);
    }
    if (dirs.cpu)
      await writeOptional(
        join(dirs.cpu, dirs.version === 2 ? 'cpu.weight' : 'cpu.shares'),
        String(CPU_WEIGHT[dirs.version]),
      );
    return dirs;
  } catch (error) {
    await removeRunGroup(dirs).catch(() => undefined);
    throw error;
  }
}

/** The `cgroup.procs` files a process writes its pid to, to join the run's group in every hierarchy. */
export function joinFiles(dirs: RunGroupDirs): string[] {
  return distinctDirs(dirs).map((dir) => join(dir, 'cgroup.procs'));
}

export async function readRunGroupUsage(dirs: RunGroupDirs): Promise<RunGroupUsage> {
  const [pidsEvents, memoryEvents, cpu] = await Promise.all([
    readFile(join(dirs.pids, 'pids.events'), 'utf8').catch(() => ''),
    readFile(join(dirs.memory, dirs.version === 2 ? 'memory.events' : 'memory.oom_control'), 'utf8').catch(() => ''),
    cpuSeconds(dirs),
  ]);
  return {
    processLimitReached: counter(pidsEvents, 'max') > 0,
    oomKills: counter(memoryEvents, 'oom_kill'),
    cpuSeconds: cpu,
  };
}

async function cpuSeconds(dirs: RunGroupDirs): Promise<number> {
  if (dirs.version === 2)
    return counter(await readFile(join(dirs.cpu ?? dirs.pids, 'cpu.stat'), 'utf8').catch(() => ''), 'usage_usec') / 1e6;
  if (!dirs.cpuacct) return 0;
  return Number((await readFile(join(dirs.cpuacct, 'cpuacct.usage'), 'utf8').catch(() => '0')).trim()) / 1e9;
}

/** `<key> <number>` lines (pids.events, memory.events, memory.oom_control, cpu.stat). */
function counter(text: string, key: string): number {
  const match = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

/** Ends every process of the group (stopped, then killed, round after round) and removes it. */
export async function removeRunGroup(dirs: RunGroupDirs): Promise<void> {
  await killGroupMembers(dirs.pids);
  for (const dir of distinctDirs(dirs).reverse()) {
    for (let attempt = 0; ; attempt++) {
      try {
        await rmdir(dir);
        break;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') break;
        // EBUSY: a process killed a moment ago is still leaving the group.
        if (code !== 'EBUSY' || attempt >= 50) throw error;
        await killGroupMembers(dirs.pids);
        await sleep(20);
      }
    }
  }
}

async function killGroupMembers(dir: string): Promise<void> {
  await endProcesses(
    async () =>
      (await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n').filter(Boolean).map(Number),
    { rounds: 100, pauseMs: 10 },
  );
}

/**
 * Ends the processes `listPids` names (never this one): stopped first, then killed, round after
 * round, so a process cannot fork faster than it is ended; resolves once none is left, or after
 * `rounds`. Shared by a run group's members and the processes that carry a run's marker.
 */
export async function endProcesses(
  listPids: () => Promise<number[]>,
  options: { rounds: number; pauseMs: number },
): Promise<void> {
  for (let round = 0; round < options.rounds; round++) {
    const pids = (await listPids()).filter((pid) => pid !== process.pid);
    if (pids.length === 0) return;
    for (const pid of pids) signal(pid, 'SIGSTOP');
    for (const pid of pids) signal(pid, 'SIGKILL');
    await sleep(options.pauseMs);
  }
}

/**
 * Removes a group a dead platform's run left (as its run state recorded it), ending what is still
 * in it. Only run groups are touched: directories named like one, on a cgroup file system.
 */
export async function removeLeftRunGroup(dirs: RunGroupDirs): Promise<void> {
  const isRunGroup = async (dir: string) => {
    if (!isAbsolute(dir) || !GROUP_NAME.test(basename(dir))) return false;
    const fs = await statfs(dir).catch((error: NodeJS.ErrnoException) =>
      error.code === 'ENOENT' ? 'gone' : undefined,
    );
    return fs === 'gone' || (fs !== undefined && CGROUP_FS.has(fs.type));
  };
  const checked = await Promise.all(distinctDirs(dirs).map(isRunGroup));
  if (checked.every(Boolean)) await removeRunGroup(dirs);
}

/** statfs types of cgroup (v1) and cgroup2 file systems (linux/magic.h). */
const CGROUP_FS = new Set([0x27e0eb, 0x63677270]);

function distinctDirs(dirs: RunGroupDirs): string[] {
  return [...new Set([dirs.pids, dirs.memory, dirs.cpu, dirs.cpuacct].filter((d): d is string => d !== undefined))];
}

async function writeOptional(path: string, value: string): Promise<void> {
  await writeFile(path, value).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone in between.
  }
}
