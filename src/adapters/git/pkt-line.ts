/**
 * git's pkt-line framing (gitprotocol-common): four hex digits of length (the four included), then
 * the payload; `0000` is a flush, and protocol v2 adds `0001` (delimiter) and `0002` (response end).
 * Used by the requests written here (receive-pack.ts, upload-pack.ts); isomorphic-git frames its own.
 */

export const FLUSH = Buffer.from('0000');
export const DELIM = Buffer.from('0001');

export function pktLine(text: string): Buffer {
  const payload = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from((payload.length + 4).toString(16).padStart(4, '0')), payload]);
}

export type PktLine =
  { readonly kind: 'data'; readonly payload: Buffer } | { readonly kind: 'flush' | 'delim' | 'end' };

const SPECIAL: Readonly<Record<number, 'flush' | 'delim' | 'end'>> = { 0: 'flush', 1: 'delim', 2: 'end' };

/**
 * A remote's answer that says something went wrong (`reported`: an `ERR` line or an error on the
 * side band), stops early (`cut`: a connection closed mid-answer), or is not git's (`malformed`).
 * classifyRemoteError (remote.ts): the first two are transient, the last means the remote does not speak git.
 */
export class RemoteAnswerError extends Error {
  override readonly name: string = 'RemoteAnswerError';
  constructor(
    message: string,
    readonly kind: 'reported' | 'cut' | 'malformed',
  ) {
    super(message);
  }
}

/** The pkt-lines of `buffer`, in order, to its end. */
export function* readPktLines(buffer: Buffer): Generator<PktLine> {
  for (let at = 0; at < buffer.length;) {
    if (at + 4 > buffer.length)
      throw new RemoteAnswerError(`the answer ends inside a pkt-line length at byte ${at}`, 'cut');
    const hex = buffer.subarray(at, at + 4).toString('latin1');
    const length = /^[0-9a-f]{4}$/.test(hex) ? parseInt(hex, 16) : NaN;
    if (Number.isNaN(length) || length === 3)
      throw new RemoteAnswerError(`byte ${at} of the answer starts no pkt-line (${JSON.stringify(hex)})`, 'malformed');
    const special = SPECIAL[length];
    if (special) {
      yield { kind: special };
      at += 4;
      continue;
    }
    if (at + length > buffer.length)
      throw new RemoteAnswerError(`the answer ends inside a pkt-line of ${length} bytes at byte ${at}`, 'cut');
    yield { kind: 'data', payload: buffer.subarray(at + 4, at + length) };
    at += length;
  }
}

/** The text of a payload without its trailing newline. */
export function pktText(payload: Buffer): string {
  return payload.toString('utf8').replace(/\n$/, '');
}
