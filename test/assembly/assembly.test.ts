/**
 * The assembly run: what `cdk deploy` would ship, run here first. The production configuration
 * (plus the git host and GitHub URL an operator sets) is synthesized with bundling once; every
 * function then runs from its asset in cdk.out on Node.js of the template's runtime major, wired
 * only by the template (assembly-run.ts), through a scenario of every lane. Every AWS call it
 * made is then simulated against the synthesized policies, every granted action must have been
 * used (or be listed below with why the scenario cannot reach it), and the resource policies are
 * simulated for the service principals that use them. Last, the mutations the run must catch,
 * each applied to a copy: an environment variable spelt differently, a separate file missing from
 * an asset, a statement removed from a role, an SDK call added without its grant.
 */
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { PutSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { enqueueAgentJob } from '../../src/client/producer';
import { S3DiffStore } from '../../src/adapters/diff-store';
import { startGitServer, type GitServer } from '../../src/local/git-server';
import { LAMBDA_NODE_MAJOR } from '../../lib/constructs/worker';
import { ENV } from '../../contract/runtime-env';
import { eventually } from '../support/eventually';
import { codeBuildStateChange } from '../support/codebuild-events';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';
import { createRepo, diffOfEdits, git, removeDir, tempDir } from '../support/git-fixtures';
import { addStack, newApp, ROOT } from '../infra/helpers';
import { startAssemblyRun, type AssemblyRun } from './assembly-run';
import { CloudAssembly, type AssemblyFunction } from './cloud-assembly';
import { baseName, decide, unusedGrants } from './iam';
import { lambdaNode, lambdaNodeUnavailable } from './lambda-node';
import { sandboxUnavailable } from './sandbox';
import { startTlsFront, type TlsFront } from './tls-front';

const STACK = 'AgentJobs-prod';
const GIT_HOST = { name: 'git.agent-jobs.test', address: '198.51.100.10', port: 80 };
/** GitHub at its own name (the template's default API URL), over TLS with the run's certificate. */
const GITHUB = { name: 'api.github.com', address: '198.51.100.20', port: 443 };
/** What an operator of a fork sets before the first deploy; everything else is config/prod.json. */
const OPERATOR_SETTINGS = { gitHosts: [GIT_HOST.name] };
const PUSH = { username: 'platform', password: 'push-token' };

const unavailable = lambdaNodeUnavailable() ?? sandboxUnavailable();

/**
 * Granted actions the scenario cannot reach, by role and action, with the reason. Anything else a
 * role grants must be used by a recorded call.
 */
const UNREACHED: Readonly<Record<string, string>> = {
  'xray:PutTraceSegments': 'active tracing: the Lambda service sends the segments, and the run has no X-Ray daemon',
  'xray:PutTelemetryRecords': 'active tracing, as above',
  'codebuild:ListBuildsForProject': 'only after a crash between StartBuild and recording the build id (finds the build once)',
  's3:ListBucket': 'only for a claim-checked diff that is missing (NoSuchKey instead of AccessDenied)',
  'sqs:GetQueueAttributes': "the event source mapping reads its queue's attributes when it is created; the run's poller does not",
  'sqs:ChangeMessageVisibility': 'heartbeats of long work and the back-off of a transient failure: the scenario has neither',
  'sqs:GetQueueUrl': "resolves a record's queue for ChangeMessageVisibility only, as above",
  'dynamodb:GetItem': 'the consistent read after a refused conditional write, on the paths of stage functions the scenario does not take',
  'dynamodb:Query': "a workspace's jobs in order (unblock and replay) and the due builds: paths the scenario does not take",
  'events:PutEvents': "a command stage's own outcome events (a refusal before its build); build outcomes come from build_events",
  'codebuild:BatchGetBuilds': 'a command stage reads a build only after a crash (see ListBuildsForProject); the reconciler only when a build is overdue',
  'secretsmanager:GetSecretValue': 'open_pr reads the GitHub token at its first pull request: the scenario opens none (see below)',
  'sqs:SendMessage': "a stage's or the build-events lane's permanent failure to its DLQ: the scenario fails only an apply_patch",
  'buildreconcilerWorkerRole dynamodb:UpdateItem': 'records the verdict of an overdue build: none is overdue in the scenario',
};
/** A grant `<role> <action> <resource>` is excused by an entry for its action or for its role and action. */
const excused = (grant: string): boolean => {
  const [role, action] = grant.split(' ') as [string, string];
  return action in UNREACHED || `${role} ${action}` in UNREACHED;
};

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

    const fn = (prefix: string): AssemblyFunction => run.functions.find((f) => baseName(f.logicalId) === `${prefix}WorkerFunction`)!;
    const queueUrl = (prefix: string) => assembly.ref(assembly.ofType('AWS::SQS::Queue').find(([id]) => baseName(id) === prefix)![0]);
    const tableName = () => assembly.physicalName(assembly.ofType('AWS::DynamoDB::Table')[0]![0]);
    const bucketName = () => assembly.physicalName(assembly.ofType('AWS::S3::Bucket')[0]![0]);
    const secretArn = (prefix: string) => assembly.ref(assembly.ofType('AWS::SecretsManager::Secret').find(([id]) => baseName(id) === prefix)![0]);
    const job = async (jobId: string) => (await run.operatorClients.dynamodb.send(new GetCommand({ TableName: tableName(), Key: { pk: `job#${jobId}` }, ConsistentRead: true }))).Item;
    const settled = (jobId: string, status = 'SUCCEEDED') =>
      eventually(() => job(jobId), (item) => item?.['status'] === status, { what: `${jobId} to be ${status} (failures: ${JSON.stringify(run.failures)})`, timeoutMs: 45_000, intervalMs: 250 });
    const repoUrl = `http://${GIT_HOST.name}/widgets.git`;
    const send = (request: Parameters<typeof enqueueAgentJob>[0]) =>
      enqueueAgentJob(request, { sqs: run.operatorClients.sqs, queueUrl: queueUrl('sequencerQueue'), diffStore: new S3DiffStore(run.operatorClients.s3, bucketName()) });
    const branchHead = (branch: string) => git(gitServer.gitDir('widgets'), 'rev-parse', branch);

    beforeAll(async () => {
      const node = lambdaNode(LAMBDA_NODE_MAJOR);
      // Outside the OS temp folder: each function gets a private /tmp, which would hide it.
      outdir = join(ROOT, 'node_modules', '.cache', 'agent-jobs', `assembly-${process.pid}`);
      const app = newApp({ bundle: true, outdir });
      addStack(app, 'prod', OPERATOR_SETTINGS);
      app.synth();
      assembly = new CloudAssembly(outdir, STACK);
      work = await tempDir('agent-jobs-assembly-');
      gitServer = await startGitServer({ root: join(work, 'repos'), auth: PUSH });
      github = await startFakeGitHub();
      tls = await startTlsFront(GITHUB.name, Number(new URL(github.url).port), work);
      run = await startAssemblyRun({
        assembly,
        node,
        hosts: [
          { ...GIT_HOST, hostPort: gitServer.port },
          { ...GITHUB, hostPort: tls.port },
        ],
        extraCaCerts: tls.certFile,
      });
      const secrets = run.operatorClients.secrets;
      await secrets.send(new PutSecretValueCommand({ SecretId: secretArn('GitCredentials'), SecretString: JSON.stringify(PUSH) }));
      await secrets.send(new PutSecretValueCommand({ SecretId: secretArn('GitReadCredentials'), SecretString: JSON.stringify({ username: 'reader', password: 'read-token' }) }));
      await secrets.send(new PutSecretValueCommand({ SecretId: secretArn('GithubToken'), SecretString: 'github-token' }));
      const source = join(work, 'src');
      mkdirSync(source);
      base = await createRepo(source, { 'README.md': 'widgets\n', 'src/widget.txt': 'one\n' });
      await git(source, 'branch', 'agent/ws1');
      await git(source, 'branch', 'agent/ws2');
      await gitServer.importRepository(source, 'widgets');
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
      firstDiff = await diffOfEdits(join(work, 'src'), base, async (tree) => writeFileSync(join(tree, 'src/widget.txt'), 'one\ntwo\n'));
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'apply_patch', jobId: 'p1', payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: firstDiff, message: 'Two widgets' } });
      await settled('p1');
      const large = await diffOfEdits(gitServer.gitDir('widgets'), await branchHead('agent/ws1'), async (tree) =>
        writeFileSync(join(tree, 'large.txt'), Array.from({ length: 3000 }, (_, i) => `line ${i} ${'y'.repeat(70)}`).join('\n') + '\n'));
      const sent = await send({ workspaceId: 'ws1', tenantId: 't1', type: 'apply_patch', jobId: 'p2', payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: large, message: 'A large file' } });
      expect(sent.diffRef).toBeDefined();
      await settled('p2');
      expect(await git(gitServer.gitDir('widgets'), 'log', '--format=%s', 'agent/ws1')).toBe('A large file\nTwo widgets\nbase');
    });

    it('starts run_tests and run_lint on CodeBuild, and their events end them; the scheduled reconciler runs', async () => {
      const head = await branchHead('agent/ws1');
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'run_tests', jobId: 't1', payload: {} });
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'run_lint', jobId: 'l1', payload: {} });
      const builds = await eventually(() => run.codeBuild.builds, (b) => b.length === 2, { what: 'two builds', timeoutMs: 45_000 });
      for (const build of builds) expect(build.environmentVariables).toContainEqual(expect.objectContaining({ name: 'COMMIT_SHA', value: head }));
      const jobOf = (b: (typeof builds)[number]) => b.environmentVariables.find((v) => v.name === 'JOB_ID')!.value;
      const tests = builds.find((b) => jobOf(b) === 't1')!;
      const lint = builds.find((b) => jobOf(b) === 'l1')!;
      await eventually(() => job('l1'), (item) => item?.['progress']?.buildId === lint.id, { what: 'l1 to record its build', timeoutMs: 30_000 });
      run.codeBuild.complete(tests.id, 'SUCCEEDED');
      const event = codeBuildStateChange({ buildId: tests.id, status: 'SUCCEEDED', jobId: 't1', jobType: 'run_tests', sha: head });
      expect(await run.putOnDefaultBus(event)).toBe(1);
      await settled('t1');
      run.codeBuild.complete(lint.id, 'FAILED');
      expect(await run.putOnDefaultBus(codeBuildStateChange({ buildId: lint.id, status: 'FAILED', jobId: 'l1', jobType: 'run_lint', sha: head }))).toBe(1);
      const lintJob = await settled('l1');
      expect(lintJob!['result']).toMatchObject({ verdict: 'failed', summary: 'lint failed', buildId: lint.id });
      // The reconciler, on its schedule: nothing is overdue (a build's timeout must pass first).
      const results = await run.fireSchedules();
      expect(results.map((r) => r.ok)).toEqual([true]);
    });

    it('refuses a pull request for a repository GitHub cannot name (not https://host/owner/repo)', async () => {
      await send({ workspaceId: 'ws1', tenantId: 't1', type: 'open_pr', jobId: 'pr1', payload: { baseBranch: 'main', title: 'Widgets' } });
      const failed = await settled('pr1', 'FAILED');
      expect(failed!['error']).toMatchObject({ reason: 'INVALID_JOB', message: expect.stringContaining('https://host/owner/repo') });
    });

    it('acknowledges a duplicate delivery without a second commit', async () => {
      const head = await branchHead('agent/ws1');
      const original = await job('p1');
      // The same job delivered again: its envelope, in its group, under another deduplication id.
      const body = JSON.stringify({ jobId: 'p1', workspaceId: 'ws1', tenantId: 't1', type: 'apply_patch', createdAt: original!['createdAt'], payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff: firstDiff, message: 'Two widgets' } });
      await run.operatorClients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl('sequencerQueue'), MessageBody: body, MessageGroupId: 'ws#ws1', MessageDeduplicationId: 'p1-again' }));
      await eventually(async () => (await run.operatorClients.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl('sequencerQueue'), AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }))).Attributes,
        (a) => a?.['ApproximateNumberOfMessages'] === '0' && a['ApproximateNumberOfMessagesNotVisible'] === '0', { what: 'the duplicate to be acknowledged', timeoutMs: 30_000 });
      expect(await branchHead('agent/ws1')).toBe(head);
      expect((await job('p1'))!['status']).toBe('SUCCEEDED');
    });

    it('puts a permanent failure on the DLQ with its ids, and blocks the workspace', async () => {
      await send({ workspaceId: 'ws2', tenantId: 't1', type: 'apply_patch', jobId: 'bad1', payload: { repo: { url: repoUrl, branch: 'agent/ws2' }, diff: 'diff --git a/nope.txt b/nope.txt\n--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n', message: 'Does not apply' } });
      const failed = await settled('bad1', 'FAILED');
      expect(failed!['error']).toMatchObject({ reason: expect.any(String) });
      const dlq = await run.operatorClients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl('sequencerQueueDlq'), MaxNumberOfMessages: 10, MessageAttributeNames: ['All'], WaitTimeSeconds: 1 }));
      expect(dlq.Messages?.map((m) => m.MessageAttributes?.['jobId']?.StringValue)).toContain('bad1');
    });

    it('left no function failing on the way', () => {
      expect(run.failures).toEqual([]);
    });

    describe('IAM, simulated', () => {
      it('allows every call each function and service made', async () => {
        const denied = (await decide(assembly, run.calls)).filter((d) => !d.allowed).map((d) => d.description);
        expect(denied).toEqual([]);
      });

      it('every granted action was used, or cannot be reached by the scenario for a listed reason', async () => {
        const unused = await unusedGrants(assembly, run.calls);
        expect(unused.filter((u) => !excused(u))).toEqual([]);
      });

      it("a missing statement fails naming the function, the action and the resource", async () => {
        const broken = assembly.withTemplate((resources) => {
          const policy = Object.entries(resources).find(([id, r]) => r.Type === 'AWS::IAM::Policy' && id.startsWith('runtestsWorkerRole'))![1];
          const statements = policy.Properties!['PolicyDocument'].Statement as Record<string, unknown>[];
          statements.splice(statements.findIndex((s) => [s['Action']].flat().includes('codebuild:StartBuild')), 1);
        });
        const denied = (await decide(broken, run.calls)).filter((d) => !d.allowed).map((d) => d.description);
        expect(denied).toEqual(expect.arrayContaining([expect.stringMatching(/^function runtestsWorkerFunction codebuild:StartBuild on arn:aws:codebuild:eu-west-1:123456789012:project\/.+: ImplicitlyDenied$/)]));
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
        const runTests = { ...renamed.functions().find((f) => f.logicalId === fn('runtests').logicalId)!, logicalId: 'runtestsRenamedVariable' };
        const result = await run.lambda.invoke(runTests, { Records: [] });
        expect(result).toMatchObject({ ok: false, error: { errorMessage: expect.stringContaining(ENV.testRunnerProject) } });
      });

      it("a separate file missing from the sequencer's asset: the patch fails naming the file", async () => {
        const copy = join(outdir, 'asset.without-git-engine');
        cpSync(fn('sequencer').codeDir, copy, { recursive: true });
        rmSync(join(copy, 'git-engine.js'));
        const sequencer = { ...fn('sequencer'), logicalId: 'sequencerWithoutGitEngine', codeDir: copy };
        const diff = 'diff --git a/x.txt b/x.txt\nnew file mode 100644\n--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n';
        const body = JSON.stringify({ jobId: 'sep1', workspaceId: 'ws3', tenantId: 't1', type: 'apply_patch', createdAt: new Date().toISOString(), payload: { repo: { url: repoUrl, branch: 'agent/ws1' }, diff, message: 'x' } });
        const record = { messageId: 'm-sep1', receiptHandle: 'r', body, attributes: { ApproximateReceiveCount: '1', MessageGroupId: 'ws#ws3', SentTimestamp: String(Date.now()), SenderId: 'x', ApproximateFirstReceiveTimestamp: String(Date.now()), SequenceNumber: '1', MessageDeduplicationId: 'd' }, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: assembly.getAtt(assembly.ofType('AWS::SQS::Queue').find(([id]) => baseName(id) === 'sequencerQueue')![0], 'Arn'), awsRegion: 'eu-west-1' };
        await run.lambda.invoke(sequencer, { Records: [record] });
        const failed = await settled('sep1', 'FAILED');
        expect(JSON.stringify(failed!['error'])).toContain('git-engine.js');
      });

      it('an SDK call added without its grant: the simulation names the function, the action and the resource', async () => {
        const copy = join(outdir, 'asset.with-extra-call');
        cpSync(fn('runtests').codeDir, copy, { recursive: true });
        const dynamodb = JSON.stringify(join(ROOT, 'node_modules', '@aws-sdk', 'client-dynamodb'));
        writeFileSync(join(copy, 'extra.js'), [
          `const original = require('./index.js');`,
          `const { DynamoDBClient, DeleteItemCommand } = require(${dynamodb});`,
          `exports.handler = async (event, context) => {`,
          `  await new DynamoDBClient({ endpoint: process.env.AWS_ENDPOINT_URL }).send(new DeleteItemCommand({ TableName: process.env.${ENV.ledgerTable}, Key: { pk: { S: 'job#none' } } }));`,
          `  return original.handler(event, context);`,
          `};`,
        ].join('\n'));
        const runTests = { ...fn('runtests'), logicalId: 'runtestsWithExtraCall', codeDir: copy, handler: 'extra.handler' };
        const before = run.calls.length;
        await run.lambda.invoke(runTests, { Records: [] });
        const denied = (await decide(assembly, run.calls.slice(before))).filter((d) => !d.allowed).map((d) => d.description);
        expect(denied).toEqual([expect.stringMatching(/^function runtestsWorkerFunction dynamodb:DeleteItem on arn:aws:dynamodb:eu-west-1:123456789012:table\/.+: ImplicitlyDenied$/)]);
      });
    });
  });
}

