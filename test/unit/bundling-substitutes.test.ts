/**
 * The modules the bundles take in place of pako and sha.js (lib/constructs/worker.ts ESM_ALIASES)
 * answer as those packages do for every use isomorphic-git makes of them, checked against the
 * packages themselves (both are in node_modules as isomorphic-git's dependencies).
 */
import { deflateSync } from 'node:zlib';
import pakoNodeZlib, { Inflate } from '../../lib/bundling/pako-node-zlib';
import Sha1 from '../../lib/bundling/sha1-node-crypto';

const pako = require('pako') as {
  Inflate: new () => {
    push(chunk: Uint8Array, last: boolean): boolean;
    result?: Uint8Array;
    err: number;
    strm: { avail_in: number };
  };
  inflate(input: Uint8Array): Uint8Array;
};
const ShaJs = require('sha.js/sha1.js') as new () => {
  update(data: Uint8Array | string): { digest(encoding?: string): Buffer | string };
};

/** Deterministic bytes that deflate poorly, so a stream spans several chunks. */
function noise(length: number, seed: number): Buffer {
  const bytes = Buffer.alloc(length);
  let x = seed;
  for (let i = 0; i < length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

/** Feeds `input` in `chunkSize` pieces until the inflater has a result, as isomorphic-git's pack reader does. */
function inflateChunked(
  inflater: {
    push(chunk: Uint8Array, last: boolean): boolean;
    result?: Uint8Array;
    err: number;
    strm: { avail_in: number };
  },
  input: Buffer,
  chunkSize: number,
) {
  let at = 0;
  let last = 0;
  while (!inflater.result && at < input.length && inflater.err === 0) {
    const chunk = input.subarray(at, at + chunkSize);
    inflater.push(chunk, false);
    last = chunk.length;
    at += chunk.length;
  }
  return {
    result: inflater.result && Buffer.from(inflater.result),
    err: inflater.err,
    end: at - last + (last - inflater.strm.avail_in),
  };
}

describe('the pako substitute', () => {
  const objects = [Buffer.alloc(0), Buffer.from('tree 0\0'), noise(70_000, 1), Buffer.from('x'.repeat(50_000))];

  it.each([100, 4096, 65_536, 1_000_000])(
    'inflates a stream followed by other data in %i-byte chunks, ending where pako ends',
    (chunkSize) => {
      for (const object of objects) {
        const deflated = deflateSync(object);
        const input = Buffer.concat([deflated, deflateSync(noise(3000, 2))]);
        const ours = inflateChunked(new Inflate(), input, chunkSize);
        const theirs = inflateChunked(new pako.Inflate(), input, chunkSize);
        expect(ours).toEqual(theirs);
        expect(ours.result).toEqual(object);
        expect(ours.end).toBe(deflated.length);
      }
    },
  );

  it('reports corrupt data as an error, as pako does', () => {
    const ours = inflateChunked(new Inflate(), Buffer.from('not a deflate stream'), 64);
    const theirs = inflateChunked(new pako.Inflate(), Buffer.from('not a deflate stream'), 64);
    expect(ours.err).not.toBe(0);
    expect(theirs.err).not.toBe(0);
    expect(ours.result).toBeUndefined();
  });

  it('inflates a whole stream, ignoring what follows it, and deflates what inflates back', () => {
    const object = noise(10_000, 3);
    const input = Buffer.concat([deflateSync(object), Buffer.from('next object')]);
    expect(Buffer.from(pakoNodeZlib.inflate(input))).toEqual(Buffer.from(pako.inflate(input)));
    expect(pakoNodeZlib.inflate(pakoNodeZlib.deflate(object))).toEqual(object);
  });
});

describe('the sha.js substitute', () => {
  it.each([Buffer.alloc(0), Buffer.from('blob 5\0hello'), noise(100_000, 4)])(
    'hashes as sha.js does, as hex and as bytes',
    (bytes) => {
      expect(new Sha1().update(bytes).digest('hex')).toBe(new ShaJs().update(bytes).digest('hex'));
      expect(new Sha1().update(bytes).digest()).toEqual(new ShaJs().update(bytes).digest());
    },
  );

  it('hashes in several updates as in one', () => {
    const hash = new Sha1();
    hash.update(Buffer.from('blob 11\0')).update('hello world');
    expect(hash.digest('hex')).toBe(new Sha1().update('blob 11\0hello world').digest('hex'));
  });
});
