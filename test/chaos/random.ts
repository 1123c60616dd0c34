/**
 * A seeded pseudo-random source (mulberry32): the chaos harness's scenario and fault decisions
 * follow from the seed. Each part of the harness forks its own stream by name, so the decisions of
 * one injector do not shift when another is called more or less often. Timing is not seeded:
 * the same seed gives the same jobs, patches and fault rates, not the same interleaving.
 */
import { createHash } from 'node:crypto';

export class Random {
  private state: number;

  constructor(private readonly seed: string) {
    this.state = createHash('sha256').update(seed).digest().readUInt32LE(0);
  }

  /** A new, independent stream derived from this seed and `name`. */
  fork(name: string): Random {
    return new Random(`${this.seed}/${name}`);
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return p > 0 && this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** A word of lower-case letters, for file contents and names. */
  word(length = 6): string {
    return Array.from({ length }, () => String.fromCharCode(97 + this.int(26))).join('');
  }
}
