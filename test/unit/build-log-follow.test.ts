/**
 * Following a run's output on a deployed stack (tools/operator/build-log.ts, followRunOutput):
 * CodeBuild names the build's CloudWatch Logs stream and GetLogEvents reads it on, page by page.
 * Emulated with aws-sdk-client-mock: CodeBuild and CloudWatch Logs have no local stand-in. The
 * job's record over time is scripted (what the stage writes as the build runs and ends).
 */
import { BatchGetBuildsCommand, CodeBuildClient } from '@aws-sdk/client-codebuild';
import { CloudWatchLogsClient, GetLogEventsCommand, ResourceNotFoundException } from '@aws-sdk/client-cloudwatch-logs';
import { mockClient } from 'aws-sdk-client-mock';
import type { JobRecord, Ledger } from '../../src/core/ports';
import type { Connection } from '../../tools/operator/connection';
import { followRunOutput } from '../../tools/operator/job-logs';
import type { Target, TargetClients } from '../../tools/operator/targets';

const codeBuild = mockClient(CodeBuildClient);
const logs = mockClient(CloudWatchLogsClient);
afterEach(() => {
  codeBuild.reset();
  logs.reset();
});

const BUILD = 'agent-jobs-tests:0b6c1d2e-1111-4222-8333-944455556666';
const stack: Target = {
  kind: 'stack',
  stackName: 'AgentJobs-dev',
  label: 'stack AgentJobs-dev (eu-west-1)',
  region: 'eu-west-1',
  endpoints: {},
  queues: [],
  tableName: 'ledger',
};

function job(status: JobRecord['status'], buildId?: string): JobRecord {
  return {
    jobId: 'cb-t1',
    workspaceId: 'ws-1',
    tenantId: 't',
    type: 'run_tests',
    status,
    digest: 'd',
    createdAt: '2026-12-03T00:00:00Z',
    updatedAt: '2026-12-03T00:00:00Z',
    ...(buildId && { progress: { buildId } }),
  } as JobRecord;
}

/** A connection to a stack whose job reads as `records`, one per read, the last one kept. */
function connectionReading(records: JobRecord[]): Connection {
  const ledger = { getJob: async () => (records.length > 1 ? records.shift() : records[0]) } as unknown as Ledger;
  const clients = {
    codeBuild: new CodeBuildClient({ region: 'eu-west-1' }),
    logs: new CloudWatchLogsClient({ region: 'eu-west-1' }),
  } as unknown as TargetClients;
  return { target: async () => stack, clients: async () => clients, ledger: async () => ledger };
}

async function follow(connection: Connection): Promise<{ pieces: string[]; job: JobRecord }> {
  const pieces: string[] = [];
  const job = await followRunOutput(connection, 'cb-t1', { onOutput: (text) => void pieces.push(text), pollMs: 1 });
  return { pieces, job };
}

test("follows the build's log stream from its first line to its end, page by page, then returns the finished job", async () => {
  codeBuild
    .on(BatchGetBuildsCommand, { ids: [BUILD] })
    .resolves({ builds: [{ id: BUILD, logs: { groupName: '/agent-jobs/tests', streamName: '0b6c1d2e' } }] });
  logs
    .on(GetLogEventsCommand)
    .rejectsOnce(new ResourceNotFoundException({ message: 'The specified log stream does not exist.', $metadata: {} }))
    .resolvesOnce({ events: [{ message: 'step 1\n' }, { message: 'step 2\n' }], nextForwardToken: 'f/1' })
    .resolvesOnce({ events: [], nextForwardToken: 'f/1' })
    .resolvesOnce({ events: [{ message: 'done\n' }], nextForwardToken: 'f/2' })
    .resolves({ events: [], nextForwardToken: 'f/2' });
  const { pieces, job: finished } = await follow(
    connectionReading([
      job('QUEUED'),
      job('RUNNING', BUILD),
      job('RUNNING', BUILD),
      job('RUNNING', BUILD),
      job('SUCCEEDED', BUILD),
    ]),
  );
  expect(pieces).toEqual(['step 1\nstep 2\n', 'done\n']);
  expect(finished.status).toBe('SUCCEEDED');
  // The stream named by the build itself, each page on from the last page's token, from the head.
  const reads = logs.commandCalls(GetLogEventsCommand).map((call) => call.args[0].input);
  expect(reads[0]).toMatchObject({
    logGroupName: '/agent-jobs/tests',
    logStreamName: '0b6c1d2e',
    startFromHead: true,
    limit: 1000,
  });
  expect(reads.slice(2).every((input) => input.nextToken !== undefined)).toBe(true);
});

test("a build that has not logged yet is asked again; a redrive's new build is followed from its own start", async () => {
  const second = `${BUILD.slice(0, -1)}7`;
  codeBuild
    .on(BatchGetBuildsCommand, { ids: [BUILD] })
    .resolvesOnce({ builds: [{ id: BUILD }] })
    .resolves({ builds: [{ id: BUILD, logs: { groupName: 'g', streamName: 'one' } }] });
  codeBuild
    .on(BatchGetBuildsCommand, { ids: [second] })
    .resolves({ builds: [{ id: second, logs: { groupName: 'g', streamName: 'two' } }] });
  logs
    .on(GetLogEventsCommand, { logStreamName: 'one' })
    .resolvesOnce({ events: [{ message: 'first run\n' }], nextForwardToken: 'a' })
    .resolves({ events: [], nextForwardToken: 'a' });
  logs
    .on(GetLogEventsCommand, { logStreamName: 'two' })
    .resolvesOnce({ events: [{ message: 'second run\n' }], nextForwardToken: 'b' })
    .resolves({ events: [], nextForwardToken: 'b' });
  const { pieces } = await follow(
    connectionReading([job('RUNNING', BUILD), job('RUNNING', BUILD), job('RUNNING', second), job('FAILED', second)]),
  );
  expect(pieces).toEqual(['first run\n', 'second run\n']);
});
