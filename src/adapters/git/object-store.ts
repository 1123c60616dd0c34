/**
 * The object database of a bare repository, read and written directly: loose objects and packs
 * (index version 2) with Node's zlib and crypto. What a job reads is the handful of trees and
 * blobs on the paths its patch touches, and what it writes is kept in memory until the push, which
 * sends exactly those objects as one pack; the repository keeps that same pack, with an index
 * (`packWritten`, `keepPack`): two files and one deflate per object, where loose objects cost a
 * directory, a file and a second deflate each.
 *
 * Written here rather than through isomorphic-git's readObject / writeTree / packObjects: each of
 * those calls wraps the file system anew (two thrown errors to probe it), looks for a loose object
 * and lists the pack directory, inflates in JavaScript and deflates through web streams; over the
 * ~150 objects of a warm job that was most of the job's own CPU time. The commit too: isomorphic-git's
 * writeCommit wraps the file system and deflates through web streams (about 0.1 s of CPU the first
 * time in a process). isomorphic-git still fetches a whole branch where a remote cannot filter (and
 * so writes packs read here) and writes refs.
 *
 * A partial repository (upload-pack.ts fetched only what jobs read) lacks most objects. The store
 * then has a promisor: the trees and blobs a job is about to read are fetched together
 * (`prefetch`), and one it reads unannounced is fetched alone. A pack received so is kept as it
 * came, with an index made here and git's `.promisor` mark (objects it references may be missing),
 * so the git CLI reads the repository as the partial clone it is.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32, deflateSync, inflateSync } from 'node:zlib';
import { RemoteAnswerError } from './pkt-line';

export type EntryType = 'blob' | 'tree' | 'commit';
export type ObjectType = EntryType | 'tag';

export interface TreeEntry {
  readonly mode: string;
  readonly path: string;
  readonly oid: string;
  readonly type: EntryType;
}

export interface ObjectStore {
  /** True when the repository holds the object itself (a partial one may lack it, or what it references). */
  has(oid: string): Promise<boolean>;
  /**
   * Objects about to be read: a partial repository fetches those it lacks in one request; a complete
   * one does nothing. `treeLevels`: the trees that many levels below the wanted trees come with them.
   */
  prefetch(oids: readonly string[], options?: PrefetchOptions): Promise<void>;
  readTree(oid: string): Promise<TreeEntry[]>;
  /** Writes a tree; entries in any order (git's order is applied on write). */
  writeTree(entries: readonly TreeEntry[]): Promise<string>;
  readBlob(oid: string): Promise<Uint8Array>;
  writeBlob(bytes: Uint8Array): Promise<string>;
}

export interface PrefetchOptions {
  /** Levels of trees below the wanted trees to bring in the same request, without blobs. @default 0 */
  readonly treeLevels?: number;
}

/** The fields of a commit a job reads: its tree, parents and message. */
export interface CommitSummary {
  readonly tree: string;
  readonly parent: string[];
  readonly message: string;
}

/** Who made a commit and when: seconds since the epoch, offset in minutes west of UTC (as Date's getTimezoneOffset). */
export interface CommitIdentity {
  readonly name: string;
  readonly email: string;
  readonly timestamp: number;
  readonly timezoneOffset: number;
}

/** A commit to write. */
export interface NewCommit {
  readonly tree: string;
  readonly parent: readonly string[];
  readonly author: CommitIdentity;
  readonly committer: CommitIdentity;
  readonly message: string;
}

/** The objects a store wrote as one pack (version 2, whole objects) and its index (version 2). */
export interface WrittenPack {
  readonly pack: Buffer;
  readonly index: Buffer;
  /** The pack's SHA-1 (its last 20 bytes), in hex: git names the pack's files by it. */
  readonly checksum: string;
}

/**
 * Fetches trees and blobs by id into a partial repository (upload-pack.ts, then keepReceived), or
 * does nothing where the remote cannot send objects by id (the repository is then whole).
 */
export type ObjectPromisor = (oids: readonly string[], options?: PrefetchOptions) => Promise<void>;

/** An object the repository does not hold (yet: a fetch may bring it). */
export class ObjectNotFoundError extends Error {
  override readonly name = 'ObjectNotFoundError';
  constructor(readonly oid: string) {
    super(`object ${oid} is not in the repository`);
  }
}

