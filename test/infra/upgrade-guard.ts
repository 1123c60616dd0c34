/**
 * The upgrade guard: what a deploy of today's template would do to the state a stack of the
 * latest release holds. Each resource change is classified as `cdk diff` classifies it
 * (@aws-cdk/cloudformation-diff reads the CloudFormation resource specification: which property
 * changes replace a resource); a replacement, or a removal, of a stateful resource is a finding,
 * named by stack, logical id and property, unless release/accepted-replacements.json accepts it.
 */
import { fullDiff, ResourceImpact, type ResourceDifference } from '@aws-cdk/cloudformation-diff';
import type { AcceptedReplacement } from '../../lib/release-templates';
import type { CfnResource, TemplateJson } from './template';

/** The property a removal is reported under (the resource as a whole goes). */
export const REMOVED = '(removed)';

/** Resource types that hold what an upgrade must not lose, and what that is. */
const STATEFUL_TYPES: Readonly<Record<string, string>> = {
  'AWS::DynamoDB::Table': "the ledger: every job's record, every workspace's head and fence; a new table starts empty",
  'AWS::SQS::Queue':
    'jobs waiting, and on a DLQ the failed and skipped ones kept for a replay; a new queue starts empty',
  'AWS::S3::Bucket': 'claim-checked diffs that queued jobs still point at',
  'AWS::KMS::Key': 'a replaced key is scheduled for deletion: what it encrypted can then no longer be read',
  'AWS::SecretsManager::Secret':
    'the credentials stored after the first deploy; a new secret holds the placeholder again',
};
const RETAINED = new Set(['Retain', 'RetainExceptOnCreate', 'Snapshot']);

/** Why `resource` is state, or undefined when it is not: the types above, and whatever the template retains (log groups). */
export function statefulBecause(resource: CfnResource): string | undefined {
  const byType = STATEFUL_TYPES[resource.Type];
  if (byType) return byType;
  if (resource.DeletionPolicy !== undefined && RETAINED.has(resource.DeletionPolicy)) {
    return `the template retains it (DeletionPolicy ${resource.DeletionPolicy})${resource.Type === 'AWS::Logs::LogGroup' ? ': the record of what ran' : ''}`;
  }
  return undefined;
}

export interface Finding {
  readonly stack: string;
  readonly logicalId: string;
  readonly type: string;
  /** The property whose change replaces the resource, `Type`, or REMOVED. */
  readonly property: string;
  /** What the deploy would do, in words. */
  readonly effect: string;
  readonly why: string;
}

export function describeFinding(f: Finding): string {
  return `${f.stack}: ${f.logicalId} (${f.type}) ${f.effect} [${f.property}]: it holds ${f.why}`;
}

/** Every replacement or removal of a stateful resource that deploying `today` over `released` would make. */
export function stateLosses(stack: string, released: TemplateJson, today: TemplateJson): Finding[] {
  const diff = fullDiff(released, today);
  const added = Object.entries(diff.resources.changes).filter(([, d]) => d.isAddition);
  const findings: Finding[] = [];
  diff.resources.forEachDifference((logicalId: string, change: ResourceDifference) => {
    const old = released.Resources[logicalId];
    const why = old && statefulBecause(old);
    if (!old || !why) return;
    const at = (property: string, effect: string): Finding => ({
      stack,
      logicalId,
      type: old.Type,
      property,
      effect,
      why,
    });
    if (change.isRemoval) {
      const sameType = added.filter(([, d]) => d.newResourceType === old.Type).map(([id]) => id);
      const kept = RETAINED.has(old.DeletionPolicy ?? '')
        ? 'left out of the stack (retained) while a deploy creates none in its place'
        : 'deleted';
      const hint =
        sameType.length > 0
          ? `; the template adds ${sameType.join(', ')} of the same type: a renamed construct id?`
          : '';
      findings.push(at(REMOVED, `would be removed from the template: ${kept}${hint}`));
      return;
    }
    if (change.resourceTypeChanged) {
      findings.push(at('Type', `would be replaced: its type changes to ${change.newResourceType}`));
      return;
    }
    for (const [property, update] of Object.entries(change.propertyUpdates)) {
      const impact = update.changeImpact;
      if (impact !== ResourceImpact.WILL_REPLACE && impact !== ResourceImpact.MAY_REPLACE) continue;
      const verb = impact === ResourceImpact.WILL_REPLACE ? 'would be replaced' : 'may be replaced';
      findings.push(
        at(
          property,
          `${verb}: ${property} changes from ${JSON.stringify(update.oldValue)} to ${JSON.stringify(update.newValue)}`,
        ),
      );
    }
  });
  return findings;
}

export interface GuardVerdict {
  /** Losses nobody accepted: each fails the guard. */
  readonly refused: Finding[];
  readonly accepted: Finding[];
  /** Accepted entries that match no finding, or lack their reason or migration: each fails the guard. */
  readonly badEntries: string[];
}

/** The findings of every stack, sorted into accepted and refused by the accepted list. */
export function judge(
  findings: readonly Finding[],
  acceptedList: readonly AcceptedReplacement[],
  stacks: readonly string[],
): GuardVerdict {
  const key = (e: { stack: string; logicalId: string; property: string }) => `${e.stack} ${e.logicalId} ${e.property}`;
  const acceptedKeys = new Set(acceptedList.map(key));
  const found = new Set(findings.map(key));
  const badEntries = acceptedList.flatMap((e) => {
    if (!stacks.includes(e.stack)) return []; // another stack's entry: judged with that stack
    const problems: string[] = [];
    if (!found.has(key(e)))
      problems.push(`${key(e)}: accepted, but no deploy would replace or remove it: take the entry out`);
    if (!e.reason?.trim() || !e.migration?.trim())
      problems.push(`${key(e)}: an accepted replacement needs its reason and its migration`);
    return problems;
  });
  return {
    refused: findings.filter((f) => !acceptedKeys.has(key(f))),
    accepted: findings.filter((f) => acceptedKeys.has(key(f))),
    badEntries,
  };
}
