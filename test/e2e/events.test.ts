/**
 * The README's "Job events" section against what the platform publishes: every event type of the
 * contract has its row, the detail fields each row names are in the events a real run writes to
 * the local stream (`<state-dir>/events.jsonl`), and the section's example event pattern, matched
 * as EventBridge matches it, selects exactly the failed and skipped jobs of its tenant.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { EVENT_SOURCE, EVENT_TYPES } from '../../contract/runtime-env';
import { matchesEventPattern } from '../assembly/event-pattern';
import {
  applyPatchArgs,
  diffChain,
  makeRepository,
  removeScratch,
  startPlatform,
  type RunningPlatform,
} from './harness';

jest.setTimeout(240_000);

const ROOT = path.resolve(__dirname, '../..');

let platform: RunningPlatform;
let scratch: string;

beforeAll(async () => {
  platform = await startPlatform();
  scratch = await mkdtemp(path.join(tmpdir(), 'agent-jobs-events-'));
});

afterAll(async () => {
  await platform?.stop();
  await removeScratch();
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** The README's section on events: its table rows (type -> detail fields) and its JSON blocks. */
async function eventsSection(): Promise<{ rows: Map<string, string[]>; json: unknown[]; text: string }> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf('\n## Job events\n');
  if (start < 0) throw new Error('README.md has no "## Job events" section');
  const text = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const rows = new Map<string, string[]>();
  for (const [, type, detail] of text.matchAll(/^\| `(\w+)` \|[^|]*\| ([^|]*) \|$/gm)) {
    rows.set(
      type ?? '',
      [...(detail ?? '').matchAll(/`(\w+)`/g)].map((m) => m[1] ?? ''),
    );
  }
  const json = [...text.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => JSON.parse(m[1] ?? '') as unknown);
  return { rows, json, text };
}

test('every event is documented with its detail, and the example rule selects what it says', async () => {
  const source = await makeRepository({ 'app.txt': 'one\n' }, ['ev-ok', 'ev-blocked']);
  const repoUrl = (await platform.cliJson<{ url: string }>(['repo', 'import', source, '--name', 'events'])).url;
  const [good, later] = await diffChain(source, [{ 'ok.txt': 'ok\n' }, { 'app.txt': 'one\nlater\n' }]);
  const poison = path.join(scratch, 'poison.diff');
  await writeFile(
    poison,
    [
      'diff --git a/app.txt b/app.txt',
      '--- a/app.txt',
      '+++ b/app.txt',
      '@@ -1 +1 @@',
      '-not the content',
      '+two',
      '',
    ].join('\n'),
  );
  const tenant = ['--tenant', 'acme'];
  await platform.cliJson([...applyPatchArgs('ws-ev-ok', 'ev-ok', repoUrl, 'ev-ok', good ?? '', 'Fine'), ...tenant]);
  await platform.cliJson([
    ...applyPatchArgs('ws-ev-blocked', 'ev-poison', repoUrl, 'ev-blocked', poison, 'Poison'),
    ...tenant,
  ]);
  await platform.cliJson([
    ...applyPatchArgs('ws-ev-blocked', 'ev-later', repoUrl, 'ev-blocked', later ?? '', 'Later'),
    ...tenant,
  ]);
  expect((await platform.cli(['wait', 'ev-ok', 'ev-poison', 'ev-later', '--timeout', '150'])).code).toBe(1);

  const { rows, json, text } = await eventsSection();
  const local = await platform.events();
  // Every event type has its row; the fields a row names are in every event of that type.
  expect([...rows.keys()].sort()).toEqual([...EVENT_TYPES].sort());
  expect(new Set(local.map((e) => e.type))).toEqual(new Set(EVENT_TYPES));
  for (const event of local) {
    for (const field of rows.get(event.type) ?? [])
      expect({ type: event.type, has: field in event.detail }).toEqual({ type: event.type, has: true });
  }
  // The local stream, as the README names it.
  expect(text).toContain('.agent-jobs/events.jsonl');

  // The example pattern, on each event as EventBridge would carry it.
  const [pattern] = json as Record<string, unknown>[];
  expect(pattern).toBeDefined();
  const selected = local
    .filter((e) =>
      matchesEventPattern(pattern ?? {}, { source: EVENT_SOURCE, 'detail-type': e.type, detail: e.detail }),
    )
    .map((e) => `${e.type} ${String(e.detail['jobId'])}`);
  expect(selected.sort()).toEqual(['AgentJobFailed ev-poison', 'AgentJobSkipped ev-later']);
});
