/**
 * The CodeBuild project that runs a workspace's tests at a pinned commit (the run_tests stage).
 *
 * No source: the run_tests handler names the repository and commit per build, as environment
 * variable overrides at StartBuild (contract/runtime-env.ts TEST_BUILD_ENV). The buildspec fetches
 * exactly that commit with the git credentials secret (never a plain environment value), runs
 * TEST_COMMAND, and the build status is the verdict (SUCCEEDED when the command exits 0). Encryption stays CodeBuild's default
 * (the AWS-managed key): the project produces no artifacts.
 */
import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as codebuild from 'aws-cdk-lib/aws-codebuild';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { GIT_CREDENTIAL_KEYS, TEST_BUILD_ENV } from '../../contract/runtime-env';
import { acknowledgeWildcard, nagRef } from '../nag';

export interface TestRunnerProps {
  readonly gitCredentials: secretsmanager.ISecret;
  /** Default build timeout (a job may override it at StartBuild). @default 60 minutes */
  readonly timeout?: Duration;
  /** @default codebuild.ComputeType.SMALL */
  readonly computeType?: codebuild.ComputeType;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
}

export class TestRunner extends Construct {
  readonly project: codebuild.Project;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: TestRunnerProps) {
    super(scope, id);
    const env = TEST_BUILD_ENV;
    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const secretArn = props.gitCredentials.secretArn;
    this.project = new codebuild.Project(this, 'Project', {
      description: 'Runs a workspace test command at a pinned commit (agent-jobs run_tests)',
      timeout: props.timeout ?? Duration.minutes(60),
      environment: {
        buildImage: codebuild.LinuxArmBuildImage.AMAZON_LINUX_2023_STANDARD_3_0,
        computeType: props.computeType ?? codebuild.ComputeType.SMALL,
        privileged: false,
      },
      logging: { cloudWatch: { logGroup: this.logGroup } },
      buildSpec: codebuild.BuildSpec.fromObject({
        version: '0.2',
        env: {
          shell: 'bash',
          'secrets-manager': {
            GIT_USERNAME: `${secretArn}:${GIT_CREDENTIAL_KEYS.username}`,
            GIT_PASSWORD: `${secretArn}:${GIT_CREDENTIAL_KEYS.password}`,
          },
        },
        phases: {
          pre_build: {
            commands: [
              `test -n "$${env.repoUrl}" && test -n "$${env.commitSha}" && test -n "$${env.testCommand}"`,
              // The credential helper reads the secret from the environment: nothing is written to disk.
              `git config --global credential.helper '!f() { echo "username=$GIT_USERNAME"; echo "password=$GIT_PASSWORD"; }; f'`,
              'git init -q "$CODEBUILD_SRC_DIR/workspace" && cd "$CODEBUILD_SRC_DIR/workspace"',
              `git fetch -q --depth 1 "$${env.repoUrl}" "$${env.commitSha}"`,
              'git checkout -q --detach FETCH_HEAD',
              `test "$(git rev-parse HEAD)" = "$${env.commitSha}"`,
            ],
          },
          build: {
            commands: [
              `echo "agent-jobs: job $${env.jobId} testing $${env.commitSha}"`,
              `cd "$CODEBUILD_SRC_DIR/workspace" && bash -c "$${env.testCommand}"`,
            ],
          },
        },
      }),
    });
    props.gitCredentials.grantRead(this.project);
    this.acknowledgeFindings();
  }

  private acknowledgeFindings(): void {
    const role = this.project.role;
    if (role) {
      const project = nagRef(this.project);
      acknowledgeWildcard(role, `Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/codebuild/${project}:*`,
        "Added by CodeBuild's L2 for the project's default log group (its own name only); the builds log to this construct's log group.");
      acknowledgeWildcard(role, `Resource::arn:<AWS::Partition>:codebuild:<AWS::Region>:<AWS::AccountId>:report-group/${project}-*`,
        "Added by CodeBuild's L2: report groups named after this project only.");
    }
    Validations.of(this.project).acknowledge({
      id: 'AwsSolutions-CB4',
      reason: 'The project has no source and no artifacts; CodeBuild encrypts its build volume and logs by default (AWS-managed key).',
    });
  }
}
