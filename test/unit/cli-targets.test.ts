import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import { JOB_TYPE_NAMES } from '../../contract/job-types';
import { queueTopology } from '../../contract/topology';
import {
  BUILD_RECONCILER_LOG_GROUP_OUTPUT,
  STACK_OUTPUTS,
  dlqUrlOutputKey,
  logGroupOutputKey,
  queueUrlOutputKey,
} from '../../contract/stack-outputs';
import { awsLinks } from '../../tools/operator/job-logs';
import { TargetError } from '../../tools/operator/errors';
import { jobsQueue, requireServed, resolveTarget, targetFromStackOutputs } from '../../tools/operator/targets';
import { PLATFORM_FILE } from '../../tools/local/state-dir';

/** Every output an agent-jobs stack publishes, with recognisable values. */
function stackOutputs(): { OutputKey: string; OutputValue: string }[] {
  return [
    { OutputKey: STACK_OUTPUTS.ledgerTableName, OutputValue: 'ledger-table' },
    { OutputKey: STACK_OUTPUTS.diffBucketName, OutputValue: 'diff-bucket' },
    ...queueTopology().flatMap((q) => [
      { OutputKey: queueUrlOutputKey(q.name), OutputValue: `https://sqs/${q.name}` },
      { OutputKey: dlqUrlOutputKey(q.name), OutputValue: `https://sqs/${q.name}-dlq` },
    ]),
  ];
}

describe('targetFromStackOutputs', () => {
  it('maps the outputs to queues in topology order, the FIFO jobs queue first', () => {
    const target = targetFromStackOutputs('dev', 'eu-west-1', stackOutputs());
    expect(target).toMatchObject({
      kind: 'stack',
      region: 'eu-west-1',
      tableName: 'ledger-table',
      diffBucket: 'diff-bucket',
      endpoints: {},
    });
    expect(target.queues.map((q) => q.name)).toEqual(queueTopology().map((q) => q.name));
    expect(jobsQueue(target)).toMatchObject({
      name: 'agent-jobs',
      fifo: true,
      url: 'https://sqs/agent-jobs',
      dlqUrl: 'https://sqs/agent-jobs-dlq',
    });
  });

  it("reads each function's log group, for the links of `logs`; a stack without them has none", () => {
    const outputs = [
      ...stackOutputs(),
      { OutputKey: logGroupOutputKey('sequencer'), OutputValue: '/aws/lambda/seq' },
      { OutputKey: logGroupOutputKey('run_tests'), OutputValue: '/aws/lambda/tests' },
      { OutputKey: BUILD_RECONCILER_LOG_GROUP_OUTPUT, OutputValue: '/aws/lambda/reconciler' },
    ];
    expect(targetFromStackOutputs('dev', 'eu-west-1', outputs).logGroups).toEqual({
      sequencer: '/aws/lambda/seq',
      run_tests: '/aws/lambda/tests',
      build_reconciler: '/aws/lambda/reconciler',
    });
    expect(targetFromStackOutputs('dev', 'eu-west-1', stackOutputs()).logGroups).toEqual({});
  });

  it('names every missing output', () => {
    const outputs = stackOutputs().filter((o) => o.OutputKey !== 'LedgerTableName' && o.OutputKey !== 'DlqUrlOpenPr');
    expect(() => targetFromStackOutputs('dev', 'eu-west-1', outputs)).toThrow(
      'stack dev lacks the outputs DlqUrlOpenPr, LedgerTableName',
    );
  });
});

describe('logs on a stack: console links', () => {
  const job = {
    jobId: 't-1',
    workspaceId: 'ws',
    tenantId: 'acme',
    type: 'run_tests',
    status: 'SUCCEEDED',
    digest: 'd',
    attempt: 1,
    createdAt: '',
    updatedAt: '',
    ttl: 0,
    progress: { buildId: 'tests-project:1b2c' },
  } as const;
  const outputs = [
    ...stackOutputs(),
    { OutputKey: logGroupOutputKey('sequencer'), OutputValue: '/aws/lambda/seq' },
    { OutputKey: logGroupOutputKey('run_tests'), OutputValue: '/aws/lambda/tests' },
  ];

  it("links the job's lines in each function's log group that can hold them, and its build's log", () => {
    const links = awsLinks(targetFromStackOutputs('dev', 'eu-west-1', outputs), job);
    expect(links.map((l) => l.kind === 'link' && l.what)).toEqual([
      'sequencer log lines of t-1',
      'run_tests log lines of t-1',
      'build tests-project:1b2c log (the whole test output)',
    ]);
    // The console's fragment: the group encoded twice, `%` written `$`; the filter a JSON pattern on jobId.
    expect(links[0]).toMatchObject({
      url: 'https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/$252Faws$252Flambda$252Fseq/log-events$3FfilterPattern$3D$257B$2520$2524.jobId$2520$253D$2520$2522t-1$2522$2520$257D',
    });
    expect(links[2]).toMatchObject({
      url: 'https://eu-west-1.console.aws.amazon.com/codesuite/codebuild/projects/tests-project/build/tests-project%3A1b2c/log?region=eu-west-1',
    });
  });

  it('a stack without log group outputs still links the build', () => {
    expect(awsLinks(targetFromStackOutputs('dev', 'eu-west-1', stackOutputs()), job).map((l) => l.kind)).toEqual([
      'link',
    ]);
  });
});

