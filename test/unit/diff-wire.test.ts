/**
 * How a diff travels (src/core/diff-wire.ts) and how bodies and free-text attributes are written
 * for SQS (contract/messages.ts): any bytes and any string arrive unchanged.
 */
import { attributeText, wireJson } from '../../contract/messages';
import { canonicalInlineDiff, inlineDiff, inlineDiffBytes } from '../../src/core/diff-wire';
import { jobDigest, parseEnvelope, type JobEnvelope } from '../../src/core/envelope';

const latin1 = Buffer.from('diff --git a/f b/f\n+caf\xe9\n', 'latin1');
const text = 'diff --git a/f b/f\n+café 😀\n';

describe('inline diff forms', () => {
  test('UTF-8 bytes travel as text, other bytes as base64, and both read back exactly', () => {
    expect(inlineDiff(Buffer.from(text))).toEqual({ diff: text });
    expect(inlineDiff(latin1)).toEqual({ diffBase64: latin1.toString('base64') });
    expect(Buffer.from(inlineDiffBytes(inlineDiff(latin1) as { diffBase64: string }) ?? []).equals(latin1)).toBe(true);
    expect(Buffer.from(inlineDiffBytes({ diff: text }) ?? []).toString('utf8')).toBe(text);
  });

  test('the digest counts the bytes: base64 of UTF-8 text is the same request as that text', () => {
    const job = parseEnvelope({
      jobId: 'j',
      workspaceId: 'w',
      tenantId: 't',
      type: 'apply_patch',
      createdAt: '2026-01-01T00:00:00Z',
      payload: { repo: { url: 'https://git.example.com/a.git', branch: 'main' }, diff: text, message: 'm' },
    }) as JobEnvelope<'apply_patch'>;
    const { diff: _diff, ...rest } = job.payload;
    const asBase64 = { ...job, payload: { ...rest, diffBase64: Buffer.from(text).toString('base64') } };
    expect(jobDigest(asBase64)).toBe(jobDigest(job));
    expect(canonicalInlineDiff(asBase64.payload)).toEqual(job.payload);
    const other = { ...job, payload: { ...rest, diffBase64: latin1.toString('base64') } };
    expect(jobDigest(other)).not.toBe(jobDigest(job));
  });
});

describe('wire text', () => {
  test('a body is printable ASCII whatever the strings hold, and parses back to the same value', () => {
    const value = { diff: 'emoji 😀, U+FFFE \ufffe, NUL \0, lone \ud800, DEL \u007f, é' };
    const body = wireJson(value);
    expect(body).toMatch(/^[\x20-\x7e]*$/);
    expect(JSON.parse(body)).toEqual(value);
  });

  test('a free-text attribute keeps what SQS takes, escapes the rest and never splits a character', () => {
    expect(attributeText('ok é 😀\ttab', 100)).toBe('ok é 😀\ttab');
    expect(attributeText('hook said \u001b[31mno\u001b[0m \ufffe', 100)).toBe(
      'hook said \\u{1b}[31mno\\u{1b}[0m \\u{fffe}',
    );
    expect(attributeText('ab😀', 3)).toBe('ab');
    expect(attributeText('lone \udc00', 100)).toBe('lone \\u{dc00}');
  });
});
