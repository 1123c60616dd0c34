/**
 * The CodeBuild project that runs a workspace's tests at a pinned commit (the run_tests stage).
 *
 * No source: the run_tests handler names the repository and commit per build, as environment
 * variable overrides at StartBuild (contract/runtime-env.ts TEST_BUILD_ENV). The buildspec fetches
 * exactly that commit with the checkout credential the starting command stage names in the same
 * overrides, as a reference to its repository's checkout secret (src/adapters/build-checkout.ts:
 * a read-only token for that one repository; never the sequencer's push credential, never a plain
 * environment value), then runs TEST_COMMAND as an unprivileged user of its own with
 * a clean environment, so the tests' code never holds the credential (test/integration/test-build-spec.test.ts
 * runs these commands, emulated), and the build status is the verdict (SUCCEEDED when the command
 * exits 0). Encryption stays CodeBuild's default (the AWS-managed
 * key): the project produces no artifacts.
 *
 * Its service role holds only what a build uses: writing to this construct's log group and reading
 * the checkout secrets under `checkoutSecretPrefix` (never an operator's secret: the command stages
 * read those and write what a build may use). The role is handed to the project without policy updates, so the L2
 * cannot add its default grants (the `/aws/codebuild/<project>` log group and report groups, which
 * nothing here writes).
 */
import {
  ArnFormat,
  Aws,
  CfnCondition,
  CfnRule,
  Duration,
  Fn,
  RemovalPolicy,
  Stack,
  Token,
  Validations,
  type ICfnConditionExpression,
} from 'aws-cdk-lib';
import * as codebuild from 'aws-cdk-lib/aws-codebuild';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { BUILD_QUEUED_TIMEOUT_MINUTES, CHECKOUT_ENV, TEST_BUILD_ENV } from '../../contract/runtime-env';
import { acknowledgeWildcard } from '../nag';
import { ARM_CODEBUILD_REGIONS, CODEBUILD_IMAGES, REGIONS_WITHOUT_CODEBUILD, buildArchitecture } from '../regions';
import { InvalidSettingsError } from './settings-problems';

/** The user a build's test command runs as: not root, and not the user that held the credential. */
export const TEST_USER = 'agent-tests';

export interface TestRunnerProps {
  /** Default build timeout (a job may override it at StartBuild). @default 60 minutes */
  readonly timeout?: Duration;
  /** @default codebuild.ComputeType.SMALL */
  readonly computeType?: codebuild.ComputeType;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Builds of the project running at once: CodeBuild refuses a start beyond it (a job then waits,
   * src/adapters/codebuild-test-runner.ts) instead of queueing it, where a build could wait an hour
   * for its queued timeout. @default none (CodeBuild queues above the account's quota)
   */
  readonly concurrentBuildLimit?: number;
}

export class TestRunner extends Construct {
  readonly project: codebuild.Project;
  readonly logGroup: logs.LogGroup;
  readonly role: iam.Role;
  /** The default build timeout (a job may override it). */
  readonly timeout: Duration;
  /** Where the command stages write each repository's checkout secret (the stack's own prefix). */
  readonly checkoutSecretPrefix: string;
  /** Every checkout secret's ARN, as a pattern: what the build's role may read, and the command stages write. */
  readonly checkoutSecretsArn: string;

