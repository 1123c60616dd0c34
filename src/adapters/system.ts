/** The process's own clock and randomness, as the core's ports, and what it can tell about other processes. */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/ports';

export const systemClock: Clock = { now: () => Date.now() };

/** A fresh lease owner per delivery attempt. */
export const randomOwner = (): string => randomUUID();

/** Whether a process id names a live process (a file left by a killed process names a dead one). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
