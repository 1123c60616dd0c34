import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { JsonlEventLog, type LoggedEvent } from '../../src/adapters/events';
import { describeEvent, startLiveView } from '../../src/local/live-view';

const event = (type: LoggedEvent['type'], detail: Record<string, unknown>): LoggedEvent => ({ time: '2026-11-29T11:40:02.123Z', source: 'agent-jobs', type, detail });

describe('live view', () => {
  it('describes a job event in one line with its reason', () => {
    expect(describeEvent(event('AgentJobFailed', { workspaceId: 'ws-1', type: 'apply_patch', jobId: 'j1', status: 'FAILED', reason: 'PATCH_DOES_NOT_APPLY' }))).toBe(
      '11:40:02  ws-1  apply_patch  j1  FAILED  PATCH_DOES_NOT_APPLY',
    );
    expect(describeEvent(event('WorkspaceBlocked', { workspaceId: 'ws-1', blockedBy: 'j1', reason: 'PATCH_DOES_NOT_APPLY' }))).toBe(
      '11:40:02  ws-1  BLOCKED by j1 (PATCH_DOES_NOT_APPLY)',
    );
  });

  it('prints every event logged since it started once and tallies jobs by outcome per workspace', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'agent-jobs-view-'));
    try {
      const log = new JsonlEventLog(path.join(dir, 'events.jsonl'));
      const output = new PassThrough();
      let printed = '';
      output.on('data', (chunk: Buffer) => (printed += chunk.toString()));
      // An earlier run's history: its ledger may be gone, so the view must not show it.
      await log.publish('WorkspaceBlocked', { workspaceId: 'ws-0', blockedBy: 'old', reason: 'CONFLICT' });

      // A long interval: only stop()'s final read runs, so the output is deterministic.
      const view = await startLiveView({ events: log, output, intervalMs: 3_600_000 });
      await log.publish('AgentJobSucceeded', { workspaceId: 'ws-1', type: 'apply_patch', jobId: 'a', status: 'SUCCEEDED' });
      await log.publish('AgentJobFailed', { workspaceId: 'ws-1', type: 'apply_patch', jobId: 'b', status: 'FAILED', reason: 'CONFLICT' });
      await log.publish('WorkspaceBlocked', { workspaceId: 'ws-1', blockedBy: 'b', reason: 'CONFLICT' });
      await log.publish('AgentJobSucceeded', { workspaceId: 'ws-2', type: 'open_pr', jobId: 'c', status: 'SUCCEEDED' });
      await view.stop();

      const lines = printed.trim().split('\n');
      // Without the leading hh:mm:ss.
      expect(lines.map((l) => l.replace(/^\d\d:\d\d:\d\d {2}/, ''))).toEqual([
        'ws-1  apply_patch  a  SUCCEEDED',
        'ws-1  apply_patch  b  FAILED  CONFLICT',
        'ws-1  BLOCKED by b (CONFLICT)',
        'ws-2  open_pr  c  SUCCEEDED',
        'workspaces: ws-1 SUCCEEDED 1 FAILED 1 [BLOCKED by b] | ws-2 SUCCEEDED 1',
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
