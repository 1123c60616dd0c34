/** The process's own clock and randomness, as the core's ports. */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../core/ports';

export const systemClock: Clock = { now: () => Date.now() };

/** A fresh lease owner per delivery attempt. */
export const randomOwner = (): string => randomUUID();
