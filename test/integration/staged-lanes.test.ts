/**
 * Issue 3's scenario, end to end on the local emulators: an agent sends, for one workspace,
 * patch A, patch B, run_tests, patch C, open_pr. The sequencer, the run_tests and the open_pr
 * handlers, and the build-events consumer that records the test build's verdict, are driven by
 * the local event-source-mapping pollers. The stage pollers start only after
 * patch C is on the branch: the worst timing for the tests, which must still see A and B, not C.
 * The open_pr, pinned at C, requires run_tests at C (catalog `requires`): it opens nothing.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { BUILD_EVENTS, JOB_TYPES, SEQUENCER } from '../../contract/job-types';
import {
  localBuildEventsDeps,
  localCommandStageDeps,
  localOpenPrDeps,
  localSequencerDeps,
} from '../../src/compose/local';
import { enqueueAgentJobs, type JobRequest } from '../../src/client';
import type { JobRecord } from '../../src/core/ports';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { startQueuePoller, type LocalHandler, type QueuePoller } from '../../tools/local/poller';
import { resolveBranchHead } from '../../src/adapters/git';
import { LocalPullRequestStore } from '../../tools/local/pr-store';
import { LocalTestRunner, localRunEventBody, parseLocalRunEvent } from '../../tools/local/test-runner';
import { withEmulators } from '../support/emulators';
import { eventually } from '../support/eventually';
import { createRepo, diffOfEdits, git, tempDir, writeFiles } from '../support/git-fixtures';
import { emulatorWorkerOptions, quietLogger, type RecordedEvent } from './staged-harness';
import { createOpenPrHandler } from '../../src/core/jobs/open-pr';
import { createBuildEventsHandler } from '../../src/core/build-completion';
import { createCommandStageHandler } from '../../src/core/jobs/command-stage';
import { createSequencer } from '../../src/core/sequencer';

const WORKSPACE = 'ws-issue3';
const BRANCH = 'agent/ws-issue3';
const systemClock = { now: () => Date.now() };

describe('staged lanes: patch A, patch B, run_tests, patch C, open_pr for one workspace', () => {
  const emulators = withEmulators();
  let root: string;
  let gitServer: GitServer;
  let seed: string;
  let base: string;
  const pollers: QueuePoller[] = [];
  let runner: LocalTestRunner;

  beforeAll(async () => {
    root = await tempDir('staged');
    gitServer = await startGitServer({ root: join(root, 'git') });
    seed = join(root, 'seed');
    await mkdir(seed);
    // The repository's tests print the tree they run on.
    base = await createRepo(seed, { 'test.sh': 'echo "tree:"; ls -1 | sort\n', 'README.md': 'widgets\n' });
    await git(seed, 'branch', BRANCH);
    await gitServer.importRepository(seed, 'widgets');
    // The test run's exit is its completion event, on the build-events queue (as the local platform wires it).
    const { clients, queueUrls } = emulators();
    runner = new LocalTestRunner({
      stateDir: join(root, 'runner'),
      onFinished: async (completion) => {
        await clients.sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrls[BUILD_EVENTS.queue],
            MessageBody: localRunEventBody(completion),
          }),
        );
      },
    });
  });

  afterAll(async () => {
    await Promise.all(pollers.map((p) => p.stop()));
    await runner?.close();
    await gitServer?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  async function poll(
    queue: string,
    handler: LocalHandler,
    settings: { batchSize: number; timeoutSeconds: number },
  ): Promise<void> {
    const { clients, queueUrls } = emulators();
    const queueUrl = queueUrls[queue]!;
    const attrs = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
    );
    pollers.push(
      startQueuePoller({
        name: queue,
        sqs: clients.sqs,
        queueUrl,
        queueArn: attrs.Attributes!.QueueArn!,
        region: 'us-east-1',
        batchSize: settings.batchSize,
        maxConcurrency: 2,
        timeoutSeconds: settings.timeoutSeconds,
        handler,
        logger: quietLogger,
      }),
    );
  }

  /** Waits until the jobs have these statuses in the ledger. */
  async function untilStatuses(
    status: (jobId: string) => Promise<string | undefined>,
    expected: Record<string, string>,
  ): Promise<void> {
    const statuses = async () =>
      Object.fromEntries(await Promise.all(Object.keys(expected).map(async (id) => [id, await status(id)])));
    await eventually(statuses, (seen) => Object.entries(expected).every(([id, s]) => seen[id] === s), {
      what: JSON.stringify(expected),
      timeoutMs: 60_000,
    });
  }

  it('tests A+B (not C) at the pinned commit; open_pr at C, untested there, opens nothing; every outcome in the ledger and on the bus', async () => {
    const env = emulators();
    const repoUrl = gitServer.repoUrl('widgets');
    const patch = (file: string) => diffOfEdits(seed, base, (tree) => writeFiles(tree, { [file]: `${file}\n` }));
    const applyPatch = async (jobId: string, file: string): Promise<JobRequest> => ({
      jobId,
      workspaceId: WORKSPACE,
      tenantId: 'tenant-1',
      type: 'apply_patch',
      payload: { repo: { url: repoUrl, branch: BRANCH }, diff: await patch(file), message: `add ${file}` },
    });
    const jobs: JobRequest[] = [
      await applyPatch('job-a', 'a.txt'),
      await applyPatch('job-b', 'b.txt'),
      { jobId: 'job-tests', workspaceId: WORKSPACE, tenantId: 'tenant-1', type: 'run_tests', payload: {} },
      await applyPatch('job-c', 'c.txt'),
      {
        jobId: 'job-pr',
        workspaceId: WORKSPACE,
        tenantId: 'tenant-1',
        type: 'open_pr',
        payload: { baseBranch: 'main', title: 'Agent changes' },
      },
    ];
    const events: RecordedEvent[] = [];
    const options = emulatorWorkerOptions(env, { events, clock: systemClock });
    const sequencerDeps = localSequencerDeps({ ...options, workRoot: join(root, 'sequencer') });
    const { ledger } = sequencerDeps;
    const status = async (jobId: string) => (await ledger.getJob(jobId))?.status;
    const job = async (jobId: string): Promise<JobRecord> => {
      const record = await ledger.getJob(jobId);
      if (!record) throw new Error(`job ${jobId} is not in the ledger`);
      return record;
    };
    const prStore = new LocalPullRequestStore(join(root, 'prs'), {
      branchHead: (url, branch) => resolveBranchHead(url, branch),
    });

    const sent = await enqueueAgentJobs(jobs, { sqs: env.clients.sqs, queueUrl: env.queueUrls[SEQUENCER.queue]! });
    expect(sent.map((s) => s.status)).toEqual(['SENT', 'SENT', 'SENT', 'SENT', 'SENT']);

    await poll(SEQUENCER.queue, createSequencer(sequencerDeps), SEQUENCER);
    await untilStatuses(status, { 'job-c': 'SUCCEEDED', 'job-pr': 'FORWARDED' });

    await poll(
      'run-tests',
      createCommandStageHandler('run_tests', localCommandStageDeps('run_tests', { ...options, runner })),
      JOB_TYPES.run_tests.stage,
    );
    await poll(
      BUILD_EVENTS.queue,
      createBuildEventsHandler(localBuildEventsDeps({ ...options, parse: parseLocalRunEvent })),
      BUILD_EVENTS,
    );
    await poll('open-pr', createOpenPrHandler(localOpenPrDeps({ ...options, host: prStore })), JOB_TYPES.open_pr.stage);
    await untilStatuses(status, { 'job-tests': 'SUCCEEDED', 'job-pr': 'FAILED' });

    const [a, b, c, tests, pr] = [
      await job('job-a'),
      await job('job-b'),
      await job('job-c'),
      await job('job-tests'),
      await job('job-pr'),
    ];
    const commitOf = (record: JobRecord) => String(record.result?.['commitSha']);
    expect([a.status, b.status, c.status]).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
    // The workspace moved on to C before the tests ran...
    expect((await ledger.getWorkspace(WORKSPACE))?.head).toBe(commitOf(c));
    // ...yet the tests ran on B's commit, whose tree has A and B but not C.
    expect(tests.pin?.sha).toBe(commitOf(b));
    expect(tests.result).toMatchObject({ verdict: 'passed', exitCode: 0, sha: commitOf(b) });
    expect(String(tests.result?.['logTail']).split('\n').filter(Boolean)).toEqual([
      'tree:',
      'README.md',
      'a.txt',
      'b.txt',
      'test.sh',
    ]);
    // The pull request, pinned at C, requires run_tests at C (catalog `requires`): none ran there, so nothing opens.
    expect(pr).toMatchObject({
      status: 'FAILED',
      pin: { sha: commitOf(c) },
      error: {
        reason: 'REQUIREMENT_NOT_RUN',
        message: expect.stringContaining(`requires run_tests at commit ${commitOf(c)}`),
      },
    });
    expect(await prStore.list(repoUrl)).toEqual([]);
    // Every outcome is on the bus, the stage results included.
    const succeeded = new Map(
      events.filter((e) => e.type === 'AgentJobSucceeded').map((e) => [e.detail['jobId'], e.detail]),
    );
    expect([...succeeded.keys()].sort()).toEqual(['job-a', 'job-b', 'job-c', 'job-tests']);
    expect(succeeded.get('job-tests')?.['result']).toEqual(tests.result);
    expect(events.filter((e) => e.type !== 'AgentJobSucceeded')).toEqual([
      {
        type: 'AgentJobFailed',
        detail: expect.objectContaining({ jobId: 'job-pr', reason: 'REQUIREMENT_NOT_RUN', message: pr.error?.message }),
      },
    ]);
    // About 10 s alone; the bound leaves room for a loaded CI machine running suites side by side.
  }, 180_000);
});
