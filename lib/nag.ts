/**
 * Acknowledging cdk-nag (v3) findings: always one rule, always on the narrowest construct, always
 * with the reason in code. Wildcard findings (IAM5) are acknowledged per finding, never for a whole
 * role, so a new wildcard still fails the check.
 */
import { type CfnElement, Stack, Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

/** How cdk-nag prints an ARN attribute of `resource` in a finding: `<LogicalId.Arn>`. */
export function nagArnRef(resource: IConstruct): string {
  return `<${nagLogicalId(resource)}.Arn>`;
}

function nagLogicalId(resource: IConstruct): string {
  return Stack.of(resource).getLogicalId(resource.node.defaultChild as CfnElement);
}

/** Acknowledges one IAM5 (wildcard) finding, e.g. `Resource::*` or `Action::s3:GetObject*`. */
export function acknowledgeWildcard(scope: IConstruct, finding: string, reason: string): void {
  Validations.of(scope).acknowledge({ id: `AwsSolutions-IAM5[${finding}]`, reason });
}
