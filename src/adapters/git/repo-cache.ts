/**
 * A warm repository cache in the worker's scratch space (/tmp on a warm Lambda): the bare
 * repository of a workspace (repository URL + branch) outlives its job, so the next job of the
 * workspace fetches only what it lacks, or nothing at all.
 *
 * What it promises:
 * - A leased repository belongs to one job. Taking one is a rename, which is atomic: two jobs
 *   (two workspaces in one container, or a lease takeover overlapping the job it took over) never
 *   share a repository, and the loser of a race starts cold in a directory of its own.
 * - A repository goes back only after its job finished normally (`release(true)`): a job that
 *   crashed or failed on I/O leaves nothing half-written behind for the next one.
 * - Idle repositories take at most `maxBytes` together; the least recently used go first. A
 *   repository's bytes are kept as a running count: the job says what it added, and only a job
 *   that cannot say (a fetch wrote into it, or it started empty) has the repository measured.
 * - It never decides what the branch is: objects are content-addressed and the caller resolves the
 *   remote's head before every use (see apply-patch-commit.ts), so a stale cache can only cost a
 *   fetch, never produce a wrong tree.
 *
 * Layout of `dir`: `<key>` idle repositories (with `agent-jobs-cache.json`), `<key>.busy-<owner>`
 * and `<key>.cold-<owner>-<n>` leased ones, `.trash-<owner>-<n>` being deleted, where `<owner>`
 * (`<pid>-<nonce>`) names the cache instance: a later instance removes the leftovers of owners that
 * are gone (a crashed process, or an earlier incarnation with the same pid).
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as z from 'zod/mini';
import '../../../contract/zod-english';
import { isProcessAlive } from '../system';

export interface RepoCacheOptions {
  /** Directory of the cached repositories; created when missing. */
  readonly dir: string;
  /** Bytes the idle repositories may take together; the least recently used are removed beyond it. */
  readonly maxBytes: number;
  /** @default Date.now */
  readonly now?: () => number;
}

export interface RepoLease {
  /** The bare repository this job works in, alone. */
  readonly gitdir: string;
  /** True when the repository holds an earlier job's objects; false: empty, to be initialised. */
  readonly warm: boolean;
  /** isomorphic-git's in-memory cache (parsed pack indexes) for this repository, kept between jobs. */
  readonly memory: object;
  /**
   * Gives the repository back for later jobs (`keep`, only after a normal end) or removes it.
   * `addedBytes`: what the job wrote into the repository, when it wrote everything itself;
   * undefined when it cannot tell, and the repository is measured then.
   */
  release(keep: boolean, addedBytes?: number): Promise<void>;
}

const META_FILE = 'agent-jobs-cache.json';
const metaSchema = z.strictObject({
  version: z.literal(1),
  bytes: z.int().check(z.nonnegative()),
  lastUsed: z.number(),
});
type Meta = z.infer<typeof metaSchema>;

/** Idle repositories are named by their key alone: 40 hex characters (see cacheKey). */
const KEY = /^[0-9a-f]{40}$/;
/** `<pid>-<nonce>` inside a leased or trashed entry's name. */
const OWNER_IN_NAME = /^(?:[0-9a-f]{40}\.(?:busy|cold)|\.trash)-(\d+)-([0-9a-f]{12})(?:-|$)/;

/** Nonces of the caches alive in this process: an entry of ours with another nonce is a leftover. */
const liveNonces = new Set<string>();