describe('resolveTarget with --stack', () => {
  // CloudFormation has no offline emulator: a loopback server answers DescribeStacks (query protocol, XML).
  let server: Server;
  let endpoint: string;
  const requests: string[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        requests.push(body);
        const name = new URLSearchParams(body).get('StackName');
        if (name !== 'dev') {
          res.writeHead(400, { 'Content-Type': 'text/xml' });
          res.end(
            `<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id ${name} does not exist</Message></Error><RequestId>r</RequestId></ErrorResponse>`,
          );
          return;
        }
        const members = stackOutputs().map(
          (o) => `<member><OutputKey>${o.OutputKey}</OutputKey><OutputValue>${o.OutputValue}</OutputValue></member>`,
        );
        res.writeHead(200, { 'Content-Type': 'text/xml' });
        res.end(
          `<DescribeStacksResponse><DescribeStacksResult><Stacks><member><StackName>dev</StackName><StackStatus>CREATE_COMPLETE</StackStatus>` +
            `<CreationTime>2026-01-01T00:00:00Z</CreationTime><Outputs>${members.join('')}</Outputs></member></Stacks></DescribeStacksResult>` +
            `<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeStacksResponse>`,
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const client = () =>
    new CloudFormationClient({
      region: 'eu-west-1',
      endpoint,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
    });

  it('reads the stack outputs through DescribeStacks', async () => {
    const target = await resolveTarget({
      stack: 'dev',
      region: 'eu-west-1',
      stateDir: '/nowhere',
      cloudFormation: client(),
    });
    expect(target.label).toBe('stack dev (eu-west-1)');
    expect(jobsQueue(target).url).toBe('https://sqs/agent-jobs');
    expect(requests.at(-1)).toContain('Action=DescribeStacks');
  });

  it('turns an unknown stack into a TargetError', async () => {
    const attempt = resolveTarget({
      stack: 'other',
      region: 'eu-west-1',
      stateDir: '/nowhere',
      cloudFormation: client(),
    });
    await expect(attempt).rejects.toThrow(TargetError);
    await expect(
      resolveTarget({ stack: 'other', region: 'eu-west-1', stateDir: '/nowhere', cloudFormation: client() }),
    ).rejects.toThrow(/other does not exist/);
  });
});

describe('resolveTarget without --stack: the local platform', () => {
  let stateDir: string;

  beforeEach(async () => {
    stateDir = await mkdtemp(path.join(tmpdir(), 'cli-targets-'));
  });

  afterEach(async () => {
    await rm(stateDir, { recursive: true, force: true });
  });

  /** platform.json as tools/local/platform.ts writes it. */
  function platformFile(pid: number) {
    const names = queueTopology().map((q) => q.name);
    return {
      pid,
      startedAt: '2026-01-01T00:00:00.000Z',
      stateDir,
      region: 'us-east-1',
      endpoints: { sqs: 'http://127.0.0.1:1', s3: 'http://127.0.0.1:1', dynamodb: 'http://127.0.0.1:2' },
      queueUrls: Object.fromEntries(names.map((n) => [n, `http://sqs/${n}`])),
      dlqUrls: Object.fromEntries(names.map((n) => [n, `http://sqs/${n}-dlq`])),
      tableName: 'agent-jobs-ledger',
      bucketName: 'agent-jobs-diffs',
      gitUrl: 'http://127.0.0.1:3',
      eventLog: path.join(stateDir, 'events.jsonl'),
      logFile: path.join(stateDir, 'platform.log'),
    };
  }

  it('reads platform.json of a running platform', async () => {
    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify(platformFile(process.pid)));
    const target = await resolveTarget({ stateDir });
    expect(target).toMatchObject({
      kind: 'local',
      endpoints: { sqs: 'http://127.0.0.1:1', dynamodb: 'http://127.0.0.1:2' },
      tableName: 'agent-jobs-ledger',
      diffBucket: 'agent-jobs-diffs',
      local: { stateDir, gitUrl: 'http://127.0.0.1:3' },
    });
    expect(jobsQueue(target)).toMatchObject({
      url: 'http://sqs/agent-jobs',
      dlqUrl: 'http://sqs/agent-jobs-dlq',
      fifo: true,
    });
  });

  it('says how to start one when there is none', async () => {
    await expect(resolveTarget({ stateDir })).rejects.toThrow(/no local platform at .*agent-jobs local up/);
  });

  it('reports a platform.json it cannot read as that, not as a missing platform', async () => {
    await mkdir(path.join(stateDir, PLATFORM_FILE));
    await expect(resolveTarget({ stateDir })).rejects.toThrow(/cannot read .*platform\.json: EISDIR/);
  });

  it('refuses a file left behind by a platform that is gone', async () => {
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify(platformFile(gone)));
    await expect(resolveTarget({ stateDir })).rejects.toThrow(`is not running (pid ${gone} is gone)`);
  });

  it('serves every job type but those started without: a stage queue the file lacks (older file), or a type it does not list', async () => {
    const [stage] = queueTopology().filter((q) => q.role === 'stage');
    if (stage === undefined) throw new Error('the catalog has no staged job type');
    const file = platformFile(process.pid);
    const { [stage.name]: _url, ...queueUrls } = file.queueUrls;
    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify({ ...file, queueUrls }));
    const older = await resolveTarget({ stateDir });
    expect(older.unserved?.jobTypes).toEqual([stage.consumer]);
    expect(older.queues.map((q) => q.name)).not.toContain(stage.name);
    expect(() => requireServed(older, stage.consumer)).toThrow(
      new RegExp(`started before job type ${stage.consumer} was declared: restart it`),
    );
    for (const type of JOB_TYPE_NAMES.filter((t) => t !== stage.consumer))
      expect(() => requireServed(older, type)).not.toThrow();

    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify({ ...file, jobTypes: JOB_TYPE_NAMES.slice(1) }));
    expect((await resolveTarget({ stateDir })).unserved?.jobTypes).toEqual(JOB_TYPE_NAMES.slice(0, 1));
    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify({ ...file, jobTypes: JOB_TYPE_NAMES }));
    expect((await resolveTarget({ stateDir })).unserved).toBeUndefined();
  });

  it('names a restart that keeps the ledger only for a platform whose ledger is on disk', async () => {
    const file = { ...platformFile(process.pid), jobTypes: JOB_TYPE_NAMES.slice(1) };
    const remedy = async (ledger: 'disk' | 'memory' | undefined) => {
      await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify({ ...file, ...(ledger && { ledger }) }));
      return (await resolveTarget({ stateDir })).unserved?.remedy;
    };

    expect(await remedy('disk')).toBe(
      'restart it to serve it (Ctrl-C, then "npm start -- --persist", which keeps its ledger and DLQ messages)',
    );
    for (const ledger of ['memory', undefined] as const) {
      const said = await remedy(ledger);
      expect(said).not.toMatch(/keeps its ledger/);
      expect(said).toMatch(/its ledger is in memory: a restart loses every job and DLQ message it holds/);
    }
  });

  it("refuses a file without the FIFO jobs queue: not this platform's", async () => {
    const file = platformFile(process.pid);
    const fifo = queueTopology().find((q) => q.fifo)?.name ?? '';
    const { [fifo]: _url, ...queueUrls } = file.queueUrls;
    await writeFile(path.join(stateDir, PLATFORM_FILE), JSON.stringify({ ...file, queueUrls }));
    await expect(resolveTarget({ stateDir })).rejects.toThrow(`lacks the queue ${fifo}`);
  });

  it('names what is wrong in a malformed file', async () => {
    await writeFile(
      path.join(stateDir, PLATFORM_FILE),
      JSON.stringify({ ...platformFile(process.pid), tableName: undefined }),
    );
    await expect(resolveTarget({ stateDir })).rejects.toThrow(/tableName/);
  });
});
