/**
 * The ordered lane end to end on the local platform: apply_patch jobs from the producer through
 * the FIFO queue, the sequencer (ledger, workspace cursor, git commit and push) to SUCCEEDED.
 *
 * Same number of jobs twice: all in one workspace (strictly serial by design) and spread over
 * eight workspaces (one message group each, run concurrently). The ratio of the two throughputs
 * shows what grouping by workspace buys; the DynamoDB request count per job shows the ledger's
 * cost on the happy path.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { DynamoDbLedger } from '../src/adapters/dynamodb-ledger';
import { enqueueAgentJobs, type JobRequest } from '../src/client';
import { TERMINAL_STATUSES } from '../src/core/ports';
import { startPlatform, type LocalPlatform } from '../src/local/platform';
import { fmt, type Benchmark, type BenchRow } from './harness';

const TOTAL_JOBS = 24;

/** A diff that adds one new file: it applies on any tree that lacks the file. */
function addFileDiff(path: string, line: string): string {
  return [`diff --git a/${path} b/${path}`, 'new file mode 100644', '--- /dev/null', `+++ b/${path}`, '@@ -0,0 +1 @@', `+${line}`, ''].join('\n');
}

async function newRemote(platform: LocalPlatform, root: string, name: string): Promise<string> {
  const src = await mkdtemp(join(root, `src-${name}-`));
  await writeFile(join(src, 'README.md'), `# ${name}\n`);
  const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=bench', '-c', 'user.email=bench@example.com', ...args], { cwd: src });
  git('init', '-q', '-b', 'main');
  git('add', '.');
  git('commit', '-q', '-m', 'initial');
  await platform.git.createBareRepo(name, { fromDir: src });
  return platform.git.repoUrl(name);
}

async function waitTerminal(ledger: DynamoDbLedger, jobIds: readonly string[]): Promise<void> {
  const pending = new Set(jobIds);
  const deadline = Date.now() + 10 * 60_000;
  while (pending.size > 0) {
    if (Date.now() > deadline) throw new Error(`jobs not finished after 10 minutes: ${[...pending].join(', ')}`);
    for (const jobId of [...pending]) {
      const record = await ledger.getJob(jobId);
      if (record && TERMINAL_STATUSES.includes(record.status)) {
        if (record.status !== 'SUCCEEDED') throw new Error(`job ${jobId} ended ${record.status}: ${record.error?.message ?? ''}`);
        pending.delete(jobId);
      }
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Counts DynamoDB requests by command name (middleware on the platform's shared client). */
function countRequests(platform: LocalPlatform): Map<string, number> {
  const counts = new Map<string, number>();
  platform.emulators.clients.dynamodb.middlewareStack.add(
    (next, context) => async (args) => {
      counts.set(context.commandName ?? '?', (counts.get(context.commandName ?? '?') ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'benchRequestCounter' },
  );
  return counts;
}

async function runScenario(workspaces: number, label: string): Promise<{ seconds: number; requests: Map<string, number> }> {
  const root = await mkdtemp(join(tmpdir(), 'bench-ordered-'));
  const platform = await startPlatform({ stateDir: join(root, 'state'), output: null, persist: false, logLevel: 'ERROR' });
  try {
    const { clients, queueUrls, tableName } = platform.emulators;
    const ledger = new DynamoDbLedger({ client: clients.dynamodb, tableName, retentionDays: 30 });
    const urls = await Promise.all(Array.from({ length: workspaces }, (_, w) => newRemote(platform, root, `${label}-ws${w}`)));
    const jobs: JobRequest[] = [];
    for (let i = 0; i < TOTAL_JOBS; i++) {
      const w = i % workspaces;
      jobs.push({
        jobId: `${label}-${i}`,
        workspaceId: `${label}-ws${w}`,
        tenantId: 'bench',
        type: 'apply_patch',
        payload: { repo: { url: urls[w] as string, branch: 'main' }, diff: addFileDiff(`notes/job-${i}.txt`, `job ${i}`), message: `job ${i}` },
      });
    }
    const requests = countRequests(platform);
    const started = performance.now();
    const outcomes = await enqueueAgentJobs(jobs, { sqs: clients.sqs, queueUrl: queueUrls['agent-jobs'] as string });
    const failed = outcomes.filter((o) => o.status !== 'SENT');
    if (failed.length) throw new Error(`${failed.length} jobs were not enqueued`);
    await waitTerminal(ledger, jobs.map((j) => j.jobId as string));
    return { seconds: (performance.now() - started) / 1000, requests };
  } finally {
    await platform.stop();
    await rm(root, { recursive: true, force: true });
  }
}

/** Requests the ledger made per job, without the benchmark's own polling reads (GetItem on job records). */
function perJob(requests: Map<string, number>, kinds: readonly string[]): string {
  return (kinds.reduce((sum, k) => sum + (requests.get(k) ?? 0), 0) / TOTAL_JOBS).toFixed(2);
}

export const bench: Benchmark = {
  name: 'ordered-lane',
  async run() {
    const serial = await runScenario(1, 'serial');
    const parallel = await runScenario(8, 'parallel');
    const rows: BenchRow[] = [
      { label: `1 workspace x ${TOTAL_JOBS} jobs`, value: `${fmt.ms(serial.seconds * 1000)} (${fmt.perSecond(TOTAL_JOBS / serial.seconds)})` },
      { label: `8 workspaces x ${TOTAL_JOBS / 8} jobs`, value: `${fmt.ms(parallel.seconds * 1000)} (${fmt.perSecond(TOTAL_JOBS / parallel.seconds)})` },
      { label: 'throughput ratio, 8 workspaces / 1', value: fmt.ratio(serial.seconds / parallel.seconds) },
      { label: 'ledger writes per job (PutItem + UpdateItem)', value: perJob(serial.requests, ['PutCommand', 'UpdateCommand', 'PutItemCommand', 'UpdateItemCommand']) },
      { label: 'ledger consistent reads per job by the workers (Query)', value: perJob(serial.requests, ['QueryCommand']) },
    ];
    return {
      title: 'Ordered lane: apply_patch throughput on the local platform',
      description: [
        `${TOTAL_JOBS} apply_patch jobs (each adds one file), enqueued with the producer, timed until every job is SUCCEEDED in the ledger.`,
        'The sequencer runs with its catalog settings (batch 10, concurrency 10). Locally fauxqs hands out one message per group per receive,',
        'so one workspace is strictly one job at a time; on AWS a batch may carry several messages of a group, still run in order.',
        'Ledger writes are counted with a middleware on the DynamoDB client; the benchmark\'s own polling uses GetItem and is not counted.',
        '',
        'Command: `npm run bench ordered-lane`',
      ].join('\n'),
      rows,
    };
  },
};