export class RepoCache {
  private readonly owner: string;
  private readonly nonce = randomUUID().replace(/-/g, '').slice(0, 12);
  /** Keys whose `busy` path a job of this instance holds. */
  private readonly busy = new Set<string>();
  /** In-memory caches of the repositories at our `busy` paths (stable paths, so the entries stay valid). */
  private readonly memory = new Map<string, object>();
  private ready: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly options: RepoCacheOptions) {
    this.owner = `${process.pid}-${this.nonce}`;
    this.now = options.now ?? Date.now;
    liveNonces.add(this.nonce);
  }

  async lease(key: string): Promise<RepoLease> {
    if (!KEY.test(key)) throw new Error(`invalid repository cache key ${JSON.stringify(key)}`);
    await (this.ready ??= this.prepare());
    const slot = join(this.options.dir, key);
    if (!this.busy.has(key)) {
      this.busy.add(key);
      const path = `${slot}.busy-${this.owner}`;
      try {
        const taken = await this.take(slot, path);
        if (!taken) await mkdir(path);
        const memory = taken ? (this.memory.get(key) ?? {}) : {};
        this.memory.set(key, memory);
        return this.leaseOf(key, path, taken, memory, () => this.busy.delete(key));
      } catch (error) {
        this.busy.delete(key);
        throw error;
      }
    }
    // Another job of this process holds the workspace's repository (a lease takeover overlapping
    // the job it took over): work apart, in a directory of its own.
    const path = `${slot}.cold-${this.owner}-${randomUUID()}`;
    const taken = await this.take(slot, path);
    if (!taken) await mkdir(path);
    return this.leaseOf(key, path, taken, {}, () => undefined);
  }

  /** Bytes the idle repositories take, by key (for tests and benchmarks). */
  async idle(): Promise<Map<string, Meta>> {
    const found = new Map<string, Meta>();
    for (const name of await readdir(this.options.dir).catch(() => [])) {
      if (!KEY.test(name)) continue;
      const meta = await readMeta(join(this.options.dir, name));
      if (meta) found.set(name, meta);
    }
    return found;
  }

  private leaseOf(
    key: string,
    gitdir: string,
    taken: { bytes: number | undefined } | undefined,
    memory: object,
    done: () => void,
  ): RepoLease {
    let released = false;
    return {
      gitdir,
      warm: taken !== undefined,
      memory,
      release: async (keep, addedBytes) => {
        if (released) return;
        released = true;
        try {
          const bytes = taken?.bytes !== undefined && addedBytes !== undefined ? taken.bytes + addedBytes : undefined;
          if (keep && (await this.giveBack(key, gitdir, bytes))) await this.evict();
          else {
            await this.discard(gitdir);
            if (gitdir.includes('.busy-')) this.memory.delete(key);
          }
        } finally {
          done();
        }
      },
    };
  }

  /**
   * Moves the idle repository `slot` to `path`, with its bytes as last counted; undefined when there
   * is none (or another job took it first).
   */
  private async take(slot: string, path: string): Promise<{ bytes: number | undefined } | undefined> {
    try {
      await rename(slot, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    return { bytes: (await readMeta(path))?.bytes };
  }

  /**
   * Makes `path` the idle repository of `key` again, `bytes` large (measured when undefined); false
   * (and `path` removed) when another job put one back first.
   */
  private async giveBack(key: string, path: string, bytes: number | undefined): Promise<boolean> {
    const meta: Meta = { version: 1, bytes: bytes ?? (await treeBytes(path)), lastUsed: this.now() };
    await writeFile(join(path, META_FILE), JSON.stringify(meta));
    try {
      await rename(path, join(this.options.dir, key));
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw error;
      await this.discard(path);
      return false;
    }
  }

  /** Removes the least recently used idle repositories until the rest fit in maxBytes. */
  private async evict(): Promise<void> {
    const byRecency = [...(await this.idle()).entries()].sort(([, a], [, b]) => b.lastUsed - a.lastUsed);
    let kept = 0;
    for (const [key, meta] of byRecency) {
      kept += meta.bytes;
      if (kept <= this.options.maxBytes) continue;
      this.memory.delete(key);
      // Renamed first, so no job can take a half-deleted repository.
      await this.discard(join(this.options.dir, key));
    }
  }

  private async discard(path: string): Promise<void> {
    const trash = join(this.options.dir, `.trash-${this.owner}-${randomUUID()}`);
    try {
      await rename(path, trash);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // taken or removed by another job
      throw error;
    }
    await rm(trash, { recursive: true, force: true });
  }

  /** Creates the directory and removes what owners that are gone left behind, and idle repositories without valid metadata. */
  private async prepare(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true });
    for (const name of await readdir(this.options.dir)) {
      const path = join(this.options.dir, name);
      const owner = OWNER_IN_NAME.exec(name);
      if (owner) {
        const pid = Number(owner[1]);
        const gone = pid === process.pid ? !liveNonces.has(owner[2] as string) : !isProcessAlive(pid);
        if (gone) await rm(path, { recursive: true, force: true });
      } else if (KEY.test(name) && !(await readMeta(path))) {
        await this.discard(path);
      }
    }
  }
}

async function readMeta(repo: string): Promise<Meta | undefined> {
  try {
    const parsed = metaSchema.safeParse(JSON.parse(await readFile(join(repo, META_FILE), 'utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Bytes of the files of the repository at `dir`, its cache metadata aside (as a count carried from job to job has them). */
async function treeBytes(dir: string, top = true): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (top && entry.name === META_FILE) continue;
    const path = join(dir, entry.name);
    total += entry.isDirectory() ? await treeBytes(path, false) : (await stat(path)).size;
  }
  return total;
}
