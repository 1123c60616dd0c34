/**
 * The console on the local platform (started here in process, with the console beside it as
 * `local up` runs it): how long a 10,000-job workspace's timeline takes to serve, and how long a
 * job's completion takes to reach an open page.
 *
 * - Timeline: GET of the workspace's page over HTTP with the session cookie, the newest page (the
 *   default) and a page from the middle (oldest first, after seq 5,000), against a full read of
 *   the workspace's jobs (listWorkspaceJobs: what `agent-jobs jobs` and the workspaces page's
 *   counts read). The workspace is seeded with BatchWriteItem in the items the ledger writes (a
 *   third each of apply_patch, run_tests with a 4 KiB log tail, open_pr; every one SUCCEEDED), and
 *   read back through the ledger adapter before timing, so a seed the adapter would not read fails
 *   the run rather than timing an empty page.
 * - Live: a page's stream (/live, as its EventSource opens it) is open on a small workspace and on
 *   the 10,000-job one; jobs are completed through the ledger as the sequencer completes them
 *   (claim, then complete with the workspace's sequence number); the time is from the completion's
 *   write to the event that carries the job's row arriving on the stream. The browser's swap of
 *   that event adds a few milliseconds (not measured).
 */
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { LEDGER_RETENTION_DAYS } from '../contract/topology';
import { startConsole } from '../tools/console/server';
import { localLedger } from '../src/compose/local';
import { jobDigest, type JobEnvelope } from '../src/core/envelope';
import { queuedRecord } from '../src/core/ledger';
import type { JobRecord, Ledger } from '../src/core/ports';
import { startPlatform } from '../tools/local/platform';
import { fmt, loadLine, quantile, quick, repeat, type Benchmark, type BenchRow } from './harness';

const BIG = 10_000;
const GOAL_P95_MS = 300;
const BATCH = 25;
const LOG_TAIL = 'ok 1 - a line of test output, as a test run keeps the end of it\n'.repeat(64);

function envelope(workspaceId: string, jobId: string, index: number): JobEnvelope {
  const type = (['apply_patch', 'run_tests', 'open_pr'] as const)[index % 3] ?? 'run_tests';
  const payload =
    type === 'apply_patch'
      ? {
          repo: { url: 'http://127.0.0.1:1/bench.git', branch: 'main' },
          diff: 'diff --git a/x b/x\n',
          message: `change ${index}`,
        }
      : type === 'run_tests'
        ? { command: 'npm test' }
        : { baseBranch: 'main', title: `PR ${index}` };
  return {
    jobId,
    workspaceId,
    tenantId: 'tenant-bench',
    type,
    createdAt: new Date(Date.now() - 60_000).toISOString(),
    payload,
  } as JobEnvelope;
}

/** A finished job's item as the ledger adapter stores it: the record, its key and its place in the byWorkspace index. */
function seededItem(workspaceId: string, index: number): Record<string, unknown> {
  const job = envelope(workspaceId, `big-${index}`, index);
  const sha = (index.toString(16).padStart(8, '0') + 'a'.repeat(32)).slice(0, 40);
  const result =
    job.type === 'apply_patch'
      ? { commitSha: sha }
      : job.type === 'run_tests'
        ? {
            verdict: 'passed',
            summary: 'tests passed',
            exitCode: 0,
            sha,
            logTail: LOG_TAIL,
            durationMs: 4_000 + (index % 900),
          }
        : { url: `http://127.0.0.1:1/pulls/${index}`, number: index };
  const record: JobRecord = {
    ...queuedRecord(job, jobDigest(job), Date.now(), LEDGER_RETENTION_DAYS),
    status: 'SUCCEEDED',
    attempt: 1,
    wsSeq: index + 1,
    result,
  };
  // The adapter's key layout (src/adapters/dynamodb-ledger.ts): checked by reading back through it.
  return { ...record, pk: `job#${job.jobId}`, wsKey: `ws#${workspaceId}` };
}

