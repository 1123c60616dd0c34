/**
 * The patch engine's byte codec (src/core/patch/bytes.ts): any byte sequence decodes to text and
 * encodes back to exactly itself; UTF-8 decodes to its characters.
 */
import { decodePatchBytes, encodePatchText } from '../../src/core/patch';

const roundTrip = (bytes: Uint8Array) => Buffer.from(encodePatchText(decodePatchBytes(bytes)));

describe('decodePatchBytes / encodePatchText', () => {
  test.each<[string, number[]]>([
    ['Latin-1 "café"', [0x63, 0x61, 0x66, 0xe9]],
    ['a lone continuation byte', [0x80]],
    ['an overlong NUL', [0xc0, 0x80]],
    ['a UTF-8-encoded surrogate (not UTF-8)', [0xed, 0xa0, 0x80]],
    ['a sequence cut at the end', [0x61, 0xe2, 0x82]],
    ['a code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['Windows-1252 quotes', [0x93, 0x71, 0x94]],
    ['U+10080 (its low surrogate is in the escape range) then an escaped byte', [0xf0, 0x90, 0x82, 0x80, 0x80]],
    ['every byte value', Array.from({ length: 256 }, (_, i) => i)],
  ])('%s round-trips exactly', (_what, values) => {
    const bytes = Uint8Array.from(values);
    expect(roundTrip(bytes).equals(Buffer.from(bytes))).toBe(true);
  });

  test('UTF-8 decodes to its characters (a BOM kept), bytes that are not to one escape each', () => {
    expect(decodePatchBytes(Buffer.from('\ufeffcafé 😀'))).toBe('\ufeffcafé 😀');
    expect(decodePatchBytes(Uint8Array.from([0x61, 0xe9, 0x62]))).toBe('a\udce9b');
  });

  test('10,000 random byte strings round-trip', () => {
    // A fixed linear congruential sequence: the same cases on every run.
    let seed = 12345;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % 256;
    for (let n = 0; n < 10_000; n++) {
      const bytes = Uint8Array.from({ length: 1 + (n % 24) }, next);
      expect(roundTrip(bytes).equals(Buffer.from(bytes))).toBe(true);
    }
  });
});
