/**
 * The assembly run: what `cdk deploy` would ship, run here first. The production configuration
 * (plus the git host an operator sets) is synthesized with bundling once; every function then runs
 * from its asset in cdk.out on Node.js of the template's runtime major, wired only by the template
 * (assembly-run.ts), through a scenario of every lane: patches inline and claim-checked, every
 * command stage of the catalog ended once by its build's event and once by the reconciler, a running
 * build's job cancelled by the operator's CLI and its build stopped by the reconciler, a pull
 * request opened on the GitHub stand-in, a duplicate delivery, a permanent failure on the DLQ and
 * a redrive by the operator's CLI, which finds the run's resources through the stack's outputs as
 * it finds a deployed stack's, and a patch sent and read back by `agent-jobs mcp --stack` through
 * the MCP SDK's client. Every AWS call it made is then simulated against the synthesized
 * policies, every granted action must have been used (or be listed below, by role, with why the
 * scenario cannot reach it), and the resource policies are simulated for the service principals
 * that use them, alarms included. Last, the mutations the run must catch, each applied to a copy:
 * an environment variable spelt differently, a separate file missing from an asset, a statement
 * removed from a role, an SDK call added without its grant.
 *
 * The git host is github.com and GitHub's API is where the template points it (api.github.com by
 * default), both over TLS through the run's front (tls-front.ts): GitHub names a repository
 * `/<owner>/<repo>.git`, the loopback git server by one segment, so the front maps the one to the
 * other (`<owner>--<repo>`).
 *
 * Time: the reconciler completes a build only once the job is overdue, at least an hour and a
 * quarter after the build started (the build's queued timeout, its timeout, a margin), and the run
 * cannot wait that long. Its jobs ask for the shortest build timeout the payload allows (1 s),
 * their builds finish on the CodeBuild stand-in with no event, and the schedule then fires with
 * the reconciler's clock moved just past the latest due time its ledger holds (an environment of
 * its own: lambda-service.ts). Nothing else is moved: the due times are those the command stages
 * recorded on the real clock, the builds' verdicts are CodeBuild's, and the outcome events are
 * counted on the EventBridge stand-in.
 */
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { PutSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { enqueueAgentJob } from '../../src/client/producer';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { dynamoDbEmulatorOf } from '../../tools/local/emulators';
import { startGitServer, type GitServer } from '../../tools/local/git-server';
import { LAMBDA_NODE_MAJOR } from '../../lib/constructs/worker';
import { COMMAND_JOB_TYPES, verdictWording } from '../../contract/job-types';
import { CHECKOUT_ENV, ENV } from '../../contract/runtime-env';
import { eventually } from '../support/eventually';
import { codeBuildStateChange } from '../support/codebuild-events';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';
import { createRepo, diffOfEdits, git, removeDir, tempDir } from '../support/git-fixtures';
import { runCli } from '../e2e/harness';
import { BIN, startMcp } from '../support/mcp-client';
import { addStack, newApp, ROOT } from '../infra/helpers';
import { startAssemblyRun, type AssemblyRun } from './assembly-run';
import { REGION, CloudAssembly, type AssemblyFunction, type CfnResource } from './cloud-assembly';
import { alarmNotifications, baseName, decide, ruleDeadLetters, unusedGrants, type UnusedGrant } from './iam';
import { alarmProblems, buildSecretProblems, plainHttpProblems, ruleDeliveryProblems } from './resource-policies';
import { lambdaNode, lambdaNodeUnavailable } from './lambda-node';
import { sandboxUnavailable } from './sandbox';
import { startTlsFront, type TlsFront } from './tls-front';

const STACK = 'AgentJobs-prod';
/** The git host an operator of a fork allows before the first deploy; everything else is config/prod.json. */
const GIT_HOST = 'github.com';
const OPERATOR_SETTINGS = { gitHosts: [GIT_HOST] };
/** Addresses in the functions' network namespace: documentation addresses (RFC 5737), never loopback. */
const ADDRESSES = { git: '198.51.100.10', api: '198.51.100.20' };
const OWNER = 'acme';
const PUSH = { username: 'platform', password: 'push-token' };
/** The read-only credential the builds check out with, through the checkout secret the command stages write. */
const READ_ONLY = { username: 'reader', password: 'read-token' };
const GITHUB_TOKEN = 'github-token';

/** GitHub's `/<owner>/<repo>.git/...` on the loopback git server's one-segment names: `/<owner>--<repo>.git/...`. */
const gitServerPath = (path: string): string => path.replace(/^\/([^/]+)\/([^/]+)\.git(?=\/|\?|$)/, '/$1--$2.git');

const unavailable = lambdaNodeUnavailable() ?? sandboxUnavailable();

/** CDK's logical id base of a worker's role: the worker's construct id without what ids cannot hold. */
const workerRole = (worker: string): string => `${worker.replace(/[^A-Za-z0-9]/g, '')}WorkerRole`;

/**
 * Granted actions the scenario cannot reach, by role and action, with the reason. The roles of
 * each entry are derived from the template or the catalog, so a fork's new command stage or
 * function is covered as its kind is. Every unused grant must match an entry, and every entry
 * must match an unused grant: one that no longer does (the scenario reaches it now, the grant is
 * gone) fails, so the list cannot go stale.
 */
function unreached(assembly: CloudAssembly): { roles: string[]; action: string; why: string; byOne?: true }[] {
  const functionRoles = assembly.functions().map((f) => baseName(f.roleLogicalId));
  const consumerRoles = assembly
    .eventSourceMappings()
    .map((m) => baseName(assembly.functions().find((f) => f.logicalId === m.functionLogicalId)!.roleLogicalId));
  const commandStages = COMMAND_JOB_TYPES.map(workerRole);
  return [
    {
      roles: functionRoles,
      action: 'xray:PutTraceSegments',
      why: 'active tracing: the Lambda service sends the segments, and the run has no X-Ray daemon',
    },
    { roles: functionRoles, action: 'xray:PutTelemetryRecords', why: 'active tracing, as above' },
    {
      roles: consumerRoles,
      action: 'sqs:GetQueueAttributes',
      why: "the event source mapping reads its queue's attributes when it is created; the run's poller does not",
    },
    {
      roles: consumerRoles,
      action: 'sqs:ChangeMessageVisibility',
      why: 'heartbeats of long work and the back-off of a transient failure: the scenario has neither',
    },
    // byOne: open_pr's wait for its tests' verdict reaches it; the other consumers meet no wait.
    {
      roles: consumerRoles,
      action: 'sqs:GetQueueUrl',
      why: "resolves a record's queue for ChangeMessageVisibility, as above, and for a job sent back to its queue to wait for a limit or a required verdict",
      byOne: true,
    },
    {
      roles: commandStages,
      action: 'sqs:SendMessage',
      why: "a command stage's permanent failure to its DLQ (a job refused before its build), and a job sent back to its queue to wait for the build quota: the scenario's jobs all start their build",
    },
    {
      roles: [workerRole('build_events'), workerRole('build_reconciler')],
      action: 'sqs:SendMessage',
      why: "a build that ends in error (FAULT, TIMED_OUT, or lost) fails its job, whose message goes to its stage's DLQ: the scenario's builds pass or fail",
    },
    {
      roles: commandStages,
      action: 'codebuild:ListBuildsForProject',
      why: 'only after a crash between StartBuild and recording the build id (finds the build once)',
    },
    // byOne: excused for the others when one of the roles used it.
    {
      roles: commandStages,
      action: 'secretsmanager:CreateSecret',
      why: 'the first command stage to start a build of a repository creates its checkout secret; the others find it and name its version',
      byOne: true,
    },
    {
      roles: commandStages,
      action: 'secretsmanager:PutSecretValue',
      why: "a checkout secret's new version only when its current one no longer serves (an app token near its end, a rotated read-only secret): the scenario's credential never changes",
    },
    {
      roles: commandStages,
      action: 'secretsmanager:DescribeSecret',
      why: 'only when a checkout secret answers InvalidRequestException (scheduled for deletion): the scenario deletes none',
    },
    {
      roles: commandStages,
      action: 'secretsmanager:RestoreSecret',
      why: 'a checkout secret scheduled for deletion, as above',
    },
    {
      roles: commandStages,
      action: 'codebuild:BatchGetBuilds',
      why: 'a command stage reads a build only after a crash (see ListBuildsForProject)',
    },
    {
      roles: commandStages,
      action: 'events:PutEvents',
      why: "a command stage's own outcome events (a refusal before its build); build outcomes come from build_events and the reconciler",
    },
    {
      // DynamoDB (and DynamoDB Local) return the item a conditional write was refused on; dynalite does not, so the ledger reads it.
      roles: functionRoles.filter(
        (role) =>
          ![workerRole('sequencer'), workerRole('build_events')].includes(role) || dynamoDbEmulatorOf() !== 'dynalite',
      ),
      action: 'dynamodb:GetItem',
      why: "the consistent read after a refused conditional write that carries no item (one that does not exist; any on dynalite): only the sequencer's duplicate delivery and the event of a cancelled job's build meet a refusal here",
    },
    {
      roles: [workerRole('sequencer')],
      action: 's3:ListBucket',
      why: 'only for a claim-checked diff that is missing (NoSuchKey instead of AccessDenied)',
    },
    {
      roles: [workerRole('sequencer'), ...commandStages, workerRole('build_events')],
      action: 'dynamodb:Query',
      why: "a workspace's jobs in order (unblock and replay; a command stage's own requirements, none in the catalog): the scenario replays none",
    },
  ];
}

if (unavailable) {
  // Not a skip: under CI the run must happen, so its absence fails there.
  it('runs the cloud assembly (not possible on this machine)', () => {
    if (process.env['CI']) throw new Error(`the assembly run cannot run here: ${unavailable}`);
    process.stderr.write(`assembly run not run: ${unavailable}\n`);
  });
} else {
  describe('the cloud assembly, run here first', () => {
    let outdir: string;
    let assembly: CloudAssembly;
    let run: AssemblyRun;
    let gitServer: GitServer;
    let github: FakeGitHub;
    let tls: TlsFront;
    let work: string;
    let base: string;
    let firstDiff: string;

    const fn = (prefix: string): AssemblyFunction =>
      run.functions.find((f) => baseName(f.logicalId) === `${prefix}WorkerFunction`)!;
    const queueId = (prefix: string) => assembly.ofType('AWS::SQS::Queue').find(([id]) => baseName(id) === prefix)![0];
    const queueUrl = (prefix: string) => assembly.ref(queueId(prefix));
    const tableName = () => assembly.physicalName(assembly.ofType('AWS::DynamoDB::Table')[0]![0]);
    const bucketName = () => assembly.physicalName(assembly.ofType('AWS::S3::Bucket')[0]![0]);
    const secretArn = (prefix: string) =>
      assembly.ref(assembly.ofType('AWS::SecretsManager::Secret').find(([id]) => baseName(id) === prefix)![0]);
    const job = async (jobId: string) =>
      (
        await run.operatorClients.dynamodb.send(
          new GetCommand({ TableName: tableName(), Key: { pk: `job#${jobId}` }, ConsistentRead: true }),
        )
      ).Item;
    const settled = (jobId: string, status = 'SUCCEEDED') =>
      eventually(
        () => job(jobId),
        (item) => item?.['status'] === status,
        {
          what: `${jobId} to be ${status} (failures: ${JSON.stringify(run.failures)})`,
          timeoutMs: 45_000,
          intervalMs: 250,
        },
      );
    const repoUrl = `https://${GIT_HOST}/${OWNER}/widgets.git`;
    const gitDir = () => gitServer.gitDir(`${OWNER}--widgets`);
    const send = (request: Parameters<typeof enqueueAgentJob>[0]) =>
      enqueueAgentJob(request, {
        sqs: run.operatorClients.sqs,
        queueUrl: queueUrl('sequencerQueue'),
        diffStore: new S3DiffStore(run.operatorClients.s3, bucketName()),
      });
    const branchHead = (branch: string) => git(gitDir(), 'rev-parse', branch);
    const outcomeEvents = (jobId: string) =>
      run.eventBridge.events.filter(
        (e) => e.detail?.jobId === jobId && /^AgentJob(Succeeded|Failed)$/.test(e.detailType),
      );
    /** Ends a sent run_tests job's build as passed, by its event (`meanwhile`: checked while the build runs). */
    const passTests = async (jobId: string, sha: string, meanwhile: () => void = () => undefined) => {
      await eventually(
        () => job(jobId),
        (item) => item?.['progress']?.buildId !== undefined,
        { what: `${jobId} to start its build`, timeoutMs: 45_000 },
      );
      const build = run.codeBuild.builds.find((b) =>
        b.environmentVariables.some((v) => v.name === 'JOB_ID' && v.value === jobId),
      )!;
      meanwhile();
      run.codeBuild.complete(build.id, 'SUCCEEDED');
      expect(
        await run.putOnDefaultBus(
          codeBuildStateChange({ buildId: build.id, status: 'SUCCEEDED', jobId, jobType: 'run_tests', sha }),
        ),
      ).toBe(1);
      await settled(jobId);
    };
    const cli = async (...args: string[]) => {
      const result = await runCli([...args, '--stack', STACK, '--region', REGION, '--json'], undefined, {
        env: run.operatorEnvironment(),
      });
      return {
        ...result,
        lines: result.stdout
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Record<string, any>),
      };
    };

    beforeAll(async () => {
      const node = lambdaNode(LAMBDA_NODE_MAJOR);
      // Outside the OS temp folder: each function gets a private /tmp, which would hide it.
      outdir = join(ROOT, 'node_modules', '.cache', 'agent-jobs', `assembly-${process.pid}`);
      const app = newApp({ bundle: true, outdir });
      addStack(app, 'prod', OPERATOR_SETTINGS);
      app.synth();
      assembly = new CloudAssembly(outdir, STACK);
      // GitHub's API where the template points open_pr (GITHUB_API_URL).
      const apiUrl = new URL(
        assembly
          .functions()
          .map((f) => f.environment[ENV.githubApiUrl])
          .find((url) => url !== undefined)!,
      );
      work = await tempDir('agent-jobs-assembly-');
      gitServer = await startGitServer({ root: join(work, 'repos'), auth: PUSH });
      github = await startFakeGitHub();
      tls = await startTlsFront(
        [
          { hostname: GIT_HOST, upstreamPort: gitServer.port, path: gitServerPath },
          { hostname: apiUrl.hostname, upstreamPort: Number(new URL(github.url).port) },
          // Its certificate outside the OS temp folder too, where the functions can read it.
        ],
        outdir,
      );
      run = await startAssemblyRun({
        assembly,
        node,
        hosts: [
          { name: GIT_HOST, address: ADDRESSES.git, port: 443, hostPort: tls.port },
          { name: apiUrl.hostname, address: ADDRESSES.api, port: 443, hostPort: tls.port },
        ],
        extraCaCerts: tls.certFile,
      });
      const secrets = run.operatorClients.secrets;
      await secrets.send(
        new PutSecretValueCommand({ SecretId: secretArn('GitCredentials'), SecretString: JSON.stringify(PUSH) }),
      );
      await secrets.send(
        new PutSecretValueCommand({
          SecretId: secretArn('GitReadCredentials'),
          SecretString: JSON.stringify(READ_ONLY),
        }),
      );
      await secrets.send(new PutSecretValueCommand({ SecretId: secretArn('GithubToken'), SecretString: GITHUB_TOKEN }));
      const source = join(work, 'src');
      mkdirSync(source);
      base = await createRepo(source, { 'README.md': 'widgets\n', 'src/widget.txt': 'one\n' });
      for (const branch of ['agent/ws1', 'agent/ws2', 'agent/ws3']) await git(source, 'branch', branch);
      await gitServer.importRepository(source, `${OWNER}--widgets`);
    }, 180_000);

    afterAll(async () => {
      await run?.stop();
      await tls?.close();
      await github?.close();
      await gitServer?.close();
      if (work) await removeDir(work);
      if (outdir) rmSync(outdir, { recursive: true, force: true });
    });

    it("runs on the template's Node.js major, from the assets alone", () => {
      expect(run.functions.map((f) => f.runtime)).toEqual(run.functions.map(() => `nodejs${LAMBDA_NODE_MAJOR}.x`));
    });

    it('applies an inline patch and a claim-checked one, in order, on the git host', async () => {
      firstDiff = await diffOfEdits(join(work, 'src'), base, async (tree) =>
        writeFileSync(join(tree, 'src/widget.txt'), 'one\ntwo\n'),
      );
      await send({
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'apply_patch',
        jobId: 'p1',
        payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: firstDiff, message: 'Two widgets' },
      });
      await settled('p1');
      const large = await diffOfEdits(gitDir(), await branchHead('agent/ws1'), async (tree) =>
        writeFileSync(
          join(tree, 'large.txt'),
          Array.from({ length: 3000 }, (_, i) => `line ${i} ${'y'.repeat(70)}`).join('\n') + '\n',
        ),
      );
      const sent = await send({
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'apply_patch',
        jobId: 'p2',
        payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: large, message: 'A large file' },
      });
      expect(sent.diffRef).toBeDefined();
      await settled('p2');
      expect(await git(gitDir(), 'log', '--format=%s', 'agent/ws1')).toBe('A large file\nTwo widgets\nbase');
    });

    describe('every command stage, ended by its build', () => {
      /** Per command stage: a job its build's event ends, and one the reconciler ends with the event withheld; verdicts alternate. */
      const jobs = COMMAND_JOB_TYPES.flatMap((type, i) => [
        { type, jobId: `${type}.event`, path: 'event' as const, status: i % 2 === 0 ? 'SUCCEEDED' : 'FAILED' },
        { type, jobId: `${type}.late`, path: 'reconciler' as const, status: i % 2 === 0 ? 'FAILED' : 'SUCCEEDED' },
      ]);
      const buildOf = (jobId: string) =>
        run.codeBuild.builds.find((b) => b.environmentVariables.some((v) => v.name === 'JOB_ID' && v.value === jobId))!;
      let head: string;

      it('starts one build per job on CodeBuild, at the workspace head', async () => {
        head = await branchHead('agent/ws1');
        for (const j of jobs)
          await send({
            workspaceId: 'ws1',
            tenantId: 't1',
            type: j.type,
            jobId: j.jobId,
            payload: j.path === 'reconciler' ? { timeoutSeconds: 1 } : {},
          });
        await eventually(
          () => Promise.all(jobs.map((j) => job(j.jobId))),
          (items) => items.every((item) => item?.['progress']?.buildId !== undefined),
          { what: 'every job to record its build', timeoutMs: 45_000 },
        );
        expect(run.codeBuild.builds).toHaveLength(jobs.length);
        for (const j of jobs)
          expect(buildOf(j.jobId).environmentVariables).toContainEqual(
            expect.objectContaining({ name: 'COMMIT_SHA', value: head }),
          );
        // The checkout credential: references to the repository's checkout secret, which hold the read-only credential.
        for (const j of jobs) {
          const credential = buildOf(j.jobId).environmentVariables.filter((v) =>
            Object.values(CHECKOUT_ENV).includes(v.name as never),
          );
          expect(credential.map((v) => [v.name, v.type, run.secretsManager.resolve(v.value)])).toEqual([
            [CHECKOUT_ENV.username, 'SECRETS_MANAGER', READ_ONLY.username],
            [CHECKOUT_ENV.password, 'SECRETS_MANAGER', READ_ONLY.password],
          ]);
        }
      });

      it("ends a job by its build's event", async () => {
        for (const j of jobs.filter((j) => j.path === 'event')) {
          const build = run.codeBuild.complete(buildOf(j.jobId).id, j.status as 'SUCCEEDED' | 'FAILED');
          expect(
            await run.putOnDefaultBus(
              codeBuildStateChange({ buildId: build.id, status: j.status, jobId: j.jobId, jobType: j.type, sha: head }),
            ),
          ).toBe(1);
          expect((await settled(j.jobId))!['result']).toMatchObject({
            verdict: j.status === 'SUCCEEDED' ? 'passed' : 'failed',
            summary: verdictWording(j.type, j.status === 'SUCCEEDED' ? 'passed' : 'failed'),
            buildId: build.id,
          });
        }
      });

      it('ends a job whose event never came by the reconciler, once its build is overdue, with the verdict and one outcome event', async () => {
        const late = jobs.filter((j) => j.path === 'reconciler');
        for (const j of late) run.codeBuild.complete(buildOf(j.jobId).id, j.status as 'SUCCEEDED' | 'FAILED');
        // On its schedule now: nothing is overdue yet, so the builds' verdicts wait.
        expect((await run.fireSchedules()).map((r) => r.ok)).toEqual([true]);
        for (const j of late) expect((await job(j.jobId))!['status']).toBe('RUNNING');
        // Later, past the latest due time the command stages recorded.
        const dueAt = Math.max(...(await Promise.all(late.map(async (j) => Number((await job(j.jobId))!['dueAt'])))));
        const later = { clockOffsetMs: dueAt - Date.now() + 60_000 };
        expect((await run.fireSchedules(later)).map((r) => r.ok)).toEqual([true]);
        for (const j of late) {
          expect((await job(j.jobId))!['result']).toMatchObject({
            verdict: j.status === 'SUCCEEDED' ? 'passed' : 'failed',
            buildId: buildOf(j.jobId).id,
          });
        }
        // Once: a second late run finds nothing to do.
        expect((await run.fireSchedules(later)).map((r) => r.ok)).toEqual([true]);
        for (const j of jobs) expect(outcomeEvents(j.jobId).map((e) => e.detailType)).toEqual(['AgentJobSucceeded']);
      });
    });

    it("cancels a running build's job with the operator's CLI: the reconciler stops the build (StopBuild), once; its late event changes nothing", async () => {
      const [type = 'run_tests'] = COMMAND_JOB_TYPES;
      const jobId = `${type}.cancelled`;
      await send({ workspaceId: 'ws1', tenantId: 't1', type, jobId, payload: {} });
      await settled(jobId, 'RUNNING');
      const build = run.codeBuild.builds.find((b) =>
        b.environmentVariables.some((v) => v.name === 'JOB_ID' && v.value === jobId),
      )!;

      const cancelled = await cli('cancel', jobId);
      expect(cancelled).toMatchObject({ code: 0, stderr: '' });
      expect(cancelled.lines).toEqual([
        expect.objectContaining({ jobId, status: 'CANCELLED', previousStatus: 'RUNNING' }),
      ]);
      expect((await run.fireSchedules()).map((r) => r.ok)).toEqual([true]);
      expect(run.codeBuild.stops).toEqual([build.id]);
      expect(build.buildStatus).toBe('STOPPED');
      // CodeBuild's event of the stopped build, after the cancel; and the reconciler again: nothing more.
      expect(
        await run.putOnDefaultBus(
          codeBuildStateChange({
            buildId: build.id,
            status: 'STOPPED',
            jobId,
            jobType: type,
            sha: build.environmentVariables.find((v) => v.name === 'COMMIT_SHA')!.value,
          }),
        ),
      ).toBe(1);
      await eventually(
        async () =>
          (
            await run.operatorClients.sqs.send(
              new GetQueueAttributesCommand({
                QueueUrl: queueUrl('buildeventsQueue'),
                AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
              }),
            )
          ).Attributes,
        (a) => a?.['ApproximateNumberOfMessages'] === '0' && a['ApproximateNumberOfMessagesNotVisible'] === '0',
        { what: 'the build event to be consumed', timeoutMs: 30_000 },
      );
      expect((await run.fireSchedules()).map((r) => r.ok)).toEqual([true]);

      expect(run.codeBuild.stops).toEqual([build.id]);
      const record = await job(jobId);
      expect(record).toMatchObject({ status: 'CANCELLED', progress: { buildId: build.id } });
      expect(record?.['dueAt']).toBeUndefined();
      expect(outcomeEvents(jobId)).toEqual([]);
    });

    it('opens no pull request on a commit whose last test run failed: REQUIREMENT_FAILED names the job, its verdict and the commit', async () => {
      const head = await branchHead('agent/ws1');
      await send({
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'open_pr',
        jobId: 'pr.red',
        payload: { baseBranch: 'main', title: 'Widgets' },
      });
      const failed = await settled('pr.red', 'FAILED');
      // run_tests.late is the last test run at the head (run_tests.cancelled does not count): its build failed.
      expect(failed!['error']).toMatchObject({
        reason: 'REQUIREMENT_FAILED',
        message: `open_pr requires run_tests to pass at commit ${head}: run_tests.late says tests failed there, so nothing was done`,
      });
      expect(github.pulls(OWNER, 'widgets')).toEqual([]);
      await eventually(
        async () => outcomeEvents('pr.red').map((e) => e.detailType),
        (types) => types.length > 0,
        { what: "pr.red's outcome event", timeoutMs: 30_000 },
      );
      expect(outcomeEvents('pr.red').map((e) => e.detailType)).toEqual(['AgentJobFailed']);
    });

    it('opens the pull request on GitHub once the tests at the commit passed, with the token from Secrets Manager', async () => {
      const head = await branchHead('agent/ws1');
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'run_tests', jobId: 'tests.green', payload: {} });
      await passTests('tests.green', head);
      await send({
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'open_pr',
        jobId: 'pr1',
        payload: { baseBranch: 'main', title: 'Widgets' },
      });
      const done = await settled('pr1');
      expect(done!['result']).toMatchObject({
        gate: [{ type: 'run_tests', jobId: 'tests.green', verdict: 'tests passed', sha: head }],
      });
      expect(done!['result']).toMatchObject({
        number: 1,
        created: true,
        head: 'agent/ws1',
        sha: await branchHead('agent/ws1'),
      });
      expect(github.pulls(OWNER, 'widgets')).toEqual([
        expect.objectContaining({ number: 1, head: 'agent/ws1', base: 'main', title: 'Widgets', state: 'open' }),
      ]);
      expect(new Set(github.authorizations)).toEqual(new Set([`token ${GITHUB_TOKEN}`]));
    });

    it('waits for a test run still running at the commit, with no function held, then opens the pull request', async () => {
      const head = await branchHead('agent/ws1');
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'run_tests', jobId: 'tests.slow', payload: {} });
      await eventually(
        () => job('tests.slow'),
        (item) => item?.['progress']?.buildId !== undefined,
        { what: 'tests.slow to start its build', timeoutMs: 45_000 },
      );
      await send({
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'open_pr',
        jobId: 'pr.wait',
        payload: { baseBranch: 'main', title: 'Widgets' },
      });
      await eventually(
        () => job('pr.wait'),
        (item) => typeof item?.['progress']?.waitingFor === 'string',
        { what: 'pr.wait to wait for tests.slow', timeoutMs: 45_000 },
      );
      expect((await job('pr.wait'))!['progress']['waitingFor']).toContain('tests.slow');

      await passTests('tests.slow', head);
      // The wait is a copy of the message sent again for later (10 s, doubling): it looks again and opens.
      const resent = () =>
        run.calls
          .filter(
            (c) => c.operation === 'SendMessage' && c.principal.kind === 'role' && /openpr/i.test(c.principal.name),
          )
          .map((c) => `${c.status}`);
      const done = await eventually(
        () => job('pr.wait'),
        (item) => item?.['status'] === 'SUCCEEDED',
        {
          what: `pr.wait to open (open_pr's sends: ${JSON.stringify(resent())}, failures: ${JSON.stringify(run.failures)})`,
          timeoutMs: 150_000,
          intervalMs: 500,
        },
      );
      expect(done!['result']).toMatchObject({
        gate: [{ type: 'run_tests', jobId: 'tests.slow', verdict: 'tests passed', sha: head }],
        number: 1,
      });
    }, 240_000);

    it('acknowledges a duplicate delivery without a second commit', async () => {
      const head = await branchHead('agent/ws1');
      const original = await job('p1');
      // The same job delivered again: its envelope, in its group, under another deduplication id.
      const body = JSON.stringify({
        jobId: 'p1',
        workspaceId: 'ws1',
        tenantId: 't1',
        type: 'apply_patch',
        createdAt: original!['createdAt'],
        payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: firstDiff, message: 'Two widgets' },
      });
      await run.operatorClients.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl('sequencerQueue'),
          MessageBody: body,
          MessageGroupId: 'ws#ws1',
          MessageDeduplicationId: 'p1-again',
        }),
      );
      await eventually(
        async () =>
          (
            await run.operatorClients.sqs.send(
              new GetQueueAttributesCommand({
                QueueUrl: queueUrl('sequencerQueue'),
                AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
              }),
            )
          ).Attributes,
        (a) => a?.['ApproximateNumberOfMessages'] === '0' && a['ApproximateNumberOfMessagesNotVisible'] === '0',
        { what: 'the duplicate to be acknowledged', timeoutMs: 30_000 },
      );
      expect(await branchHead('agent/ws1')).toBe(head);
      expect((await job('p1'))!['status']).toBe('SUCCEEDED');
    });

    it('puts a permanent failure on the DLQ with its ids, and blocks the workspace', async () => {
      await send({
        workspaceId: 'ws2',
        tenantId: 't1',
        type: 'apply_patch',
        jobId: 'bad1',
        payload: {
          repo: { url: repoUrl, branch: 'agent/ws2' },
          diff: 'diff --git a/nope.txt b/nope.txt\n--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n',
          message: 'Does not apply',
        },
      });
      const failed = await settled('bad1', 'FAILED');
      expect(failed!['error']).toMatchObject({ reason: expect.any(String) });
      const dlq = await run.operatorClients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl('sequencerQueueDlq'),
          MaxNumberOfMessages: 10,
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 1,
        }),
      );
      expect(dlq.Messages?.map((m) => m.MessageAttributes?.['jobId']?.StringValue)).toContain('bad1');
    });

    it("redrives a failed pull request with the operator's CLI, which finds the stack by its outputs", async () => {
      await send({
        workspaceId: 'ws3',
        tenantId: 't2',
        type: 'apply_patch',
        jobId: 'p3',
        payload: { repo: { url: repoUrl, branch: 'agent/ws3' }, diff: firstDiff, message: 'Two widgets' },
      });
      // What open_pr requires at the commit: tests that passed there.
      await send({ workspaceId: 'ws3', tenantId: 't2', type: 'run_tests', jobId: 'tests.ws3', payload: {} });
      await settled('p3');
      await passTests('tests.ws3', await branchHead('agent/ws3'));
      // GitHub refuses the first create (a base branch it did not have yet): a permanent failure.
      github.failNext('POST', 422, {
        message: 'Validation Failed',
        errors: [{ resource: 'PullRequest', field: 'base', code: 'invalid' }],
      });
      await send({
        workspaceId: 'ws3',
        tenantId: 't2',
        type: 'open_pr',
        jobId: 'pr2',
        payload: { baseBranch: 'main', title: 'More widgets' },
      });
      expect((await settled('pr2', 'FAILED'))!['error']).toMatchObject({ reason: 'REJECTED_BY_TARGET' });

      const listed = await cli('dlq', 'list');
      expect(listed).toMatchObject({ code: 0, stderr: '' });
      expect(listed.lines).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            jobId: 'pr2',
            workspaceId: 'ws3',
            tenantId: 't2',
            type: 'open_pr',
            status: 'FAILED',
            reason: 'REJECTED_BY_TARGET',
          }),
        ]),
      );

      const redriven = await cli('dlq', 'redrive', 'pr2');
      expect(redriven).toMatchObject({ code: 0, stderr: '' });
      expect(redriven.lines).toEqual([
        expect.objectContaining({ redriven: [expect.objectContaining({ jobId: 'pr2' })], left: [] }),
      ]);
      const done = await settled('pr2');
      expect(done!['result']).toMatchObject({ created: true, head: 'agent/ws3' });
      expect(github.pulls(OWNER, 'widgets').map((p) => p.head)).toEqual(['agent/ws1', 'agent/ws3']);
    });

    it("serves the stack to an MCP client: `agent-jobs mcp --stack` sends a patch, waits for it and reads the workspace and a build's log link", async () => {
      const mcp = await startMcp({
        args: [BIN, 'mcp', '--stack', STACK, '--region', REGION],
        env: run.operatorEnvironment(),
      });
      try {
        const diffFile = join(work, 'three.diff');
        writeFileSync(
          diffFile,
          await diffOfEdits(gitDir(), await branchHead('agent/ws3'), async (tree) =>
            writeFileSync(join(tree, 'src/widget.txt'), 'one\ntwo\nthree\n'),
          ),
        );
        const call = {
          workspaceId: 'ws3',
          jobId: 'mcp1',
          tenantId: 't2',
          payload: { repo: { url: repoUrl, branch: 'agent/ws3' }, diffFile, message: 'Three widgets' },
        };
        expect(await mcp.result('apply_patch', call)).toMatchObject({ jobId: 'mcp1', status: 'QUEUED' });
        const waited = await mcp.result<{ allSucceeded: boolean }>('wait_for_jobs', {
          jobIds: ['mcp1'],
          timeoutSeconds: 45,
        });
        expect(waited).toMatchObject({ allSucceeded: true });
        // Retried by the agent: known, not sent again.
        expect(await mcp.result('apply_patch', call)).toMatchObject({
          jobId: 'mcp1',
          status: 'SUCCEEDED',
          alreadyKnown: true,
        });
        expect(await mcp.result('workspace_state', { workspaceId: 'ws3' })).toMatchObject({
          state: 'ACTIVE',
          head: await branchHead('agent/ws3'),
          unfinished: [],
        });
        expect(await git(gitDir(), 'log', '--format=%s', '-1', 'agent/ws3')).toBe('Three widgets');
        const stage = `${COMMAND_JOB_TYPES[0]}.event`;
        expect(await mcp.result('test_log', { jobId: stage })).toMatchObject({
          jobId: stage,
          links: [expect.stringContaining('codebuild')],
        });
        expect(mcp.transportErrors).toEqual([]);
      } finally {
        await mcp.close();
      }
    });

    it('left no function failing on the way', () => {
      expect(run.failures).toEqual([]);
    });

    describe('IAM, simulated', () => {
      it('allows every call each function and service made', async () => {
        const denied = (await decide(assembly, run.calls)).filter((d) => !d.allowed).map((d) => d.description);
        expect(denied).toEqual([]);
      });

      it('every granted action was used, or cannot be reached by the scenario for a reason listed by role', async () => {
        const unused = await unusedGrants(assembly, run.calls);
        const isUnused = (role: string, action: string) => unused.some((g) => g.role === role && g.action === action);
        // A byOne entry holds when one of its roles used the action; it cannot go stale by the others.
        const entries = unreached(assembly).flatMap((e) =>
          e.byOne && e.roles.every((role) => isUnused(role, e.action))
            ? []
            : e.roles.map((role) => ({ role, action: e.action, byOne: e.byOne })),
        );
        const excused = (g: UnusedGrant) => entries.some((e) => e.role === g.role && e.action === g.action);
        // An entry no unused grant matches is stale: the scenario reaches that grant now, or it is gone.
        const stale = entries.filter((e) => !e.byOne && !isUnused(e.role, e.action));
        expect({
          unexcused: unused.filter((g) => !excused(g)).map((g) => `${g.role} ${g.action} ${g.resources}`),
          stale: stale.map((e) => `${e.role} ${e.action}`),
        }).toEqual({ unexcused: [], stale: [] });
      });

      it('a missing statement fails naming the function, the action and the resource', async () => {
        const broken = assembly.withTemplate((resources) => {
          const policy = Object.entries(resources).find(
            ([id, r]) => r.Type === 'AWS::IAM::Policy' && id.startsWith('runtestsWorkerRole'),
          )![1];
          const statements = policy.Properties!['PolicyDocument'].Statement as Record<string, unknown>[];
          statements.splice(
            statements.findIndex((s) => [s['Action']].flat().includes('codebuild:StartBuild')),
            1,
          );
        });
        const denied = (await decide(broken, run.calls)).filter((d) => !d.allowed).map((d) => d.description);
        expect(denied).toEqual(
          expect.arrayContaining([
            expect.stringMatching(
              /^function runtestsWorkerFunction codebuild:StartBuild on arn:aws:codebuild:eu-west-1:123456789012:project\/.+: ImplicitlyDenied$/,
            ),
          ]),
        );
      });
    });

    describe('resource policies, for the services that use them', () => {
      // Each check returns what is wrong; each is also shown to find a copy of the template broken on purpose.
      const statements = (resource: CfnResource, field = 'PolicyDocument'): Record<string, any>[] =>
        resource.Properties![field].Statement;
      const ofType = (resources: Record<string, CfnResource>, type: string) =>
        Object.entries(resources).filter(([, r]) => r.Type === type);
      const fromService = (service: string) => (s: Record<string, any>) => s['Principal']?.Service === service;

      it('lets every alarm of the template notify its topic through the topic key, and no alarm of another account', async () => {
        expect(alarmNotifications(assembly).length).toBeGreaterThan(assembly.ofType('AWS::CloudWatch::Alarm').length);
        expect(await alarmProblems(assembly)).toEqual([]);
        const withoutStatement = assembly.withTemplate((resources) => {
          for (const [, policy] of ofType(resources, 'AWS::SNS::TopicPolicy'))
            policy.Properties!['PolicyDocument'].Statement = statements(policy).filter(
              (s) => !fromService('cloudwatch.amazonaws.com')(s),
            );
        });
        expect(await alarmProblems(withoutStatement)).toEqual(
          expect.arrayContaining([
            expect.stringMatching(
              /^cloudwatch\.amazonaws\.com \(for arn:aws:cloudwatch:eu-west-1:123456789012:alarm:.+\) sns:Publish on arn:aws:sns:.+: ImplicitlyDenied$/,
            ),
          ]),
        );
        const anyAccount = assembly.withTemplate((resources) => {
          for (const [, key] of ofType(resources, 'AWS::KMS::Key'))
            for (const s of statements(key, 'KeyPolicy').filter(fromService('cloudwatch.amazonaws.com')))
              delete s['Condition'];
        });
        expect(await alarmProblems(anyAccount)).toEqual(
          expect.arrayContaining([
            expect.stringMatching(/alarm:.+\) kms:Decrypt on arn:aws:kms:.+: Allowed \(must be refused\)$/),
          ]),
        );
      });

      it('refuses every call the run made to the diff bucket and the queues over plain HTTP, and allows it over TLS', async () => {
        expect(await plainHttpProblems(assembly, run.calls)).toEqual([]);
        const noTlsRule = assembly.withTemplate((resources) => {
          for (const [, policy] of ofType(resources, 'AWS::S3::BucketPolicy'))
            policy.Properties!['PolicyDocument'].Statement = statements(policy).filter((s) => s['Effect'] !== 'Deny');
        });
        expect(await plainHttpProblems(noTlsRule, run.calls)).toEqual(
          expect.arrayContaining([
            expect.stringMatching(
              /^function sequencerWorkerFunction s3:GetObject on arn:aws:s3:::.+ over plain HTTP \(must be explicitly refused\)$/,
            ),
          ]),
        );
      });

      it("delivers the build-events rule's events to its queue, and what it cannot deliver to its DLQ, for that rule only", async () => {
        const deliveredTo = run.calls
          .filter((c) => c.principal.kind === 'service' && c.principal.service === 'events.amazonaws.com')
          .flatMap((c) => c.resources);
        expect(deliveredTo).toContain(assembly.getAtt(queueId('buildeventsQueue'), 'Arn'));
        expect(ruleDeadLetters(assembly).map((r) => r.resource)).toContain(
          assembly.getAtt(queueId('buildeventsQueueDlq'), 'Arn'),
        );
        expect(await ruleDeliveryProblems(assembly, run.calls)).toEqual([]);
        const anyRule = assembly.withTemplate((resources) => {
          for (const [, policy] of ofType(resources, 'AWS::SQS::QueuePolicy'))
            for (const s of statements(policy).filter(fromService('events.amazonaws.com'))) delete s['Condition'];
        });
        expect(await ruleDeliveryProblems(anyRule, run.calls)).toEqual(
          expect.arrayContaining([
            expect.stringMatching(
              /^events\.amazonaws\.com \(for arn:aws:events:.+:rule\/not-of-this-stack\) sqs:SendMessage on .+: Allowed \(must be refused\)$/,
            ),
          ]),
        );
      });

      it("lets CodeBuild's role read the checkout secrets the command stages write, and none of the operator's: not the push secret, not the read-only one", async () => {
        expect(await buildSecretProblems(assembly)).toEqual([]);
        const pushSecret = assembly.resource(fn('sequencer').logicalId).Properties!['Environment'].Variables[
          ENV.gitCredentialsSecretArn
        ];
        const readsPush = assembly.withTemplate((resources) => {
          const [roleId] = ofType(resources, 'AWS::CodeBuild::Project').map(
            ([, p]) => p.Properties!['ServiceRole']['Fn::GetAtt'][0] as string,
          );
          const [, policy] = ofType(resources, 'AWS::IAM::Policy').find(([, p]) =>
            p.Properties!['Roles'].some((r: { Ref: string }) => r.Ref === roleId),
          )!;
          const grant = statements(policy).find((s) => [s['Action']].flat().includes('secretsmanager:GetSecretValue'))!;
          grant['Resource'] = [...[grant['Resource']].flat(), pushSecret];
        });
        expect(await buildSecretProblems(readsPush)).toEqual([
          expect.stringMatching(
            /^role TestRunnerRole secretsmanager:GetSecretValue on arn:aws:secretsmanager:.+:secret:GitCredentials.+: Allowed \(an operator's secret\)$/,
          ),
        ]);
      });
    });

    describe('mutations the run catches', () => {
      it('an environment variable spelt differently in the construct: the function fails naming it', async () => {
        const renamed = assembly.withTemplate((resources) => {
          const variables = resources[fn('runtests').logicalId]!.Properties!['Environment'].Variables;
          variables[`${ENV.testRunnerProject}_X`] = variables[ENV.testRunnerProject];
          delete variables[ENV.testRunnerProject];
        });
        // A new environment (a warm one of the original keeps its variables, as on Lambda).
        const runTests = {
          ...renamed.functions().find((f) => f.logicalId === fn('runtests').logicalId)!,
          logicalId: 'runtestsRenamedVariable',
        };
        const result = await run.lambda.invoke(runTests, { Records: [] });
        expect(result).toMatchObject({
          ok: false,
          error: { errorMessage: expect.stringContaining(ENV.testRunnerProject) },
        });
      });

      it("a separate file missing from the sequencer's asset: the patch fails naming the file", async () => {
        const copy = join(outdir, 'asset.without-git-engine');
        cpSync(fn('sequencer').codeDir, copy, { recursive: true });
        rmSync(join(copy, 'git-engine.js'));
        const sequencer = { ...fn('sequencer'), logicalId: 'sequencerWithoutGitEngine', codeDir: copy };
        const diff =
          'diff --git a/x.txt b/x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n';
        // A branch of its own: agent/ws1 is bound to ws1 (one workspace per branch, decisions §26). The
        // git engine fails at its load, before the branch is looked for.
        const body = JSON.stringify({
          jobId: 'sep1',
          workspaceId: 'ws4',
          tenantId: 't1',
          type: 'apply_patch',
          createdAt: new Date().toISOString(),
          payload: { repo: { url: repoUrl, branch: 'agent/ws4' }, diff, message: 'x' },
        });
        const record = {
          messageId: 'm-sep1',
          receiptHandle: 'r',
          body,
          attributes: {
            ApproximateReceiveCount: '1',
            MessageGroupId: 'ws#ws4',
            SentTimestamp: String(Date.now()),
            SenderId: 'x',
            ApproximateFirstReceiveTimestamp: String(Date.now()),
            SequenceNumber: '1',
            MessageDeduplicationId: 'd',
          },
          messageAttributes: {},
          md5OfBody: '',
          eventSource: 'aws:sqs',
          eventSourceARN: assembly.getAtt(queueId('sequencerQueue'), 'Arn'),
          awsRegion: REGION,
        };
        await run.lambda.invoke(sequencer, { Records: [record] });
        const failed = await settled('sep1', 'FAILED');
        expect(JSON.stringify(failed!['error'])).toContain('git-engine.js');
      });

      it('an SDK call added without its grant: the simulation names the function, the action and the resource', async () => {
        const copy = join(outdir, 'asset.with-extra-call');
        cpSync(fn('runtests').codeDir, copy, { recursive: true });
        const dynamodb = JSON.stringify(join(ROOT, 'node_modules', '@aws-sdk', 'client-dynamodb'));
        writeFileSync(
          join(copy, 'extra.js'),
          [
            `const original = require('./index.js');`,
            `const { DynamoDBClient, DeleteItemCommand } = require(${dynamodb});`,
            `exports.handler = async (event, context) => {`,
            `  await new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL }).send(new DeleteItemCommand({ TableName: process.env.${ENV.ledgerTable}, Key: { pk: { S: 'job#none' } } }));`,
            `  return original.handler(event, context);`,
            `};`,
          ].join('\n'),
        );
        const runTests = {
          ...fn('runtests'),
          logicalId: 'runtestsWithExtraCall',
          codeDir: copy,
          handler: 'extra.handler',
        };
        const before = run.calls.length;
        await run.lambda.invoke(runTests, { Records: [] });
        const denied = (await decide(assembly, run.calls.slice(before)))
          .filter((d) => !d.allowed)
          .map((d) => d.description);
        expect(denied).toEqual([
          expect.stringMatching(
            /^function runtestsWorkerFunction dynamodb:DeleteItem on arn:aws:dynamodb:eu-west-1:123456789012:table\/.+: ImplicitlyDenied$/,
          ),
        ]);
      });
    });
  });
}
