/**
 * An outer safety net for tests that try to exhaust the machine through the platform (a fork
 * flood, a runaway allocation): the test process moves itself into a cgroup of its own with
 * generous limits before it starts the platform, so the platform, its runs (their groups nest in
 * the platform's) and everything else it starts stay inside, even if the platform's own limits
 * failed to apply. Written here by hand, not with the platform's code (tools/local/cgroups.ts), so a
 * fault there cannot take the net down with it. Version 1 hierarchies only (pids and memory), as
 * the machines these tests run on have; elsewhere `enterSafetyGroup` says why it cannot.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface SafetyGroup {
  /** Moves the test process back to where it was and removes the group (once nothing else is in it). */
  leave(): void;
}

const V1 = { pids: '/sys/fs/cgroup/pids', memory: '/sys/fs/cgroup/memory' } as const;

export function enterSafetyGroup(limits: { readonly processes: number; readonly memoryMiB: number }): SafetyGroup {
  const own = new Map(
    readFileSync('/proc/self/cgroup', 'utf8')
      .split('\n')
      .map((line) => line.split(':'))
      .flatMap(([, controllers, path]) => (controllers ?? '').split(',').map((c): [string, string] => [c, path ?? ''])),
  );
  const name = `agent-jobs-test-safety-${randomBytes(4).toString('hex')}`;
  const groups = (Object.keys(V1) as (keyof typeof V1)[]).map((controller) => {
    const ownPath = own.get(controller);
    if (ownPath === undefined) throw new Error(`no v1 ${controller} hierarchy for the safety group`);
    const parent = join(V1[controller], ownPath);
    return { controller, parent, dir: join(parent, name) };
  });
  for (const { controller, dir } of groups) {
    mkdirSync(dir);
    if (controller === 'pids') writeFileSync(join(dir, 'pids.max'), String(limits.processes));
    else writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limits.memoryMiB * 1024 * 1024));
  }
  for (const { dir } of groups) writeFileSync(join(dir, 'cgroup.procs'), String(process.pid));
  return {
    leave() {
      for (const { parent, dir } of groups) {
        writeFileSync(join(parent, 'cgroup.procs'), String(process.pid));
        rmdirSync(dir);
      }
    },
  };
}
