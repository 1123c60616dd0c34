/**
 * A team that adds a job type to the catalog gets its lane with no change in lib/: queue, DLQ,
 * function, event source mapping, alarms, dashboard row, grants, sequencer wiring and outputs; a
 * command stage also gets the command runner and the build-completion path.
 */
import { Match } from 'aws-cdk-lib/assertions';
import { ENV, stageDlqUrlEnv, stageQueueUrlEnv } from '../../contract/runtime-env';
import { JOB_TYPES, JOB_TYPE_NAMES } from '../../contract/job-types';
import { wireSchemaFiles } from '../../src/core/wire-schema';
import { synth } from './helpers';

// The catalog with a throw-away command stage (test/support/catalog-with-check-format.ts); everything
// derived from it (topology, config, stack) is the real code.
jest.mock('../../contract/job-types', () =>
  jest
    .requireActual<typeof import('../support/catalog-with-check-format')>('../support/catalog-with-check-format')
    .catalogWithCheckFormat('npx prettier --check .'),
);

it('derives a whole lane from a new catalog entry', () => {
  const { stack, template } = synth({ workers: { check_format: { maxConcurrency: 4 } } });
  const lane = stack.lanes.find((l) => (l.spec.consumer as string) === 'check_format');
  if (!lane) throw new Error('no check_format lane');
  const id = (c: { node: { defaultChild?: unknown } }): string => stack.getLogicalId(c.node.defaultChild as never);
  const fn = (consumer: string) => {
    const found = stack.lanes.find((l) => (l.spec.consumer as string) === consumer);
    if (!found) throw new Error(`no ${consumer} lane`);
    return found.worker.function;
  };

  // One lane more than the catalog without check_format has (its stages, the sequencer and build_events), and the reconciler.
  const stagedLanes = (types: readonly string[], catalog: Record<string, { lane: string }>) =>
    types.filter((type) => catalog[type]?.lane === 'staged').length;
  const shipped = jest.requireActual<typeof import('../../contract/job-types')>('../../contract/job-types');
  const lanes = stagedLanes(JOB_TYPE_NAMES, JOB_TYPES) + 2;
  expect(lanes).toBe(stagedLanes(shipped.JOB_TYPE_NAMES, shipped.JOB_TYPES) + 1 + 2);
  template.resourceCountIs('AWS::SQS::Queue', 2 * lanes);
  template.resourceCountIs('AWS::Lambda::Function', lanes + 1);
  // Five per lane; the reconciler's three, GitHub's rate limits and the checkout secrets' are the stack's own.
  template.resourceCountIs('AWS::CloudWatch::Alarm', 5 * lanes + 5);
  template.hasResourceProperties('AWS::SQS::Queue', {
    VisibilityTimeout: 180,
    RedrivePolicy: Match.objectLike({ maxReceiveCount: 6 }),
  });
  template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
    FunctionName: { Ref: id(lane.worker.function) },
    BatchSize: 2,
    ScalingConfig: { MaximumConcurrency: 4 },
    FunctionResponseTypes: ['ReportBatchItemFailures'],
  });
  // The shared command-stage function, told which stage it serves, may start builds on the one project.
  template.hasResourceProperties('AWS::Lambda::Function', {
    Handler: 'index.handler',
    MemorySize: 128,
    Timeout: 30,
    Environment: {
      Variables: Match.objectLike({
        [ENV.stageJobType]: 'check_format',
        [ENV.testRunnerProject]: { Ref: id(stack.testRunner.project) },
      }),
    },
  });
  template.hasResourceProperties('AWS::IAM::Policy', {
    Roles: [{ Ref: id(lane.worker.role) }],
    PolicyDocument: {
      Statement: Match.arrayWith([
        Match.objectLike({
          Action: Match.arrayWith(['codebuild:StartBuild']),
          Resource: { 'Fn::GetAtt': [id(stack.testRunner.project), 'Arn'] },
        }),
      ]),
    },
  });
  // The sequencer forwards to its queue; the completion path copies its failed jobs to its DLQ.
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ [stageQueueUrlEnv('check_format')]: { Ref: id(lane.queue.queue) } }) },
  });
  for (const reporter of [fn('build_events'), stack.buildReconciler?.worker.function]) {
    expect(
      template.toJSON().Resources[id(reporter as never)].Properties.Environment.Variables[
        stageDlqUrlEnv('check_format')
      ],
    ).toEqual({ Ref: id(lane.queue.deadLetterQueue as never) });
  }
  expect(Object.keys(template.toJSON().Outputs)).toEqual(
    expect.arrayContaining(['QueueUrlCheckFormat', 'DlqUrlCheckFormat']),
  );
  expect(JSON.stringify(template.findResources('AWS::CloudWatch::Dashboard'))).toContain(
    'check-format: backlog and oldest message',
  );
});

it("gives the wire contract's JSON Schema an envelope and a stage message of the new type", () => {
  const files = wireSchemaFiles();
  const typesOf = (file: string) =>
    (JSON.parse(files[file] ?? '{}') as { oneOf: { properties: { type: { const: string } } }[] }).oneOf.map(
      (form) => form.properties.type.const,
    );
  expect(typesOf('job-envelope.schema.json')).toContain('check_format');
  expect(typesOf('stage-message.schema.json')).toContain('check_format');
});
