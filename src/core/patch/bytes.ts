/**
 * Bytes as text for the patch engine, without losing one. jsdiff parses and applies patches on
 * JavaScript strings, but a diff (and the files it edits) may hold any bytes: Latin-1, Shift-JIS,
 * a stray invalid sequence. Decoding them as UTF-8 would turn each invalid byte into U+FFFD.
 *
 * So bytes are decoded the way Python's `surrogateescape` does: every well-formed UTF-8 sequence
 * becomes its character, and every other byte B (always >= 0x80) becomes the lone surrogate
 * U+DC00 + B, which no well-formed UTF-8 can produce. Encoding reverses it exactly, so
 * `encodePatchText(decodePatchBytes(b))` is `b` for every byte sequence. Lines still split on
 * 0x0A (never part of a multi-byte sequence), and the same line of bytes decodes to the same
 * string in the diff and in the file, so hunks match byte for byte.
 */

const ESCAPE_BASE = 0xdc00;
const ESCAPED = /[\udc80-\udcff]/u;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const UTF8 = new TextEncoder();

/** Bytes to text: UTF-8 where the bytes are UTF-8, one escape per other byte. */
export function decodePatchBytes(bytes: Uint8Array): string {
  try {
    // ignoreBOM keeps a leading BOM as content instead of silently dropping bytes.
    return STRICT_UTF8.decode(bytes);
  } catch {
    // Not UTF-8 throughout: walk the bytes (only on this path).
  }
  const parts: string[] = [];
  let run = 0;
  let i = 0;
  while (i < bytes.length) {
    const length = sequenceLength(bytes, i);
    if (length > 0) {
      i += length;
      continue;
    }
    if (run < i) parts.push(STRICT_UTF8.decode(bytes.subarray(run, i)));
    parts.push(String.fromCharCode(ESCAPE_BASE + (bytes[i] as number)));
    i += 1;
    run = i;
  }
  if (run < bytes.length) parts.push(STRICT_UTF8.decode(bytes.subarray(run)));
  return parts.join('');
}

/** Text from decodePatchBytes (or any well-formed string) back to its exact bytes. */
export function encodePatchText(text: string): Uint8Array {
  if (!ESCAPED.test(text)) return UTF8.encode(text);
  const chunks: Uint8Array[] = [];
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // A lone escape: the one byte it stands for. (A paired low surrogate is part of a character.)
    const paired = i > 0 && code >= 0xdc00 && code <= 0xdfff && isHighSurrogate(text.charCodeAt(i - 1));
    if (code < 0xdc80 || code > 0xdcff || paired) continue;
    if (run < i) chunks.push(UTF8.encode(text.slice(run, i)));
    chunks.push(Uint8Array.of(code - ESCAPE_BASE));
    run = i + 1;
  }
  if (run < text.length) chunks.push(UTF8.encode(text.slice(run)));
  const out = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/**
 * Length of the well-formed UTF-8 sequence starting at `i` (Unicode table 3-7), or 0 when the
 * byte there starts none.
 */
function sequenceLength(bytes: Uint8Array, i: number): number {
  const b0 = bytes[i] as number;
  if (b0 < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => {
    const b = bytes[i + k];
    return b !== undefined && b >= lo && b <= hi;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((b0 >= 0xe1 && b0 <= 0xec) || b0 === 0xee || b0 === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b0 === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (b0 === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xf1 && b0 <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}
