/**
 * Upgrades never lose data: today's template of each shipped environment, deployed over the
 * latest release's (release/<version>/), replaces or removes no stateful resource but those
 * accepted on purpose (release/accepted-replacements.json). The guard is shown failing, naming
 * the resource and the property, on a renamed construct id and on replacement-only property
 * changes, made to a copy of today's template or to a stack in memory.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import {
  addPlatformStack,
  cdkJsonContext,
  PROJECT_ROOT,
  shippedEnvironments,
  synthesizeEnvironment,
} from '../../lib/platform-app';
import {
  acceptedReplacements,
  isSemver,
  keptTemplate,
  maskAssetHashes,
  releaseTemplateFile,
  releasedVersion,
  type AcceptedReplacement,
} from '../../lib/release-templates';
import { clone, resourcesOf, type TemplateJson } from './template';
import { describeFinding, judge, REMOVED, stateLosses, type Finding } from './upgrade-guard';

const version = releasedVersion();
const today = new Map(
  shippedEnvironments().map((env) => {
    const { stackName, template } = synthesizeEnvironment(env);
    return [stackName, maskAssetHashes(template) as unknown as TemplateJson] as const;
  }),
);
const dev = today.get('AgentJobs-dev')!;

const only = (t: TemplateJson, type: string, where: (p: Record<string, unknown>) => boolean = () => true): string => {
  const found = resourcesOf(t, type).filter(([, r]) => where(r.Properties ?? {}));
  if (found.length !== 1) throw new Error(`expected one ${type}, found ${found.length}`);
  return found[0]![0];
};
const ledgerId = only(dev, 'AWS::DynamoDB::Table');
// The ordered lane's queue: the FIFO queue with a redrive policy (its DLQ has none).
const fifoQueueId = only(dev, 'AWS::SQS::Queue', (p) => p['FifoQueue'] === true && p['RedrivePolicy'] !== undefined);
const mutated = (mutate: (t: TemplateJson) => void): Finding[] => {
  const copy = clone(dev);
  mutate(copy);
  return stateLosses('AgentJobs-dev', dev, copy);
};
const verdictOf = (findings: Finding[], accepted: AcceptedReplacement[] = []) =>
  judge(findings, accepted, ['AgentJobs-dev']);

describe('the release', () => {
  it('has a semantic version, a CHANGELOG entry and the kept templates of every shipped environment', () => {
    expect(isSemver(version)).toBe(true);
    const changelog = readFileSync(join(PROJECT_ROOT, 'CHANGELOG.md'), 'utf8');
    expect(changelog).toMatch(new RegExp(`^## \\[${version.replace(/\./g, '\\.')}\\]`, 'm'));
    for (const stack of today.keys()) {
      expect({ stack, kept: existsSync(releaseTemplateFile(version, stack)) }).toEqual({ stack, kept: true });
    }
  });

  it("every accepted replacement is in the CHANGELOG's Unreleased notes, with its migration", () => {
    const changelog = readFileSync(join(PROJECT_ROOT, 'CHANGELOG.md'), 'utf8');
    const unreleased = changelog.split(/^## \[Unreleased\]/m)[1]?.split(/^## \[/m)[0] ?? '';
    for (const entry of acceptedReplacements()) expect(unreleased).toContain(entry.logicalId);
  });
});

describe.each([...today.keys()])('%s against the latest release', (stack) => {
  it('replaces or removes no stateful resource, but those accepted on purpose', () => {
    const released = keptTemplate(version, stack) as TemplateJson | undefined;
    if (!released) return; // an environment added since the release: nothing deployed to lose
    const verdict = judge(stateLosses(stack, released, today.get(stack)!), acceptedReplacements(), [stack]);
    expect([...verdict.refused.map(describeFinding), ...verdict.badEntries]).toEqual([]);
  });
});

describe('the guard', () => {
  it('finds nothing when nothing changed', () => {
    expect(mutated(() => undefined)).toEqual([]);
  });

  it('fails on a renamed construct id: the table is removed and another added in its place', () => {
    const findings = mutated((t) => {
      t.Resources['LedgerRenamedTable12345678'] = t.Resources[ledgerId]!;
      delete t.Resources[ledgerId];
    });
    expect(findings).toEqual([
      expect.objectContaining({ logicalId: ledgerId, type: 'AWS::DynamoDB::Table', property: REMOVED }),
    ]);
    expect(describeFinding(findings[0]!)).toMatch(
      /left out of the stack \(retained\).*adds LedgerRenamedTable12345678 of the same type: a renamed construct id\?/,
    );
    expect(verdictOf(findings).refused).toHaveLength(1);
  });

  it('fails on a renamed construct id in a stack in memory: the FIFO queue under another logical id', () => {
    const app = new App({ context: { ...cdkJsonContext(), env: 'dev', 'aws:cdk:bundling-stacks': [] } });
    const stack = addPlatformStack(app);
    const sequencer = stack.lanes.find((l) => l.spec.role === 'ordered')!;
    (sequencer.queue.queue.node.defaultChild as sqs.CfnQueue).overrideLogicalId('sequencerJobsQueue');
    const renamed = maskAssetHashes(app.synth().getStackArtifact(stack.artifactId).template) as TemplateJson;
    const findings = stateLosses('AgentJobs-dev', dev, renamed);
    expect(findings).toEqual([
      expect.objectContaining({ logicalId: fifoQueueId, type: 'AWS::SQS::Queue', property: REMOVED }),
    ]);
    expect(describeFinding(findings[0]!)).toMatch(/deleted; the template adds sequencerJobsQueue of the same type/);
  });

  it.each([
    [
      "the table's KeySchema",
      () => ledgerId,
      'KeySchema',
      (p: Record<string, unknown>) => {
        p['KeySchema'] = [{ AttributeName: 'id', KeyType: 'HASH' }];
      },
    ],
    [
      "the table's TableName",
      () => ledgerId,
      'TableName',
      (p: Record<string, unknown>) => {
        p['TableName'] = 'agent-jobs-ledger';
      },
    ],
    [
      "the FIFO queue's FifoQueue",
      () => fifoQueueId,
      'FifoQueue',
      (p: Record<string, unknown>) => {
        p['FifoQueue'] = false;
      },
    ],
    [
      "the FIFO queue's QueueName",
      () => fifoQueueId,
      'QueueName',
      (p: Record<string, unknown>) => {
        p['QueueName'] = 'agent-jobs.fifo';
      },
    ],
  ])('fails on a replacement-only property change: %s', (_name, id, property, change) => {
    const findings = mutated((t) => change(t.Resources[id()]!.Properties!));
    expect(findings).toEqual([expect.objectContaining({ logicalId: id(), property })]);
    expect(describeFinding(findings[0]!)).toContain(`would be replaced: ${property} changes`);
  });

  it('lets an update in place through, and a replacement of what holds no state', () => {
    const findings = mutated((t) => {
      t.Resources[fifoQueueId]!.Properties!['VisibilityTimeout'] = 1234;
      t.Resources[only(t, 'AWS::SNS::Topic')]!.Properties!['TopicName'] = 'agent-jobs-alarms';
    });
    expect(findings).toEqual([]);
  });

  it('fails on a retained log group removed, and on a secret removed', () => {
    const logGroup = resourcesOf(dev, 'AWS::Logs::LogGroup')[0]![0];
    const secret = resourcesOf(dev, 'AWS::SecretsManager::Secret')[0]![0];
    const findings = mutated((t) => {
      delete t.Resources[logGroup];
      delete t.Resources[secret];
    });
    expect(findings.map((f) => [f.logicalId, f.property]).sort()).toEqual(
      [
        [logGroup, REMOVED],
        [secret, REMOVED],
      ].sort(),
    );
  });

  describe('an accepted replacement', () => {
    const keySchema = (t: TemplateJson) => {
      t.Resources[ledgerId]!.Properties!['KeySchema'] = [{ AttributeName: 'id', KeyType: 'HASH' }];
    };
    const entry: AcceptedReplacement = {
      stack: 'AgentJobs-dev',
      logicalId: ledgerId,
      property: 'KeySchema',
      reason: 'a new key',
      migration: 'export, then import',
    };

    it('passes the guard when listed with its reason and migration', () => {
      const verdict = verdictOf(mutated(keySchema), [entry]);
      expect(verdict).toEqual({
        refused: [],
        accepted: [expect.objectContaining({ logicalId: ledgerId, property: 'KeySchema' })],
        badEntries: [],
      });
    });

    it('fails without its migration', () => {
      expect(verdictOf(mutated(keySchema), [{ ...entry, migration: ' ' }]).badEntries).toEqual([
        expect.stringMatching(/needs its reason and its migration/),
      ]);
    });

    it('fails once nothing would be replaced (a stale entry is taken out)', () => {
      expect(verdictOf([], [entry]).badEntries).toEqual([
        expect.stringMatching(/KeySchema: accepted, but no deploy would replace or remove it/),
      ]);
    });

    it('accepts only its own property', () => {
      const both = mutated((t) => {
        keySchema(t);
        t.Resources[ledgerId]!.Properties!['TableName'] = 'x';
      });
      expect(verdictOf(both, [entry]).refused).toEqual([expect.objectContaining({ property: 'TableName' })]);
    });
  });
});
