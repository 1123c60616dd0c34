/** `agent-jobs demo` end to end: it starts its own platform, runs the script and reports. */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { publicJsonLines, runCli } from './harness';

jest.setTimeout(300_000);

test('the demo runs every scenario and reports what happened', async () => {
  // An empty state dir: no platform runs there, so the demo starts (and stops) its own.
  const stateDir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-demo-e2e-'));
  try {
    const result = await runCli(['demo', '--json', '--state-dir', stateDir]);

    expect({ code: result.code, stderr: result.code === 0 ? '' : result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(publicJsonLines(result.stdout, 'demo --json')).toHaveLength(1);
    const summary = JSON.parse(result.stdout) as { jobs: Record<string, string>; commits: Record<string, string[]> };
    expect(summary.jobs).toEqual({
      'mul-1': 'SUCCEEDED',
      'mul-tests-1': 'tests failed',
      'mul-2': 'SUCCEEDED',
      'mul-tests-2': 'tests passed',
      'mul-pr': 'SUCCEEDED',
      'docs-1': 'SUCCEEDED',
      'refactor-1': 'FAILED',
      'refactor-2': 'CANCELLED',
    });
    expect(summary.commits).toEqual({
      'feature-mul': ['Fix mul', 'Add mul', 'Initial calculator'],
      docs: ['Document usage', 'Initial calculator'],
      refactor: ['Initial calculator'],
    });
    expect(await readdir(stateDir)).toEqual([]);
  } finally {
    await rm(stateDir, { recursive: true, force: true });
  }
});