async function seedWorkspace(
  platform: Awaited<ReturnType<typeof startPlatform>>,
  ledger: Ledger,
  workspaceId: string,
): Promise<void> {
  const { dynamodb } = platform.emulators.clients;
  const tableName = platform.info.tableName;
  const writes: Promise<unknown>[] = [];
  for (let start = 0; start < BIG; start += BATCH) {
    const items = Array.from({ length: Math.min(BATCH, BIG - start) }, (_, i) => seededItem(workspaceId, start + i));
    writes.push(
      dynamodb.send(
        new BatchWriteCommand({ RequestItems: { [tableName]: items.map((Item) => ({ PutRequest: { Item } })) } }),
      ),
    );
    if (writes.length === 4) await Promise.all(writes.splice(0));
  }
  await Promise.all(writes);
  // The workspace record, through the ledger: a workspace is known from a job's turn.
  await ledger.takeWorkspace({ workspaceId, jobId: `big-${BIG - 1}`, now: Date.now() });
  await ledger.finishWorkspaceJob({ workspaceId, jobId: `big-${BIG - 1}`, head: 'f'.repeat(40), now: Date.now() });
  const page = await ledger.pageWorkspaceJobs(workspaceId, { order: 'newest', limit: 1 });
  if (page.jobs[0]?.jobId !== `big-${BIG - 1}`)
    throw new Error('the seeded workspace does not read back through the ledger adapter: the item layout changed');
}

function get(url: string, cookie: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { Cookie: cookie } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

/** An open page's stream: every event's data, with its arrival time. */
function openStream(url: string, cookie: string): { events: { at: number; data: string }[]; close(): void } {
  const events: { at: number; data: string }[] = [];
  const req = request(url, { headers: { Cookie: cookie, Accept: 'text/event-stream' } }, (res) => {
    let buffered = '';
    res.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      let end: number;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = block
          .split('\n')
          .filter((l) => l.startsWith('data: '))
          .map((l) => l.slice(6))
          .join('\n');
        if (data) events.push({ at: Date.now(), data });
      }
    });
  });
  req.on('error', () => undefined);
  req.end();
  return { events, close: () => req.destroy() };
}

/** Completes a new job of `workspaceId` as the sequencer does and returns when (the completion's write time). */
async function completeOne(ledger: Ledger, workspaceId: string, jobId: string, seq: number): Promise<number> {
  const job = envelope(workspaceId, jobId, 0);
  const owner = randomUUID();
  await ledger.claim({ job, digest: jobDigest(job), owner, now: Date.now(), leaseMs: 60_000, consumer: 'sequencer' });
  const now = Date.now();
  await ledger.complete({
    jobId,
    owner,
    now,
    verdict: { status: 'SUCCEEDED', result: { commitSha: 'c'.repeat(40) } },
    workspace: { workspaceId, seq },
  });
  return now;
}

async function liveLatencies(
  ledger: Ledger,
  base: string,
  cookie: string,
  workspaceId: string,
  samples: number,
  firstSeq: number,
): Promise<number[]> {
  const stream = openStream(`${base}/live?view=${encodeURIComponent(`/workspaces/${workspaceId}`)}&shown=none`, cookie);
  try {
    await sleep(1500); // the first event: the page as it is
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const jobId = `live-${workspaceId}-${i}`;
      // At a random point of the console's read interval, as a real completion falls.
      await sleep(Math.floor(Math.random() * 1000));
      const completedAt = await completeOne(ledger, workspaceId, jobId, firstSeq + i);
      const deadline = Date.now() + 30_000;
      let seen: number | undefined;
      while (seen === undefined && Date.now() < deadline) {
        seen = stream.events.find((e) => e.data.includes(`id="job-${jobId}"`))?.at;
        if (seen === undefined) await sleep(5);
      }
      if (seen === undefined) throw new Error(`job ${jobId} never appeared on the open page`);
      latencies.push(seen - completedAt);
    }
    return latencies;
  } finally {
    stream.close();
  }
}