/**
 * A tree entry whose name git's verify_path() refuses (a separator in it, `.` / `..` and every other
 * name of only dots and spaces, `.git` however spelled on NTFS or HFS+, `git~1`): the same names
 * isomorphic-git refuses on reading, so such a branch fails the same way whichever reads it.
 */
export class UnsafeTreeEntryError extends Error {
  override readonly name = 'UnsafeTreeEntryError';
  constructor(readonly entryName: string) {
    super(`tree entry ${JSON.stringify(entryName)} is a name git refuses`);
  }
}

const TYPE_BY_CODE: Readonly<Record<number, ObjectType>> = { 1: 'commit', 2: 'tree', 3: 'blob', 4: 'tag' };
const CODE_BY_TYPE: Readonly<Record<ObjectType, number>> = { commit: 1, tree: 2, blob: 3, tag: 4 };
const OFS_DELTA = 6;
const REF_DELTA = 7;
const IDX_MAGIC = 0xff744f63;

/** Entry modes as git stores them in a tree, and as isomorphic-git names them. */
const ENTRY_MODES: Readonly<Record<string, { mode: string; type: EntryType }>> = {
  '40000': { mode: '040000', type: 'tree' },
  '100644': { mode: '100644', type: 'blob' },
  '100755': { mode: '100755', type: 'blob' },
  '120000': { mode: '120000', type: 'blob' },
  '160000': { mode: '160000', type: 'commit' },
};

