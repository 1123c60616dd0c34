/**
 * The console's pure parts: who may use it (auth.ts), escaping (html.ts), the live stream's
 * framing (live.ts) and the runbook's advice read from the README (tools/operator/runbook.ts). The
 * whole console runs against the local platform in test/browser/console.test.ts.
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { PERMANENT_REASONS } from '../../src/core/errors';
import {
  changeRefusal,
  cookieName,
  hasSession,
  newRoot,
  originRefusal,
  pathInRoot,
  sessionCookie,
  TOKEN_HEADER,
} from '../../tools/console/auth';
import { coarseAge } from '../../tools/console/format';
import { html, inlineCode } from '../../tools/console/html';
import { sseEvent } from '../../tools/console/live';
import { adviceHolds, parseRunbook, runbookAdvice } from '../../tools/operator/runbook';

const auth = { token: 'secret-token-value', port: 4321, root: '/c/r4nd0m/' };
const own = { host: '127.0.0.1:4321' };

describe('who may use the console', () => {
  it('answers its own host only, by IP or by name (a DNS-rebinding page names its own host)', () => {
    expect(originRefusal(auth, own)).toBeUndefined();
    expect(originRefusal(auth, { host: 'localhost:4321' })).toBeUndefined();
    expect(originRefusal(auth, { host: 'evil.example:4321' })).toMatchObject({ status: 400 });
    expect(originRefusal(auth, { host: '127.0.0.1:9999' })).toMatchObject({ status: 400 });
    expect(originRefusal(auth, {})).toMatchObject({ status: 400 });
  });

  it('refuses what a browser marks as coming from another origin', () => {
    expect(originRefusal(auth, { ...own, origin: 'http://127.0.0.1:4321' })).toBeUndefined();
    expect(originRefusal(auth, { ...own, origin: 'http://evil.example' })).toMatchObject({
      status: 403,
      reason: expect.stringMatching(/evil\.example/),
    });
    expect(originRefusal(auth, { ...own, origin: 'null' })).toMatchObject({ status: 403 });
    expect(originRefusal(auth, { ...own, 'sec-fetch-site': 'cross-site' })).toMatchObject({ status: 403 });
    expect(originRefusal(auth, { ...own, 'sec-fetch-site': 'same-origin' })).toBeUndefined();
  });

  it('takes the session from its own cookie, named after the port, scoped to its root, and only with the token', () => {
    expect(sessionCookie(auth)).toBe(
      `${cookieName(4321)}=secret-token-value; HttpOnly; SameSite=Strict; Path=/c/r4nd0m/`,
    );
    expect(hasSession(auth, { cookie: `other=1; ${cookieName(4321)}=secret-token-value` })).toBe(true);
    expect(hasSession(auth, { cookie: `${cookieName(4322)}=secret-token-value` })).toBe(false);
    expect(hasSession(auth, { cookie: `${cookieName(4321)}=secret-token-valuX` })).toBe(false);
    expect(hasSession(auth, { cookie: `${cookieName(4321)}=secret` })).toBe(false);
    expect(hasSession(auth, {})).toBe(false);
  });

  it('keeps its pages under a random root of its own: a path outside it is no page', () => {
    expect(pathInRoot(auth, '/c/r4nd0m/jobs/x')).toBe('/jobs/x');
    expect(pathInRoot(auth, '/c/r4nd0m/')).toBe('/');
    expect(pathInRoot(auth, '/jobs/x')).toBeUndefined();
    expect(pathInRoot(auth, '/c/r4nd0m')).toBeUndefined();
    expect(pathInRoot(auth, '/c/other/jobs/x')).toBeUndefined();
    expect(newRoot()).toMatch(/^\/c\/[A-Za-z0-9_-]{22}\/$/);
    expect(newRoot()).not.toBe(newRoot());
  });

  it('lets a change through only with the token itself, in the body or the header', () => {
    expect(changeRefusal(auth, {}, new URLSearchParams({ token: auth.token }))).toBeUndefined();
    expect(changeRefusal(auth, { [TOKEN_HEADER]: auth.token }, new URLSearchParams())).toBeUndefined();
    expect(changeRefusal(auth, {}, new URLSearchParams())).toMatchObject({ status: 403 });
    expect(changeRefusal(auth, {}, new URLSearchParams({ token: 'guess' }))).toMatchObject({ status: 403 });
  });
});

describe('pages', () => {
  it("escape every value, keep markup made by html, and turn the runbook's `code` into <code>", () => {
    const id = '<script>alert("x")</script>&';
    expect(html`<td>${id}</td>`.text).toBe('<td>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;</td>');
    expect(html`<a title="${"' onmouseover='x"}">${html`<b>ok</b>`}</a>`.text).toBe(
      '<a title="&#39; onmouseover=&#39;x"><b>ok</b></a>',
    );
    expect(html`${[1, 'a<', null, undefined, false]}`.text).toBe('1a&lt;');
    expect(inlineCode('run `unblock <id> --replay` now <b>').text).toBe(
      'run <code>unblock &lt;id&gt; --replay</code> now &lt;b&gt;',
    );
  });

  it('say ages to the minute, so a live region does not change at every read', () => {
    expect(coarseAge(59_999)).toBe('under a minute');
    expect(coarseAge(61_000)).toBe('1 min');
    expect(coarseAge(119 * 60_000)).toBe('119 min');
    expect(coarseAge(3 * 3_600_000)).toBe('3 h');
    expect(coarseAge(3 * 86_400_000)).toBe('3 d');
  });

  it('frame a live region as one server-sent event, every line of it a data line', () => {
    expect(sseEvent('region', '<p>a</p>\n<p>b</p>')).toBe('event: region\ndata: <p>a</p>\ndata: <p>b</p>\n\n');
    // SSE ends a line at CR, LF or CRLF alike: a bare CR in the data must not end the event.
    expect(sseEvent('region', 'a\r\revent: x\rdata: b\r\nc')).toBe(
      'event: region\ndata: a\ndata: \ndata: event: x\ndata: data: b\ndata: c\n\n',
    );
  });
});

describe("the runbook's advice", () => {
  it('has a row in the README for every reason a job can fail with, and for SKIPPED', () => {
    const runbook = parseRunbook(readFileSync(path.join(__dirname, '../../README.md'), 'utf8'));
    expect([...PERMANENT_REASONS, 'SKIPPED'].filter((reason) => !runbook.has(reason))).toEqual([]);
    expect(runbookAdvice('PATCH_DOES_NOT_APPLY')).toMatchObject({
      reasons: ['PATCH_DOES_NOT_APPLY', 'BASE_MISMATCH', 'BRANCH_DIVERGED'],
      recovery: expect.stringMatching(/workspace unblock/),
    });
  });

  it("says a stage's failed or missing requirement leaves the workspace as it was, and how to go on", () => {
    for (const reason of ['REQUIREMENT_FAILED', 'REQUIREMENT_NOT_RUN']) {
      const advice = runbookAdvice(reason);
      expect(advice).toMatchObject({
        reasons: [reason],
        blocksWorkspace: false,
        recovery: expect.stringMatching(/new job id/),
      });
      // Not a blocking row: it holds while the failure is open, whatever the workspace's state.
      expect(adviceHolds(advice!, { open: true, blocking: false })).toBe(true);
    }
    expect(runbookAdvice('REQUIREMENT_FAILED')?.meaning).toMatch(/names the job, its verdict .* and the commit/);
  });

  it('reads rows by their reason codes, cells with an escaped pipe included', () => {
    const table = [
      '| reason | meaning | recovery |',
      '| --- | --- | --- |',
      '| `A`, `B` | one \\| two | do `x` |',
      '',
      '| `C` | not | read |',
    ].join('\n');
    const advice = parseRunbook(table);
    expect([...advice.keys()]).toEqual(['A', 'B']);
    expect(advice.get('B')).toEqual({
      reasons: ['A', 'B'],
      meaning: 'one \\| two',
      recovery: 'do `x`',
      blocksWorkspace: false,
    });
    expect(parseRunbook('no table here').size).toBe(0);
  });

  it('holds while the failure is as recorded: a row that says BLOCKED only while the job blocks its workspace', () => {
    const table = [
      '| reason | meaning | recovery |',
      '| --- | --- | --- |',
      '| `FENCED` | the tree is short; the workspace is BLOCKED | unblock |',
      '| `REFUSED` | refused; the workspace is not blocked | send again |',
    ].join('\n');
    const fenced = parseRunbook(table).get('FENCED');
    const refused = parseRunbook(table).get('REFUSED');
    if (!fenced || !refused) throw new Error('rows not read');
    expect([fenced.blocksWorkspace, refused.blocksWorkspace]).toEqual([true, false]);
    expect(adviceHolds(fenced, { open: true, blocking: true })).toBe(true);
    // Unblocked, or dismissed: the row is what the failure meant when it happened.
    expect(adviceHolds(fenced, { open: true, blocking: false })).toBe(false);
    expect(adviceHolds(fenced, { open: false, blocking: true })).toBe(false);
    expect(adviceHolds(refused, { open: true, blocking: false })).toBe(true);
    expect(adviceHolds(refused, { open: false, blocking: false })).toBe(false);
  });
});