export const bench: Benchmark = {
  name: 'console',
  async run() {
    const load = loadLine();
    const stateDir = await mkdtemp(join(tmpdir(), 'agent-jobs-bench-console-'));
    const platform = await startPlatform({ stateDir, persist: false, output: null });
    const web = await startConsole({ where: { stateDir } });
    const cookie = `agent_jobs_console_${web.port}=${web.token}`;
    try {
      const ledger = localLedger(platform.emulators);
      const seedStarted = performance.now();
      await seedWorkspace(platform, ledger, 'ws-big');
      const seedMs = performance.now() - seedStarted;
      const runs = quick() ? 15 : 60;
      const page = async (path: string) => {
        const res = await get(`${web.url}${path}`, cookie);
        if (res.status !== 200 || !res.body.includes('id="job-big-')) throw new Error(`GET ${path}: ${res.status}`);
      };
      await page('/workspaces/ws-big'); // first load: static assets, the SDK clients
      const newest = await repeat(runs, () => page('/workspaces/ws-big'));
      const middle = await repeat(runs, () => page('/workspaces/ws-big?order=oldest&after=5000'));
      const full = await repeat(quick() ? 2 : 3, () => ledger.listWorkspaceJobs('ws-big'));
      const list = await repeat(quick() ? 2 : 3, () => get(`${web.url}/workspaces`, cookie));

      await ledger.takeWorkspace({ workspaceId: 'ws-small', jobId: 'small-0', now: Date.now() });
      const samples = quick() ? 8 : 20;
      const small = await liveLatencies(ledger, web.url, cookie, 'ws-small', samples, 1);
      const big = await liveLatencies(ledger, web.url, cookie, 'ws-big', samples, BIG + 1);

      const p95 = quantile(newest, 0.95);
      const rows: BenchRow[] = [
        {
          label: `timeline of a ${BIG.toLocaleString('en')}-job workspace, newest page (50 jobs), GET over HTTP`,
          value: `p50 ${fmt.ms(quantile(newest, 0.5))}, p95 ${fmt.ms(p95)}, max ${fmt.ms(Math.max(...newest))} (n=${runs})`,
        },
        {
          label: 'the same workspace, a page from the middle (oldest first, after seq 5,000)',
          value: `p50 ${fmt.ms(quantile(middle, 0.5))}, p95 ${fmt.ms(quantile(middle, 0.95))} (n=${runs})`,
        },
        {
          label: `a full read of its ${BIG.toLocaleString('en')} jobs (listWorkspaceJobs, as \`agent-jobs jobs\` reads)`,
          value: `${fmt.msSpread(full)}; a page is ${fmt.ratio(quantile(newest, 0.5) / Math.max(1, quantile(full, 0.5)))} of it`,
        },
        { label: 'workspaces page with that workspace on it (its counts read every job)', value: fmt.msSpread(list) },
        {
          label: 'completion to its row on an open page, small workspace',
          value: `p50 ${fmt.ms(quantile(small, 0.5))}, p95 ${fmt.ms(quantile(small, 0.95))}, max ${fmt.ms(Math.max(...small))} (n=${samples})`,
        },
        {
          label: `completion to its row on an open page, the ${BIG.toLocaleString('en')}-job workspace`,
          value: `p50 ${fmt.ms(quantile(big, 0.5))}, p95 ${fmt.ms(quantile(big, 0.95))}, max ${fmt.ms(Math.max(...big))} (n=${samples})`,
        },
        { label: `seeding the ${BIG.toLocaleString('en')} jobs (BatchWriteItem, 25 a request)`, value: fmt.ms(seedMs) },
      ];
      return {
        title: 'Console: a 10,000-job workspace, and a completion reaching an open page',
        description: [
          `The local platform and its console in this process; GET requests over loopback HTTP with the session cookie, one at a time; then a page's live stream open while jobs complete (the console reads an open page's region once a second and sends it when it changed).`,
          "A page is one query of the byWorkspace index (limit + 1 items) plus the workspace record, its open list and the conflicts of the page's jobs; its cost does not grow with the workspace.",
          `The machine is shared with other work (1-minute load average ${load} at the start, on 2 cores): absolute times carry waiting for a core; the ratio of a page to a full read is measured in the same run.`,
          '',
          'Command: `npm run bench -- console`',
        ].join('\n'),
        rows,
        summary: [
          {
            measure: `console: timeline of a ${BIG.toLocaleString('en')}-job workspace, p95`,
            value: `${fmt.ms(p95)} (a full read of its jobs: ${fmt.ms(quantile(full, 0.5))})`,
            goal: `<= ${GOAL_P95_MS} ms`,
          },
          {
            measure: "console: a job's completion to its row on an open page, p95",
            value: `${fmt.ms(quantile(small, 0.95))} (10,000-job workspace: ${fmt.ms(quantile(big, 0.95))})`,
            goal: '<= 2000 ms',
          },
        ],
      };
    } finally {
      await web.close();
      await platform.stop();
      await rm(stateDir, { recursive: true, force: true });
    }
  },
};
