/**
 * What the platform says at start about how test commands are isolated, as `local up` says it: on
 * a machine without bubblewrap the warning names the missing program (not a sandbox that "exited"),
 * and the platform log's first lines are the platform's own, not a logging library's complaint.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { logIsolation, describeIsolation } from '../../tools/local/confinement';
import { StreamLogger } from '../../tools/local/file-logger';

const ROOT = join(__dirname, '..', '..');

/** A PATH with every program of /usr/bin and /bin but `missing`: a machine where it is not installed. */
function pathWithout(missing: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'agent-jobs-path-'));
  for (const bin of ['/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
    for (const name of readdirSync(bin)) {
      if (name === missing) continue;
      try {
        symlinkSync(join(bin, name), join(dir, name));
      } catch {
        // Already linked from an earlier directory (/bin is often /usr/bin).
      }
    }
  }
  return dir;
}

it('without bubblewrap, the isolation warning says bubblewrap is not installed', () => {
  const dir = pathWithout('bwrap');
  try {
    const probe =
      "require('./tools/local/run-launcher').probeIsolation(require('node:os').tmpdir()).then((i) => console.log(JSON.stringify(require('./tools/local/confinement').describeIsolation(i))))";
    const child = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', probe], {
      cwd: ROOT,
      env: { ...process.env, PATH: dir, NODE_NO_WARNINGS: '1' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const report = JSON.parse(child.stdout) as { degraded?: string };

    expect(report.degraded).toMatch(/bubblewrap is not installed \(no bwrap on PATH\)/);
    expect(report.degraded).not.toMatch(/exited before the sandbox started/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it("logs the isolation as the platform's own line, with no logging library warning before it", () => {
  const stream = new PassThrough();
  let written = '';
  stream.on('data', (chunk: Buffer) => (written += chunk.toString()));
  const logger = new StreamLogger(stream, { serviceName: 'agent-jobs-local', logLevel: 'INFO' });

  logIsolation(
    describeIsolation({
      confinement: { kind: 'none', reason: 'a test' },
      resources: { kind: 'rlimit', reason: 'a test' },
    }),
    logger,
  );

  const lines = written
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(lines.map((line) => line['message'])).toEqual([
    'test commands are not fully sandboxed: test commands run unconfined: a test (SECURITY.md)',
  ]);
  expect(lines[0]).toMatchObject({ isolation: expect.stringMatching(/^unconfined/) });
});
