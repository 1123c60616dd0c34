/**
 * The README's teardown table (Deploy, Teardown) against the removal policies of each shipped
 * environment's synthesized template: every resource type a destroy keeps in an environment is a
 * row that says "kept" there, with the AWS CLI command that removes it; a row says "deleted" only
 * where the template lets CloudFormation delete every resource of the type.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT, shippedEnvironments, synthesizeEnvironment } from '../../lib/platform-app';
import type { TemplateJson } from './template';

/** The command that removes a kept resource of each type: a type kept without one here fails, until its row and command are written. */
const REMOVAL_COMMANDS: Readonly<Record<string, string>> = {
  'AWS::DynamoDB::Table': 'aws dynamodb delete-table',
  'AWS::SQS::Queue': 'aws sqs delete-queue',
  'AWS::S3::Bucket': 'aws s3 rb',
  'AWS::SecretsManager::Secret': 'aws secretsmanager delete-secret',
  'AWS::KMS::Key': 'aws kms schedule-key-deletion',
  'AWS::Logs::LogGroup': 'aws logs delete-log-group',
};
const KEPT = new Set(['Retain', 'RetainExceptOnCreate', 'Snapshot']);

interface Row {
  type: string;
  byEnv: Record<string, string>;
  command: string;
}

function teardownTable(envs: readonly string[]): Row[] {
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const section = readme.split(/^### Teardown$/m)[1]?.split(/^#{2,3} /m)[0];
  if (!section) throw new Error('README.md has no "### Teardown" section');
  const lines = section.split('\n').filter((l) => l.startsWith('|'));
  const cells = (line: string) =>
    line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
  const header = cells(lines[0]!);
  for (const env of envs)
    if (!header.includes(env))
      throw new Error(`README.md's teardown table has no column for the environment ${env} (config/${env}.json)`);
  return lines
    .slice(2)
    .map(cells)
    .filter((c) => c[1] !== '')
    .map((c) => ({
      type: c[1]!.replace(/`/g, ''),
      byEnv: Object.fromEntries(envs.map((env) => [env, c[header.indexOf(env)]!])),
      command: c[header.length - 1]!,
    }));
}

const envs = shippedEnvironments();
const rows = teardownTable(envs);
const templates = new Map(envs.map((env) => [env, synthesizeEnvironment(env).template as unknown as TemplateJson]));

describe.each(envs)('cdk destroy of %s', (env) => {
  const resources = () => Object.values(templates.get(env)!.Resources);

  it('keeps exactly what the README says it keeps', () => {
    const policies = new Map<string, Set<string>>();
    for (const r of resources()) {
      const kept = r.DeletionPolicy !== undefined && KEPT.has(r.DeletionPolicy) ? 'kept' : 'deleted';
      policies.set(r.Type, (policies.get(r.Type) ?? new Set()).add(kept));
    }
    const retainedTypes = [...policies]
      .filter(([, p]) => p.has('kept'))
      .map(([type]) => type)
      .sort();
    const keptRows = rows
      .filter((r) => r.byEnv[env]!.startsWith('kept'))
      .map((r) => r.type)
      .sort();
    expect(keptRows).toEqual(retainedTypes);
    for (const row of rows) {
      const said = row.byEnv[env]!.split(' ')[0];
      expect({ type: row.type, said, template: [...(policies.get(row.type) ?? ['none'])] }).toEqual({
        type: row.type,
        said,
        template: [said],
      });
    }
  });

  it('names the command that removes each kept type, after turning off deletion protection', () => {
    for (const row of rows.filter((r) => r.byEnv[env]!.startsWith('kept'))) {
      const command = REMOVAL_COMMANDS[row.type];
      expect({ type: row.type, known: command !== undefined }).toEqual({ type: row.type, known: true });
      expect(row.command).toContain(command);
      const protectedOnes = resources().filter(
        (r) => r.Type === row.type && r.Properties?.['DeletionProtectionEnabled'] === true,
      );
      if (protectedOnes.length > 0) expect(row.command).toContain('--no-deletion-protection-enabled');
    }
  });
});

it('lists no type the templates do not have', () => {
  const types = new Set([...templates.values()].flatMap((t) => Object.values(t.Resources).map((r) => r.Type)));
  expect(rows.map((r) => r.type).filter((t) => !types.has(t))).toEqual([]);
});
