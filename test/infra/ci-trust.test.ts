/**
 * The CI trust stack (lib/ci-trust-stack.ts): who may assume its roles (the `sub` claims, exact),
 * and that the only thing either role may do is assume CDK bootstrap roles. cdk-nag AwsSolutions
 * clean, with no acknowledgement.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { CiTrustStack, type CiTrustStackProps } from '../../lib/ci-trust-stack';
import { InvalidConfigError } from '../../lib/config';
import { ROOT, nagFindings, newApp } from './helpers';

const ENV = { account: '123456789012', region: 'eu-west-1' };

function synthTrust(props: Partial<CiTrustStackProps> = {}): { template: Template; findings: string[] } {
  const app = newApp();
  const stack = new CiTrustStack(app, 'AgentJobs-ci-trust', { githubRepo: 'acme/agent-jobs', env: ENV, ...props });
  return { template: Template.fromStack(stack), findings: nagFindings(app) };
}

type Statement = { Action: unknown; Effect: string; Resource: unknown; Condition?: unknown; Principal?: unknown };

function role(template: Template, idPrefix: string): { trust: Statement[]; policies: Statement[] } {
  const [entry] = Object.entries(template.findResources('AWS::IAM::Role')).filter(([id]) => id.startsWith(idPrefix));
  if (!entry) throw new Error(`no role ${idPrefix}`);
  const props = entry[1].Properties as {
    AssumeRolePolicyDocument: { Statement: Statement[] };
    Policies: { PolicyDocument: { Statement: Statement[] } }[];
  };
  return {
    trust: props.AssumeRolePolicyDocument.Statement,
    policies: props.Policies.flatMap((p) => p.PolicyDocument.Statement),
  };
}

const bootstrapRole = (kind: string): string =>
  `arn:aws:iam::123456789012:role/cdk-hnb659fds-${kind}-role-123456789012-eu-west-1`;

describe('CI trust stack', () => {
  it("creates GitHub's OIDC provider for the sts.amazonaws.com audience, and is cdk-nag clean", () => {
    const { template, findings } = synthTrust();
    template.resourceCountIs('AWS::IAM::OIDCProvider', 1);
    template.hasResourceProperties('AWS::IAM::OIDCProvider', {
      Url: 'https://token.actions.githubusercontent.com',
      ClientIdList: ['sts.amazonaws.com'],
    });
    template.resourceCountIs('AWS::IAM::Role', 2);
    template.resourceCountIs('AWS::IAM::Policy', 0);
    template.resourceCountIs('AWS::IAM::ManagedPolicy', 0);
    expect(findings).toEqual([]);
  });

  it("trusts the deploy role to this repository's named environments and branches only, exactly", () => {
    const { template } = synthTrust({ environments: ['dev', 'prod'], branches: ['main'] });
    const { trust } = role(template, 'DeployRole');
    expect(trust).toHaveLength(1);
    expect(trust[0]).toMatchObject({
      Action: 'sts:AssumeRoleWithWebIdentity',
      Effect: 'Allow',
      Principal: { Federated: { Ref: expect.stringMatching(/^GithubOidc/) } },
    });
    expect(trust[0]?.Condition).toEqual({
      StringEquals: {
        'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com',
        'token.actions.githubusercontent.com:sub': [
          'repo:acme/agent-jobs:environment:dev',
          'repo:acme/agent-jobs:environment:prod',
          'repo:acme/agent-jobs:ref:refs/heads/main',
        ],
      },
    });
    // No StringLike anywhere: a wildcard in a sub condition would widen the trust.
    expect(JSON.stringify(template.toJSON())).not.toContain('StringLike');
  });

  it('lets the deploy role assume the four bootstrap roles of its account and region, and nothing else', () => {
    const { policies } = role(synthTrust().template, 'DeployRole');
    expect(policies).toEqual([
      {
        Action: 'sts:AssumeRole',
        Effect: 'Allow',
        Resource: ['deploy', 'file-publishing', 'image-publishing', 'lookup'].map(bootstrapRole),
      },
    ]);
  });

  it('trusts the diff role to pull requests only, and lets it assume the lookup role only', () => {
    const { trust, policies } = role(synthTrust().template, 'DiffRole');
    expect(trust).toHaveLength(1);
    expect(trust[0]?.Condition).toEqual({
      StringEquals: {
        'token.actions.githubusercontent.com:aud': 'sts.amazonaws.com',
        'token.actions.githubusercontent.com:sub': ['repo:acme/agent-jobs:pull_request'],
      },
    });
    expect(policies).toEqual([{ Action: 'sts:AssumeRole', Effect: 'Allow', Resource: bootstrapRole('lookup') }]);
  });

  it('uses the bootstrap qualifier of the cdk context, and imports an existing provider', () => {
    const app = newApp();
    app.node.setContext('@aws-cdk/core:bootstrapQualifier', 'team42');
    const providerArn = 'arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com';
    const stack = new CiTrustStack(app, 'AgentJobs-ci-trust', {
      githubRepo: 'acme/agent-jobs',
      env: ENV,
      existingProviderArn: providerArn,
    });
    const template = Template.fromStack(stack);
    template.resourceCountIs('AWS::IAM::OIDCProvider', 0);
    const { trust, policies } = role(template, 'DiffRole');
    expect(trust[0]?.Principal).toEqual({ Federated: providerArn });
    expect(policies[0]?.Resource).toBe('arn:aws:iam::123456789012:role/cdk-team42-lookup-role-123456789012-eu-west-1');
  });

  it('refuses a repository that is not owner/name and a wildcard environment, naming each', () => {
    expect(() => synthTrust({ githubRepo: 'acme' })).toThrow(InvalidConfigError);
    expect(() => synthTrust({ githubRepo: 'acme', environments: ['*'] })).toThrow(
      /githubRepo = "acme".*\n.*githubEnvironments: "\*"/,
    );
    expect(() => synthTrust({ environments: [], branches: [] })).toThrow(/nothing could assume the deploy role/);
  });

  it('joins the app when githubRepo is given, beside the platform stack (bin/app.ts, its context keys not platform settings)', () => {
    const out = mkdtempSync(join(tmpdir(), 'ci-trust-synth-'));
    try {
      execFileSync(process.execPath, ['-r', 'tsx/cjs', 'bin/app.ts'], {
        cwd: ROOT,
        env: {
          ...process.env,
          CDK_OUTDIR: out,
          CDK_CONTEXT_JSON: JSON.stringify({
            githubRepo: 'acme/agent-jobs',
            githubBranches: 'main',
            'aws:cdk:bundling-stacks': [],
          }),
        },
      });
      const manifest = JSON.parse(readFileSync(join(out, 'manifest.json'), 'utf8')) as {
        artifacts: Record<string, { type: string }>;
      };
      expect(Object.keys(manifest.artifacts)).toEqual(expect.arrayContaining(['AgentJobs-dev', 'AgentJobs-ci-trust']));
      const template = Template.fromJSON(
        JSON.parse(readFileSync(join(out, 'AgentJobs-ci-trust.template.json'), 'utf8')) as Record<string, unknown>,
      );
      expect(role(template, 'DeployRole').trust[0]?.Condition).toMatchObject({
        StringEquals: {
          'token.actions.githubusercontent.com:sub': expect.arrayContaining([
            'repo:acme/agent-jobs:ref:refs/heads/main',
          ]),
        },
      });
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
