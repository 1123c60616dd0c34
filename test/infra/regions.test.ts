/**
 * Every commercial region where the stack's services exist (lib/regions.ts): the command runner's
 * CodeBuild environment is one the region offers, decided at synth for an environment with a
 * region and by the template for an environment-agnostic one; no property a region refuses.
 */
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AgentJobsStack } from '../../lib/agent-jobs-stack';
import { resolveConfig } from '../../lib/config';
import { ARM_CODEBUILD_REGIONS, CODEBUILD_IMAGES, REGIONS_WITHOUT_CODEBUILD } from '../../lib/regions';
import { newApp, ROOT, synth } from './helpers';
import { resourcesOf, type TemplateJson } from './template';

const inRegion = (region: string, app: App = newApp()): Template =>
  Template.fromStack(
    new AgentJobsStack(app, 'AgentJobs-dev', {
      config: resolveConfig('dev', {}),
      projectRoot: ROOT,
      env: { account: '123456789012', region },
    }),
  );

const environmentOf = (t: Template): Record<string, unknown> => {
  const [project] = resourcesOf(t.toJSON() as TemplateJson, 'AWS::CodeBuild::Project');
  return project![1].Properties!['Environment'] as Record<string, unknown>;
};

it.each(['eu-west-2', 'ca-central-1'])(
  'in %s, which has no ARM CodeBuild, the builds run on x86 Amazon Linux',
  (region) => {
    expect(environmentOf(inRegion(region))).toMatchObject({
      Type: 'LINUX_CONTAINER',
      Image: CODEBUILD_IMAGES.x86,
      ComputeType: 'BUILD_GENERAL1_SMALL',
    });
  },
);

it.each(['us-east-1', 'eu-west-1'])('in %s the builds run on ARM Amazon Linux', (region) => {
  expect(environmentOf(inRegion(region))).toMatchObject({
    Type: 'ARM_CONTAINER',
    Image: CODEBUILD_IMAGES.arm,
    ComputeType: 'BUILD_GENERAL1_SMALL',
  });
});

it('an environment-agnostic template picks ARM in the regions that offer it and x86 elsewhere, by a condition on AWS::Region', () => {
  const t = synth().template.toJSON() as TemplateJson & { Conditions: Record<string, unknown> };
  const environment = environmentOf(synth().template);
  const [condition] = Object.entries(t.Conditions).filter(([, c]) => JSON.stringify(c).includes('AWS::Region'));
  expect(condition).toBeDefined();
  const regions = JSON.stringify(condition![1])
    .match(/"[a-z]+-[a-z]+-\d"/g)
    ?.map((r) => JSON.parse(r) as string)
    .sort();
  expect(regions).toEqual([...ARM_CODEBUILD_REGIONS].sort());
  expect(environment['Type']).toEqual({ 'Fn::If': [condition![0], 'ARM_CONTAINER', 'LINUX_CONTAINER'] });
  expect(environment['Image']).toEqual({ 'Fn::If': [condition![0], CODEBUILD_IMAGES.arm, CODEBUILD_IMAGES.x86] });
});

it('refuses at synth, in one line, a region without CodeBuild; an agnostic template refuses it at deploy, before creating anything', () => {
  for (const region of REGIONS_WITHOUT_CODEBUILD)
    expect(() => inRegion(region)).toThrow(new RegExp(`region = ${region}: CodeBuild is not offered there`));
  const rules = (
    synth().template.toJSON() as {
      Rules: Record<string, { Assertions: { Assert: unknown; AssertDescription: string }[] }>;
    }
  ).Rules;
  const codebuild = Object.values(rules).find((r) => JSON.stringify(r).includes('AWS::Region'));
  expect(codebuild?.Assertions[0]).toEqual({
    Assert: { 'Fn::Not': [{ 'Fn::Contains': [[...REGIONS_WITHOUT_CODEBUILD], { Ref: 'AWS::Region' }] }] },
    AssertDescription: expect.stringMatching(/CodeBuild is not offered in this region/),
  });
});

it('sets no property a commercial region refuses (the event bus has no Description, which GovCloud refuses too)', () => {
  for (const [, bus] of resourcesOf(synth().template.toJSON() as TemplateJson, 'AWS::Events::EventBus'))
    expect(bus.Properties).not.toHaveProperty('Description');
});
