/**
 * A team that adds a job type to the catalog gets its lane with no change in lib/: queue, DLQ,
 * function, event source mapping, alarms, dashboard row, grants, sequencer wiring and outputs.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { stageQueueUrlEnv } from '../../contract/runtime-env';
import { synth } from './helpers';

// A stand-in catalog with one more staged job type. Mocked because contract/ cannot grow a job
// type just for this test; everything else (topology, config, stack) is the real code.
jest.mock('../../contract/job-types', () => {
  const actual = jest.requireActual('../../contract/job-types');
  const lint = {
    queue: 'lint',
    handlerEntry: 'src/handlers/run-tests.ts',
    timeoutSeconds: 300,
    memoryMb: 256,
    batchSize: 2,
    maxConcurrency: 3,
    maxReceiveCount: 6,
    oldestMessageAlarmSeconds: 600,
    needs: ['gitCredentials'],
    bundleBudgetKiB: 120,
  };
  return { ...actual, allWorkers: () => [...actual.allWorkers(), { name: 'lint', settings: lint }] };
});

it('derives a whole lane from a new catalog entry', () => {
  const { stack, template } = synth({ workers: { lint: { maxConcurrency: 4 } } });
  const lane = stack.lanes.find((l) => l.spec.consumer === 'lint');
  if (!lane) throw new Error('no lint lane');
  const id = (c: { node: { defaultChild?: unknown } }): string => stack.getLogicalId(c.node.defaultChild as never);

  template.resourceCountIs('AWS::SQS::Queue', 8);
  template.resourceCountIs('AWS::Lambda::Function', 4);
  template.resourceCountIs('AWS::CloudWatch::Alarm', 20);
  template.hasResourceProperties('AWS::SQS::Queue', { VisibilityTimeout: 1800, RedrivePolicy: Match.objectLike({ maxReceiveCount: 6 }) });
  template.hasResourceProperties('AWS::Lambda::Function', { Environment: { Variables: Match.objectLike({ VISIBILITY_TIMEOUT_SECONDS: '1800' }) } });
  template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
    FunctionName: { Ref: id(lane.worker.function) },
    BatchSize: 2,
    ScalingConfig: { MaximumConcurrency: 4 },
    FunctionResponseTypes: ['ReportBatchItemFailures'],
  });
  // Its declared need (git credentials) is granted, and the sequencer forwards to its queue.
  template.hasResourceProperties('AWS::IAM::Policy', {
    Roles: [{ Ref: id(lane.worker.role) }],
    PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Action: 'secretsmanager:GetSecretValue', Resource: { Ref: id(stack.secrets.gitCredentials.secret) } })]) },
  });
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ [stageQueueUrlEnv('lint')]: { Ref: id(lane.queue.queue) } }) },
  });
  expect(Object.keys(template.toJSON().Outputs)).toEqual(expect.arrayContaining(['QueueUrlLint', 'DlqUrlLint']));
  expect(JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard'))).toContain('lint: backlog and oldest message');
});
