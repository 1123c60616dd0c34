/**
 * Errors classified by cause: what no retry can cure fails on the first delivery with the reason
 * that names it, never a retry that holds the workspace's FIFO group until RETRIES_EXHAUSTED. A
 * branch that holds a name the git library refuses, and remotes that answer HTTP but not git.
 * Remote untouched, workspace usable after the documented recovery (harness.ts), one of them by
 * the README's own steps for it.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runbookAdvice } from '../../tools/operator';
import { commitRawEntry } from '../support/git-fixtures';
import { applyPatchJob, gitIn, hostileSuite, type HostileRow, type HostileWorkspace } from './harness';

/** A canned answer of a host that does not (or no longer) speak git: [status, content type, body]. */
type Answer = readonly [number, string, string];
const LOGIN_PAGE: Answer = [200, 'text/html', '<html><body>Sign in</body></html>'];
const EMPTY: Answer = [200, 'application/x-git-upload-pack-advertisement', ''];
/** A pkt-line, but not git's service announcement. */
const WRONG_SERVICE: Answer = [200, 'application/x-git-upload-pack-advertisement', '0010hello there\n0000'];
const GARBAGE_AFTER_SERVICE: Answer = [
  200,
  'application/x-git-upload-pack-advertisement',
  '001e# service=git-upload-pack\n0000hello there, this is no ref\n',
];
const FORBIDDEN: Answer = [403, 'text/plain', 'Forbidden'];
const NOT_FOUND: Answer = [404, 'text/plain', 'Not Found'];

describe('errors no retry can cure (sequencer, first delivery)', () => {
  const suite = hostileSuite();
  /**
   * A host in front of the git server: `/<workspaceId>/...` is that workspace's remote, answered
   * with the workspace's canned answer while it has one, else passed through. So a row's remote
   * stops speaking git, and the recovery (the host is fixed) makes the same URL work again.
   */
  const hosts = new Map<string, { readonly repoUrl: string; answer?: Answer }>();
  let front: Server;
  let frontUrl: string;

  beforeAll(async () => {
    front = createServer((req, res) => {
      const [, workspaceId = '', ...rest] = (req.url ?? '').split('/');
      const host = hosts.get(workspaceId);
      if (!host) return void res.writeHead(404).end();
      if (host.answer)
        return void res.writeHead(host.answer[0], { 'content-type': host.answer[1] }).end(host.answer[2]);
      const upstream = request(
        `${host.repoUrl}/${rest.join('/')}`,
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.writeHead(502).end());
      req.pipe(upstream);
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    frontUrl = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise((resolve) => front.close(resolve)));

  const frontOf = (ws: HostileWorkspace): HostileWorkspace => ({ ...ws, repoUrl: `${frontUrl}/${ws.workspaceId}` });

  /** The workspace's remote, reached through the front, answers `answer` instead of git. */
  const answering = (answer: Answer): Pick<HostileRow, 'message' | 'recover'> => ({
    message(ws) {
      hosts.set(ws.workspaceId, { repoUrl: ws.repoUrl, answer });
      return applyPatchJob(frontOf(ws));
    },
    async recover(s, ws) {
      // The runbook: the host is fixed (it speaks git again at the same URL), then unblock; the
      // workspace stays bound to the URL its first job named.
      hosts.set(ws.workspaceId, { repoUrl: ws.repoUrl });
      await s.expectUsable(frontOf(ws));
    },
  });

  const ROWS: HostileRow[] = [
    {
      what: 'a branch that holds a name the git library refuses (docs\\notes.md), recovered by removing it from the branch',
      async message(ws) {
        await commitRawEntry(ws.gitDir, 'main', 'docs\\notes.md', 'written on Windows\n');
        return applyPatchJob(ws);
      },
      reason: 'UNSAFE_PATCH',
      says: /the git library refuses the path "docs\\\\notes\.md" as unsafe/,
      async recover(s, ws) {
        // The runbook: repair the branch (here: the commit that added the name is undone), then unblock.
        await gitIn(ws.gitDir, 'update-ref', 'refs/heads/main', 'main~1');
        await s.expectUsable(ws);
      },
    },
    {
      what: 'a remote that answers with a web page',
      ...answering(LOGIN_PAGE),
      reason: 'REJECTED_BY_TARGET',
      says: /does not speak git's smart HTTP protocol: Remote did not reply using the "smart" HTTP protocol/,
    },
    {
      what: 'a remote that answers an empty body',
      ...answering(EMPTY),
      reason: 'REJECTED_BY_TARGET',
      says: /does not speak git's smart HTTP protocol: Remote did not reply using the "smart" HTTP protocol\. .* but received: $/,
    },
    {
      what: 'a remote that says its git service and then no refs but garbage',
      ...answering(GARBAGE_AFTER_SERVICE),
      reason: 'REJECTED_BY_TARGET',
      says: /does not speak git's smart HTTP protocol/,
    },
    {
      what: 'a remote whose first pkt-line is not a git service',
      ...answering(WRONG_SERVICE),
      reason: 'REJECTED_BY_TARGET',
      says: /does not speak git's smart HTTP protocol: Remote did not reply using the "smart" HTTP protocol\. .* but received: 0010hello there/,
    },
    {
      what: 'a remote that refuses the request (403)',
      ...answering(FORBIDDEN),
      reason: 'REJECTED_BY_TARGET',
      says: /HTTP 403 Forbidden/,
    },
    {
      what: 'a repository the host does not have (404)',
      ...answering(NOT_FOUND),
      reason: 'REJECTED_BY_TARGET',
      says: /HTTP 404 Not Found/,
    },
    {
      what: "a remote that refuses the request (403), recovered by the README's steps in their order: the host fixed, the fence lifted, the job redriven",
      message: answering(FORBIDDEN).message,
      reason: 'REJECTED_BY_TARGET',
      says: /HTTP 403 Forbidden/,
      async recover(s, ws, failed) {
        // A redrive before the unblock is refused (the job still blocks its workspace): the steps come in that order.
        const recovery = runbookAdvice('REJECTED_BY_TARGET')?.recovery ?? '';
        const unblockAt = recovery.indexOf('`workspace unblock <id> --drop`');
        expect({
          recovery,
          unblockBeforeRedrive: unblockAt >= 0 && unblockAt < recovery.lastIndexOf('`dlq redrive'),
        }).toEqual({ recovery, unblockBeforeRedrive: true });
        hosts.set(ws.workspaceId, { repoUrl: ws.repoUrl });
        expect((await s.cli('workspace', 'unblock', ws.workspaceId, '--drop')).code).toBe(0);
        expect((await s.cli('dlq', 'redrive', failed.jobId)).code).toBe(0);
        expect(await s.deliverOnce()).toEqual({ batchItemFailures: [] });
        expect(await s.ledger().getJob(failed.jobId)).toMatchObject({ status: 'SUCCEEDED' });
        await s.expectUsable(frontOf(ws));
      },
    },
  ];

  it.each(ROWS.map((row) => [row.what, row] as const))('%s', async (_what, row) => {
    await suite.expectRefusedOnFirstDelivery(row);
  });
});