  constructor(scope: Construct, id: string, props: TestRunnerProps) {
    super(scope, id);
    const env = TEST_BUILD_ENV;
    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('codebuild.amazonaws.com'),
      description: `Service role of ${this.node.path}`,
    });
    this.logGroup.grantWrite(this.role);
    this.checkoutSecretPrefix = `agent-jobs/${Stack.of(this).stackName}/checkout/`;
    this.checkoutSecretsArn = Stack.of(this).formatArn({
      service: 'secretsmanager',
      resource: 'secret',
      resourceName: `${this.checkoutSecretPrefix}*`,
      arnFormat: ArnFormat.COLON_RESOURCE_NAME,
    });
    iam.Grant.addToPrincipal({
      grantee: this.role,
      actions: ['secretsmanager:GetSecretValue'],
      resourceArns: [this.checkoutSecretsArn],
    });
    acknowledgeWildcard(
      this.role,
      `Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${this.checkoutSecretPrefix}*`,
      "A build reads the checkout secret of its repository, one per repository under the stack's prefix, written at run time by the command stages (a read-only credential for that repository).",
    );
    this.timeout = props.timeout ?? Duration.minutes(60);
    const region = Stack.of(this).region;
    const regionKnown = !Token.isUnresolved(region);
    if (regionKnown && REGIONS_WITHOUT_CODEBUILD.includes(region)) {
      throw new InvalidSettingsError(this.node.path, [
        `region = ${region}: CodeBuild is not offered there (lib/regions.ts), so the command stages cannot run: deploy to another region`,
      ]);
    }
    // Known region: its architecture. Agnostic: ARM here, and the template picks per region (below).
    const architecture = regionKnown ? buildArchitecture(region) : 'arm';
    this.project = new codebuild.Project(this, 'Project', {
      description: "Runs a command stage's command at a pinned commit (agent-jobs run_tests, ...)",
      role: this.role.withoutPolicyUpdates(),
      grantReportGroupPermissions: false,
      timeout: this.timeout,
      ...(props.concurrentBuildLimit !== undefined && { concurrentBuildLimit: props.concurrentBuildLimit }),
      // Part of how long a job waits for its build's completion before the reconciler asks.
      queuedTimeout: Duration.minutes(BUILD_QUEUED_TIMEOUT_MINUTES),
      environment: {
        buildImage:
          architecture === 'arm'
            ? codebuild.LinuxArmBuildImage.fromCodeBuildImageId(CODEBUILD_IMAGES.arm)
            : codebuild.LinuxBuildImage.fromCodeBuildImageId(CODEBUILD_IMAGES.x86),
        computeType: props.computeType ?? codebuild.ComputeType.SMALL,
        privileged: false,
      },
      logging: { cloudWatch: { logGroup: this.logGroup } },
      buildSpec: codebuild.BuildSpec.fromObject({
        version: '0.2',
        // No secret of its own: the command stage names the checkout secret's version in the build's overrides.
        env: { shell: 'bash' },
        phases: {
          pre_build: {
            commands: [
              `test -n "$${env.repoUrl}" && test -n "$${env.commitSha}" && test -n "$${env.testCommand}"`,
              `if [ -z "$${CHECKOUT_ENV.username}" ] || [ -z "$${CHECKOUT_ENV.password}" ]; then ` +
                `echo "agent-jobs: no checkout credential (${CHECKOUT_ENV.username}, ${CHECKOUT_ENV.password}): builds are started by a command stage, which names it" >&2; exit 1; fi`,
              // The credential helper reads the secret from the environment: nothing is written to disk.
              `git config --global credential.helper '!f() { echo "username=$${CHECKOUT_ENV.username}"; echo "password=$${CHECKOUT_ENV.password}"; }; f'`,
              'git init -q "$CODEBUILD_SRC_DIR/workspace" && cd "$CODEBUILD_SRC_DIR/workspace"',
              `git fetch -q --depth 1 "$${env.repoUrl}" "$${env.commitSha}"`,
              'git checkout -q --detach FETCH_HEAD',
              `test "$(git rev-parse HEAD)" = "$${env.commitSha}"`,
              // The checkout is done: nothing after this needs the credential.
              'git config --global --unset credential.helper',
              // The tests' code comes from the agent: it runs as a user of its own, owning the checkout only.
              'for tool in useradd getent setpriv; do command -v "$tool" >/dev/null || { echo "agent-jobs: the build image lacks $tool, needed to run the tests unprivileged" >&2; exit 1; }; done',
              `id ${TEST_USER} >/dev/null 2>&1 || useradd --create-home --user-group ${TEST_USER}`,
              `chown -R ${TEST_USER}:${TEST_USER} "$CODEBUILD_SRC_DIR/workspace"`,
            ],
          },
          build: {
            commands: [
              `echo "agent-jobs: $${env.jobType} job $${env.jobId} (run $${env.run}) at $${env.commitSha}"`,
              // A clean environment (no credential, no AWS container credentials URI) and no capability:
              // as that user the command cannot read root's processes' environments either.
              `cd "$CODEBUILD_SRC_DIR/workspace" && env -i PATH="$PATH" HOME="$(getent passwd ${TEST_USER} | cut -d: -f6)" LANG=C.UTF-8 CI=true ` +
                Object.values(env)
                  .map((name) => `${name}="$${name}"`)
                  .join(' ') +
                ` setpriv --reuid=${TEST_USER} --regid=${TEST_USER} --init-groups --no-new-privs --inh-caps=-all --bounding-set=-all -- bash -c "$${env.testCommand}"`,
            ],
          },
        },
      }),
    });
    if (!regionKnown) this.chooseEnvironmentByRegion();
    // The grants above exist before the project is created (the L2 adds this dependency only for grants it makes itself).
    const grants = this.role.node.tryFindChild('DefaultPolicy');
    if (grants) this.project.node.addDependency(grants);
    Validations.of(this.project).acknowledge({
      id: 'AwsSolutions-CB4',
      reason:
        'The key would encrypt build artifacts, and the project has none (no source, no artifacts); ' +
        "its logs go to this construct's log group, which CloudWatch Logs encrypts at rest.",
    });
  }

  /**
   * For an environment-agnostic stack: ARM where CodeBuild offers it, x86 elsewhere, by a condition
   * on AWS::Region (the small compute type exists on both); a region without CodeBuild fails the
   * deploy at its start, by a template rule, before anything is created.
   */
  private chooseEnvironmentByRegion(): void {
    const arm = new CfnCondition(this, 'ArmRegion', {
      expression: anyOf(ARM_CODEBUILD_REGIONS.map((r) => Fn.conditionEquals(Aws.REGION, r))),
    });
    const project = this.project.node.defaultChild as codebuild.CfnProject;
    project.addPropertyOverride('Environment.Type', Fn.conditionIf(arm.logicalId, 'ARM_CONTAINER', 'LINUX_CONTAINER'));
    project.addPropertyOverride(
      'Environment.Image',
      Fn.conditionIf(arm.logicalId, CODEBUILD_IMAGES.arm, CODEBUILD_IMAGES.x86),
    );
    new CfnRule(this, 'RegionHasCodeBuild', {
      assertions: [
        {
          assert: Fn.conditionNot(Fn.conditionContains([...REGIONS_WITHOUT_CODEBUILD], Aws.REGION)),
          assertDescription: `CodeBuild is not offered in this region (${REGIONS_WITHOUT_CODEBUILD.join(', ')}; lib/regions.ts): the command stages cannot run. Deploy to another region.`,
        },
      ],
    });
  }
}

/** Fn::Or of any number of conditions (it takes 2 to 10 a call). */
function anyOf(conditions: readonly ICfnConditionExpression[]): ICfnConditionExpression {
  if (conditions.length === 1) return conditions[0]!;
  if (conditions.length <= 10) return Fn.conditionOr(...conditions);
  return Fn.conditionOr(anyOf(conditions.slice(0, 10)), anyOf(conditions.slice(10)));
}