/** Code points HFS+ ignores in names (git's is_hfs_dotgit() list). */
const HFS_IGNORED = /[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/g;

function unsafeEntryName(name: string): boolean {
  if (name.includes('/') || name.includes('\\')) return true;
  // NTFS: anything from a `:` names a stream of the file before it; trailing dots and spaces are dropped.
  const beforeStream = name.replace(HFS_IGNORED, '').split(':')[0] as string;
  const resolved = beforeStream.toLowerCase().replace(/[. ]+$/, '');
  return (resolved === '' && beforeStream !== '') || resolved === '.git' || /^\.?git~[1-9]$/.test(resolved);
}

interface Pack {
  readonly index: Buffer;
  readonly data: Buffer;
}

/** Packs already read, per repository (the lease's memory): a pack's name is its checksum, so it never changes. */
const packsByRepository = new WeakMap<object, Map<string, Pack>>();

export class GitObjectStore implements ObjectStore {
  /** What this store wrote, by id, in memory only: sent as the push's pack, and kept by keepPack. */
  private readonly written = new Map<string, { type: ObjectType; content: Uint8Array }>();
  private readonly packs: Map<string, Pack>;
  private packNames: string[] | undefined;
  /** Bytes of the files this store added to the repository (packs kept and received, their indexes). */
  bytesAdded = 0;

  /**
   * `memory` is the repository's in-memory cache (RepoLease.memory): packs read once stay there.
   * `promisor` fetches what a partial repository lacks; without one a missing object is an error.
   */
  constructor(
    private readonly gitdir: string,
    memory: object,
    private readonly promisor?: ObjectPromisor,
  ) {
    let packs = packsByRepository.get(memory);
    if (!packs) packsByRepository.set(memory, (packs = new Map()));
    this.packs = packs;
  }

  async prefetch(oids: readonly string[], options?: PrefetchOptions): Promise<void> {
    if (!this.promisor) return;
    const missing: string[] = [];
    for (const oid of new Set(oids)) if (!(await this.has(oid))) missing.push(oid);
    if (missing.length > 0) await this.promisor(missing, options);
  }

  async readTree(oid: string): Promise<TreeEntry[]> {
    return parseTree(await this.readTyped(oid, 'tree'));
  }

  async readBlob(oid: string): Promise<Uint8Array> {
    return this.readTyped(oid, 'blob');
  }

  async readCommit(oid: string): Promise<CommitSummary> {
    return parseCommit(await this.readTyped(oid, 'commit'));
  }

  /** True when the repository holds packs received with a filter: objects they reference may be missing. */
  async partial(): Promise<boolean> {
    return (await this.packDirectory()).some((name) => name.endsWith('.promisor'));
  }

  /** True when the repository holds `oid` itself (what it references may still be missing from a partial repository). */
  async has(oid: string): Promise<boolean> {
    if (this.written.has(oid) || (await this.locate(oid, false))) return true;
    const loose = await stat(this.loosePath(oid)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    return loose !== undefined || (await this.locate(oid, true)) !== undefined;
  }

  writeTree(entries: readonly TreeEntry[]): Promise<string> {
    return this.write('tree', serializeTree(entries));
  }

  writeBlob(bytes: Uint8Array): Promise<string> {
    return this.write('blob', bytes);
  }

  writeCommit(commit: NewCommit): Promise<string> {
    return this.write('commit', Buffer.from(serializeCommit(commit), 'utf8'));
  }

  /** Everything this store wrote, as a pack with its index. Nothing is on disk until keepPack. */
  packWritten(): WrittenPack {
    const header = Buffer.alloc(12);
    header.write('PACK', 0, 'ascii');
    header.writeUInt32BE(2, 4);
    header.writeUInt32BE(this.written.size, 8);
    const parts: Buffer[] = [header];
    const entries: IndexEntry[] = [];
    let offset = header.length;
    for (const [oid, { type, content }] of this.written) {
      const entry = Buffer.concat([packEntryHeader(CODE_BY_TYPE[type], content.length), deflateSync(content)]);
      entries.push({ oid: Buffer.from(oid, 'hex'), offset, crc: crc32(entry) });
      parts.push(entry);
      offset += entry.length;
    }
    const checksum = createHash('sha1').update(Buffer.concat(parts)).digest();
    return {
      pack: Buffer.concat([...parts, checksum]),
      index: packIndex(entries, checksum),
      checksum: checksum.toString('hex'),
    };
  }

  /**
   * Stores `written` (from packWritten) in the repository, where this store and later ones read it
   * without reading the file again (the repository's memory keeps it). Returns the bytes written.
   */
  async keepPack(written: WrittenPack): Promise<number> {
    const name = `pack-${written.checksum}`;
    const base = join(this.gitdir, 'objects', 'pack', name);
    // The pack before its index: a reader finds packs by their index, so it never sees one without the other.
    await writeFile(`${base}.pack`, written.pack);
    await writeFile(`${base}.idx`, written.index);
    this.packs.set(name, { index: written.index, data: written.pack });
    if (this.packNames && !this.packNames.includes(name)) this.packNames.push(name);
    const bytes = written.pack.length + written.index.length;
    this.bytesAdded += bytes;
    return bytes;
  }

  /**
   * Keeps a pack the remote sent for a partial repository, as it came (no thin pack: every delta's
   * base is in it), with an index and the `.promisor` mark (empty: git reads no content from it).
   * Every object is named by hashing it here, so the remote cannot pass off one object as another.
   * Returns those of `wanted` the pack lacks.
   */
  async keepReceived(pack: Buffer, wanted: readonly string[]): Promise<string[]> {
    const { index, checksum, oids } = indexPack(pack);
    if (oids.size > 0) {
      await this.keepPack({ pack, index, checksum });
      await writeFile(join(this.gitdir, 'objects', 'pack', `pack-${checksum}.promisor`), '');
    }
    return wanted.filter((oid) => !oids.has(oid));
  }

  private async readTyped(oid: string, type: ObjectType): Promise<Buffer> {
    // A commit is never fetched alone: without a depth its whole history would come (branch-fetch.ts asks with one).
    const object = await this.read(oid, type !== 'commit');
    if (object.type !== type) throw new Error(`object ${oid} is a ${object.type}, not a ${type}`);
    return Buffer.from(object.content.buffer, object.content.byteOffset, object.content.byteLength);
  }

  private write(type: ObjectType, content: Uint8Array): Promise<string> {
    const oid = objectId(type, content);
    if (!this.written.has(oid)) this.written.set(oid, { type, content });
    return Promise.resolve(oid);
  }

  /**
   * Packs first: nearly everything a job reads is in them, searched in memory, while each loose
   * lookup that misses is a failed open. Loose objects come only from other writers (isomorphic-git,
   * the git CLI) and are read all the same. `fetch`: a partial repository asks the remote for it.
   */
  private async read(oid: string, fetch: boolean): Promise<{ type: ObjectType; content: Uint8Array }> {
    const mine = this.written.get(oid);
    if (mine) return mine;
    const found = await this.readLocal(oid);
    if (found) return found;
    if (fetch && this.promisor) {
      await this.prefetch([oid]);
      const fetched = await this.readLocal(oid);
      if (fetched) return fetched;
    }
    throw new ObjectNotFoundError(oid);
  }

  private async readLocal(oid: string): Promise<{ type: ObjectType; content: Buffer } | undefined> {
    const packed = (await this.locate(oid, false)) ?? (await this.readLoose(oid)) ?? (await this.locate(oid, true));
    return packed && 'pack' in packed ? this.readAt(packed.pack, packed.offset) : packed;
  }

  private async readLoose(oid: string): Promise<{ type: ObjectType; content: Buffer } | undefined> {
    const raw = await readFile(this.loosePath(oid)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (!raw) return undefined;
    const wrapped = inflateSync(raw);
    const nul = wrapped.indexOf(0);
    const [type, size] = wrapped.subarray(0, nul).toString('ascii').split(' ');
    const content = wrapped.subarray(nul + 1);
    if (!isObjectType(type) || Number(size) !== content.length) throw new Error(`loose object ${oid} is corrupt`);
    return { type, content };
  }

  private loosePath(oid: string): string {
    return join(this.gitdir, 'objects', oid.slice(0, 2), oid.slice(2));
  }

  /** Where `oid` is in a pack; `rescan` lists the pack directory again (a fetch since the last look added one). */
  private async locate(oid: string, rescan: boolean): Promise<{ pack: Pack; offset: number } | undefined> {
    if (rescan || !this.packNames) {
      const fresh = (await this.packDirectory())
        .filter((n) => n.endsWith('.idx'))
        .map((n) => n.slice(0, -'.idx'.length));
      if (rescan && this.packNames && fresh.length === this.packNames.length) return undefined;
      this.packNames = fresh;
    }
    const wanted = Buffer.from(oid, 'hex');
    for (const name of this.packNames) {
      const pack = await this.pack(name);
      const offset = findOffset(pack.index, wanted);
      if (offset !== undefined) return { pack, offset };
    }
    return undefined;
  }

  private async packDirectory(): Promise<string[]> {
    return readdir(join(this.gitdir, 'objects', 'pack')).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return [];
      throw error;
    });
  }

  private async pack(name: string): Promise<Pack> {
    const known = this.packs.get(name);
    if (known) return known;
    const base = join(this.gitdir, 'objects', 'pack', name);
    const [index, data] = await Promise.all([readFile(`${base}.idx`), readFile(`${base}.pack`)]);
    if (index.readUInt32BE(0) !== IDX_MAGIC || index.readUInt32BE(4) !== 2)
      throw new Error(`${name}.idx is not a version 2 pack index`);
    const pack = { index, data };
    this.packs.set(name, pack);
    return pack;
  }

  /** The object at `offset` of `pack`, its deltas applied (a ref-delta's base may be anywhere in the repository). */
  private async readAt(pack: Pack, offset: number): Promise<{ type: ObjectType; content: Buffer }> {
    const entry = entryHeader(pack.data, offset);
    let base: { type: ObjectType; content: Buffer } | undefined;
    if (entry.baseOffset !== undefined) base = await this.readAt(pack, entry.baseOffset);
    else if (entry.baseOid !== undefined) {
      const found = await this.read(entry.baseOid, false);
      base = { type: found.type, content: Buffer.from(found.content) };
    }
    return entryObject(entry, inflateSync(pack.data.subarray(entry.dataAt)), base);
  }
}

/** A pack entry's header: type code, inflated size, where its deflated data starts, and a delta's base. */
interface EntryHeader {
  readonly offset: number;
  readonly code: number;
  readonly size: number;
  readonly dataAt: number;
  readonly baseOffset?: number;
  readonly baseOid?: string;
}

function entryHeader(data: Buffer, offset: number): EntryHeader {
  let at = offset;
  let byte = data[at++] as number;
  const code = (byte >> 4) & 7;
  let size = byte & 15;
  for (let shift = 4; byte & 0x80; shift += 7) {
    byte = data[at++] as number;
    size += (byte & 0x7f) * 2 ** shift;
  }
  if (code === OFS_DELTA) {
    byte = data[at++] as number;
    let distance = byte & 0x7f;
    while (byte & 0x80) {
      byte = data[at++] as number;
      distance = (distance + 1) * 128 + (byte & 0x7f);
    }
    return { offset, code, size, dataAt: at, baseOffset: offset - distance };
  }
  if (code === REF_DELTA)
    return { offset, code, size, dataAt: at + 20, baseOid: data.subarray(at, at + 20).toString('hex') };
  return { offset, code, size, dataAt: at };
}

/** The object an entry holds, given its inflated data and, for a delta, its base. */
function entryObject(
  entry: EntryHeader,
  inflated: Buffer,
  base: { type: ObjectType; content: Buffer } | undefined,
): { type: ObjectType; content: Buffer } {
  if (inflated.length !== entry.size)
    throw new Error(`pack object at ${entry.offset}: ${inflated.length} bytes, the header says ${entry.size}`);
  if (base) return { type: base.type, content: applyDelta(base.content, inflated) };
  const type = TYPE_BY_CODE[entry.code];
  if (!type) throw new Error(`pack object at ${entry.offset} has unknown type ${entry.code}`);
  return { type, content: inflated };
}

function objectId(type: ObjectType, content: Uint8Array): string {
  return createHash('sha1').update(`${type} ${content.length}\0`, 'ascii').update(content).digest('hex');
}

/** A pack the remote sent that git could not read either: the remote does not speak git. */
function malformed(why: string): RemoteAnswerError {
  return new RemoteAnswerError(`the remote's pack ${why}`, 'malformed');
}

/**
 * Indexes a pack received from a remote (what git's index-pack does): checks its checksum, reads
 * every entry (the deflated length is only known by inflating), resolves the deltas, all of whose
 * bases must be in the pack, and names each object by its hash. Packs received by a job hold the
 * few objects it asked for, so everything is resolved in memory.
 */
export function indexPack(pack: Buffer): { index: Buffer; checksum: string; oids: Set<string> } {
  const end = pack.length - 20;
  if (end < 12 || pack.toString('latin1', 0, 4) !== 'PACK' || ![2, 3].includes(pack.readUInt32BE(4)))
    throw malformed('is not a version 2 pack');
  const checksum = pack.subarray(end);
  if (!createHash('sha1').update(pack.subarray(0, end)).digest().equals(checksum))
    throw malformed('does not match its checksum');
  try {
    return indexEntries(pack, checksum);
  } catch (error) {
    // The bytes came as sent (the checksum matched): an entry that cannot be read was made so by the remote.
    if (error instanceof RemoteAnswerError) throw error;
    throw malformed(`holds an object that cannot be read: ${(error as Error).message}`);
  }
}

function indexEntries(pack: Buffer, checksum: Buffer): { index: Buffer; checksum: string; oids: Set<string> } {
  const end = pack.length - 20;
  const entries: { header: EntryHeader; inflated: Buffer; crc: number }[] = [];
  for (let at = 12, n = pack.readUInt32BE(8); entries.length < n;) {
    if (at >= end) throw malformed(`ends after ${entries.length} of its ${n} objects`);
    const header = entryHeader(pack, at);
    const { buffer: inflated, engine } = inflateSync(pack.subarray(header.dataAt, end), { info: true }) as unknown as {
      buffer: Buffer;
      engine: { bytesWritten: number };
    };
    const next = header.dataAt + engine.bytesWritten;
    entries.push({ header, inflated, crc: crc32(pack.subarray(at, next)) });
    at = next;
    if (entries.length === n && at !== end) throw malformed('has bytes after its last object');
  }
  // Deltas are resolved once their base is (by offset, or by id within the pack), pass after pass.
  const byOffset = new Map<number, { type: ObjectType; content: Buffer; oid: string }>();
  const byOid = new Map<string, { type: ObjectType; content: Buffer }>();
  for (let pending = entries; pending.length > 0;) {
    const later = pending.filter(({ header, inflated }) => {
      const { baseOffset, baseOid } = header;
      const base =
        baseOffset !== undefined ? byOffset.get(baseOffset) : baseOid !== undefined ? byOid.get(baseOid) : undefined;
      if (!base && (baseOffset !== undefined || baseOid !== undefined)) return true;
      const object = entryObject(header, inflated, base);
      const oid = objectId(object.type, object.content);
      byOffset.set(header.offset, { ...object, oid });
      byOid.set(oid, object);
      return false;
    });
    if (later.length === pending.length) throw malformed(`holds ${later.length} deltas whose base it lacks`);
    pending = later;
  }
  const indexed = entries.map(({ header, crc }) => ({
    oid: Buffer.from((byOffset.get(header.offset) as { oid: string }).oid, 'hex'),
    offset: header.offset,
    crc,
  }));
  return { index: packIndex(indexed, checksum), checksum: checksum.toString('hex'), oids: new Set(byOid.keys()) };
}

function isObjectType(type: string | undefined): type is ObjectType {
  return type === 'blob' || type === 'tree' || type === 'commit' || type === 'tag';
}

/** Offset of `oid` in a version 2 pack index, by binary search within its first byte's fan-out range. */
function findOffset(index: Buffer, oid: Buffer): number | undefined {
  const first = oid[0] as number;
  const count = index.readUInt32BE(8 + 255 * 4);
  let low = first === 0 ? 0 : index.readUInt32BE(8 + (first - 1) * 4);
  let high = index.readUInt32BE(8 + first * 4);
  const names = 8 + 256 * 4;
  while (low < high) {
    const mid = (low + high) >>> 1;
    const cmp = index.compare(oid, 0, 20, names + mid * 20, names + mid * 20 + 20);
    if (cmp === 0) {
      const small = index.readUInt32BE(names + count * 24 + mid * 4);
      if (!(small & 0x80000000)) return small;
      const large = names + count * 28 + (small & 0x7fffffff) * 8;
      return index.readUInt32BE(large) * 2 ** 32 + index.readUInt32BE(large + 4);
    }
    if (cmp > 0) high = mid;
    else low = mid + 1;
  }
  return undefined;
}

/** git's delta format: the sizes of base and result, then copies from the base and inserted bytes. */
function applyDelta(base: Buffer, delta: Buffer): Buffer {
  let at = 0;
  const varint = () => {
    let value = 0;
    let byte: number;
    let shift = 0;
    do {
      byte = delta[at++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    } while (byte & 0x80);
    return value;
  };
  if (varint() !== base.length) throw new Error('delta does not apply: base size differs');
  const result = Buffer.alloc(varint());
  let out = 0;
  while (at < delta.length) {
    const op = delta[at++] as number;
    if (op & 0x80) {
      let offset = 0;
      let size = 0;
      for (let bit = 0; bit < 4; bit++) if (op & (1 << bit)) offset += (delta[at++] as number) * 2 ** (8 * bit);
      for (let bit = 0; bit < 3; bit++) if (op & (0x10 << bit)) size += (delta[at++] as number) * 2 ** (8 * bit);
      if (size === 0) size = 0x10000;
      if (offset + size > base.length || out + size > result.length)
        throw new Error('delta does not apply: copy out of range');
      base.copy(result, out, offset, offset + size);
      out += size;
    } else if (op > 0) {
      if (at + op > delta.length || out + op > result.length)
        throw new Error('delta does not apply: insert out of range');
      delta.copy(result, out, at, at + op);
      at += op;
      out += op;
    } else {
      throw new Error('delta does not apply: reserved opcode 0');
    }
  }
  if (out !== result.length) throw new Error('delta does not apply: result size differs');
  return result;
}

interface IndexEntry {
  readonly oid: Buffer;
  readonly offset: number;
  /** CRC-32 of the entry's bytes in the pack (header and deflated data), which git checks when it reuses them. */
  readonly crc: number;
}

/** A version 2 pack index: fan-out, sorted names, CRCs, offsets (all below 2 GiB here), then both checksums. */
function packIndex(entries: IndexEntry[], packChecksum: Buffer): Buffer {
  const sorted = [...entries].sort((a, b) => Buffer.compare(a.oid, b.oid));
  const fanout = Buffer.alloc(256 * 4);
  for (let byte = 0, at = 0; byte < 256; byte++) {
    while (at < sorted.length && (sorted[at] as IndexEntry).oid[0] === byte) at++;
    fanout.writeUInt32BE(at, byte * 4);
  }
  const header = Buffer.alloc(8);
  header.writeUInt32BE(IDX_MAGIC, 0);
  header.writeUInt32BE(2, 4);
  const crcs = Buffer.alloc(sorted.length * 4);
  const offsets = Buffer.alloc(sorted.length * 4);
  sorted.forEach((entry, i) => {
    crcs.writeUInt32BE(entry.crc, i * 4);
    offsets.writeUInt32BE(entry.offset, i * 4);
  });
  const body = Buffer.concat([header, fanout, ...sorted.map((e) => e.oid), crcs, offsets, packChecksum]);
  return Buffer.concat([body, createHash('sha1').update(body).digest()]);
}

function packEntryHeader(code: number, size: number): Buffer {
  const bytes = [(code << 4) | (size & 15)];
  let rest = Math.floor(size / 16);
  while (rest > 0) {
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) | 0x80;
    bytes.push(rest & 0x7f);
    rest = Math.floor(rest / 128);
  }
  return Buffer.from(bytes);
}

function parseTree(content: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (let at = 0; at < content.length;) {
    const space = content.indexOf(32, at);
    const nul = content.indexOf(0, space + 1);
    if (space < 0 || nul < 0 || nul + 21 > content.length) throw new Error('tree object is corrupt');
    const rawMode = content.subarray(at, space).toString('ascii');
    const known = ENTRY_MODES[rawMode];
    if (!known) throw new Error(`tree entry mode ${rawMode} is not one git writes`);
    const path = content.subarray(space + 1, nul).toString('utf8');
    if (unsafeEntryName(path)) throw new UnsafeTreeEntryError(path);
    entries.push({
      mode: known.mode,
      path,
      oid: content.subarray(nul + 1, nul + 21).toString('hex'),
      type: known.type,
    });
    at = nul + 21;
  }
  return entries;
}

/** git's order: names compared as bytes, a tree's name as if it ended with `/`. */
function serializeTree(entries: readonly TreeEntry[]): Buffer {
  const keyed = entries.map((entry) => {
    const name = Buffer.from(entry.path, 'utf8');
    return { entry, name, key: entry.type === 'tree' ? Buffer.concat([name, Buffer.from('/')]) : name };
  });
  keyed.sort((a, b) => Buffer.compare(a.key, b.key));
  return Buffer.concat(
    keyed.flatMap(({ entry, name }) => [
      Buffer.from(`${entry.mode.replace(/^0/, '')} `, 'ascii'),
      name,
      Buffer.from([0]),
      Buffer.from(entry.oid, 'hex'),
    ]),
  );
}

/**
 * A commit as isomorphic-git's writeCommit renders one (no signature): jobs that ran before this
 * code wrote their commits with it, and a replayed job must produce the same commit, byte for byte.
 * The message loses carriage returns and leading newlines and ends with exactly one newline.
 */
export function serializeCommit(commit: NewCommit): string {
  const message = `${commit.message.replace(/\r/g, '').replace(/^\n+/, '').replace(/\n+$/, '')}\n`;
  return [
    `tree ${commit.tree}\n`,
    ...commit.parent.map((parent) => `parent ${parent}\n`),
    `author ${identity(commit.author)}\n`,
    `committer ${identity(commit.committer)}\n`,
    '\n',
    message,
  ].join('');
}

/** `name <email> seconds +hhmm`; the offset is minutes west of UTC, so positive is `-` (and -0 is `-0000`, as isomorphic-git keeps it). */
function identity({ name, email, timestamp, timezoneOffset }: CommitIdentity): string {
  const east = timezoneOffset === 0 ? timezoneOffset : -timezoneOffset;
  const sign = Math.sign(east) === -1 || Object.is(east, -0) ? '-' : '+';
  const minutes = Math.abs(timezoneOffset);
  const hh = String(Math.floor(minutes / 60)).padStart(2, '0');
  const mm = String(minutes % 60).padStart(2, '0');
  return `${name} <${email}> ${timestamp} ${sign}${hh}${mm}`;
}

function parseCommit(content: Buffer): CommitSummary {
  const text = content.toString('utf8');
  const end = text.indexOf('\n\n');
  const headers = (end < 0 ? text : text.slice(0, end)).split('\n');
  const tree = headers.find((h) => h.startsWith('tree '))?.slice('tree '.length);
  if (tree === undefined) throw new Error('commit object has no tree');
  return {
    tree,
    parent: headers.filter((h) => h.startsWith('parent ')).map((h) => h.slice('parent '.length)),
    message: end < 0 ? '' : text.slice(end + 2),
  };
}
