/**
 * The CI trust, as code: GitHub's OIDC provider (created, or imported where the account has one)
 * and two roles the workflows in .github/workflows assume with GitHub's OIDC token, no stored keys.
 *
 * - The deploy role trusts only this repository's jobs that run in one of the named GitHub
 *   environments (`repo:<owner>/<name>:environment:<env>`) or on one of the named branches
 *   (`repo:<owner>/<name>:ref:refs/heads/<branch>`), audience `sts.amazonaws.com`, exact matches
 *   (no wildcard in a `sub`). It may assume the CDK bootstrap roles of this account and region
 *   (deploy, file and image publishing, lookup: `cdk-<qualifier>-<kind>-role-<account>-<region>`)
 *   and nothing else: what a deploy may change is what the bootstrap's execution policy allows.
 * - The diff role trusts only this repository's pull-request jobs (`repo:<owner>/<name>:pull_request`)
 *   and may assume only the bootstrap lookup role (read-only), which `cdk diff --method template` uses.
 *   GitHub issues no OIDC token to a pull request from a fork, so a fork's pull request gets neither.
 *
 * Deployed on its own, once per account and region: `npx cdk deploy AgentJobs-ci-trust -c githubRepo=<owner>/<name>`
 * (bin/app.ts adds the stack only when `githubRepo` is given).
 */
import { CfnOutput, DefaultStackSynthesizer, Stack, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { InvalidConfigError } from './config';

/** GitHub's OIDC issuer and the audience configure-aws-credentials asks for. */
export const GITHUB_OIDC_URL = 'https://token.actions.githubusercontent.com';
export const GITHUB_OIDC_AUDIENCE = 'sts.amazonaws.com';
/** The bootstrap roles a CDK deploy assumes (aws-cdk's bootstrap template names them so). */
export const BOOTSTRAP_ROLE_KINDS = ['deploy', 'file-publishing', 'image-publishing', 'lookup'] as const;

export interface CiTrustStackProps extends StackProps {
  /** `owner/name` of the GitHub repository whose workflows may assume the roles. */
  readonly githubRepo: string;
  /**
   * GitHub environments whose jobs may assume the deploy role.
   * @default ['dev', 'prod'] (the environments .github/workflows/deploy.yml deploys in)
   */
  readonly environments?: readonly string[];
  /**
   * Branches whose jobs (outside an environment) may assume the deploy role.
   * @default [] (the deploy workflow runs its jobs in environments)
   */
  readonly branches?: readonly string[];
  /**
   * The ARN of the account's GitHub OIDC provider, where it has one already (an account holds one
   * provider per issuer URL).
   * @default a new provider
   */
  readonly existingProviderArn?: string;
  /**
   * The bootstrap qualifier (`cdk bootstrap --qualifier`).
   * @default context `@aws-cdk/core:bootstrapQualifier`, else CDK's default (`hnb659fds`)
   */
  readonly bootstrapQualifier?: string;
}

/** Why each prop is refused, all at once; empty when they are valid. */
export function ciTrustProblems(props: Pick<CiTrustStackProps, 'githubRepo' | 'environments' | 'branches'>): string[] {
  const problems: string[] = [];
  if (!/^[A-Za-z0-9-]+\/[A-Za-z0-9._-]+$/.test(props.githubRepo))
    problems.push(`githubRepo = "${props.githubRepo}": expected <owner>/<name>, e.g. acme/agent-jobs`);
  // A `sub` condition matched with StringEquals: a wildcard or a colon would not mean what it says.
  for (const [setting, names] of [
    ['githubEnvironments', props.environments ?? []],
    ['githubBranches', props.branches ?? []],
  ] as const) {
    for (const name of names)
      if (name === '' || /[*?:\s]/.test(name))
        problems.push(`${setting}: "${name}" is not a name (no wildcard, colon or space)`);
  }
  if ((props.environments ?? ['dev', 'prod']).length + (props.branches ?? []).length === 0)
    problems.push('githubEnvironments and githubBranches are both empty: nothing could assume the deploy role');
  return problems;
}

export class CiTrustStack extends Stack {
  public readonly provider: iam.IOidcProvider;
  public readonly deployRole: iam.Role;
  public readonly diffRole: iam.Role;

  constructor(scope: Construct, id: string, props: CiTrustStackProps) {
    super(scope, id, props);
    const problems = ciTrustProblems(props);
    if (problems.length > 0) throw new InvalidConfigError(`${id}, cdk context`, problems);
    const environments = props.environments ?? ['dev', 'prod'];
    const branches = props.branches ?? [];
    const qualifier =
      props.bootstrapQualifier ??
      (this.node.tryGetContext('@aws-cdk/core:bootstrapQualifier') as string | undefined) ??
      DefaultStackSynthesizer.DEFAULT_QUALIFIER;

    this.provider = props.existingProviderArn
      ? iam.OidcProviderNative.fromOidcProviderArn(this, 'GithubOidc', props.existingProviderArn)
      : new iam.OidcProviderNative(this, 'GithubOidc', { url: GITHUB_OIDC_URL, clientIds: [GITHUB_OIDC_AUDIENCE] });

    const bootstrapRole = (kind: (typeof BOOTSTRAP_ROLE_KINDS)[number]): string =>
      `arn:${this.partition}:iam::${this.account}:role/cdk-${qualifier}-${kind}-role-${this.account}-${this.region}`;
    const trustedBy = (subjects: string[]): iam.IPrincipal =>
      new iam.OpenIdConnectPrincipal(this.provider, {
        StringEquals: {
          'token.actions.githubusercontent.com:aud': GITHUB_OIDC_AUDIENCE,
          'token.actions.githubusercontent.com:sub': subjects,
        },
      });

    const repo = `repo:${props.githubRepo}`;
    this.deployRole = new iam.Role(this, 'DeployRole', {
      description: `GitHub Actions of ${props.githubRepo} (environments ${environments.join(', ') || 'none'}; branches ${branches.join(', ') || 'none'}): cdk deploy through the bootstrap roles`,
      assumedBy: trustedBy([
        ...environments.map((e) => `${repo}:environment:${e}`),
        ...branches.map((b) => `${repo}:ref:refs/heads/${b}`),
      ]),
      inlinePolicies: {
        AssumeBootstrapRoles: new iam.PolicyDocument({
          statements: [
            new iam.PolicyStatement({
              actions: ['sts:AssumeRole'],
              resources: BOOTSTRAP_ROLE_KINDS.map(bootstrapRole),
            }),
          ],
        }),
      },
    });
    this.diffRole = new iam.Role(this, 'DiffRole', {
      description: `GitHub Actions of ${props.githubRepo} (pull requests): cdk diff through the bootstrap lookup role`,
      assumedBy: trustedBy([`${repo}:pull_request`]),
      inlinePolicies: {
        AssumeLookupRole: new iam.PolicyDocument({
          statements: [new iam.PolicyStatement({ actions: ['sts:AssumeRole'], resources: [bootstrapRole('lookup')] })],
        }),
      },
    });

    new CfnOutput(this, 'DeployRoleArn', {
      value: this.deployRole.roleArn,
      description: 'repository variable AWS_DEPLOY_ROLE_ARN (.github/workflows/deploy.yml)',
    });
    new CfnOutput(this, 'DiffRoleArn', {
      value: this.diffRole.roleArn,
      description: 'repository variable AWS_DIFF_ROLE_ARN (.github/workflows/ci.yml)',
    });
  }
}
