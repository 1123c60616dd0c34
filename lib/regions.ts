/**
 * What differs by region for the stack, as data, with where each list comes from (checked
 * 2026-12-04). Commercial regions only (the `aws` partition): GovCloud and China are not claimed,
 * though nothing here is known to stop them.
 */

/**
 * The regions where CodeBuild offers the ARM_CONTAINER environment type: US East (N. Virginia),
 * US East (Ohio), US West (Oregon), EU (Ireland), Asia Pacific (Mumbai), Asia Pacific (Tokyo),
 * Asia Pacific (Singapore), Asia Pacific (Sydney), EU (Frankfurt) and South America (São Paulo),
 * as the CodeBuild API reference lists them for the environment type ("The environment type
 * ARM_CONTAINER is available only in regions ...", docs.aws.amazon.com, CodeBuild API Reference,
 * Fleet / ProjectEnvironment `environmentType`). Not eu-west-2, not ca-central-1: there the builds
 * run on x86 (LINUX_CONTAINER), which CodeBuild offers wherever it runs.
 */
export const ARM_CODEBUILD_REGIONS: readonly string[] = [
  'us-east-1',
  'us-east-2',
  'us-west-2',
  'eu-west-1',
  'ap-south-1',
  'ap-northeast-1',
  'ap-southeast-1',
  'ap-southeast-2',
  'eu-central-1',
  'sa-east-1',
];

/**
 * Commercial regions where CloudFormation has no `AWS::CodeBuild::Project`, so the stack cannot
 * deploy there: cfn-lint 1.51.0's region schemas (`cfn-lint --regions <every commercial region>`
 * on the synthesized template reports E3006 for exactly these).
 */
export const REGIONS_WITHOUT_CODEBUILD: readonly string[] = ['ap-east-2', 'ca-west-1', 'mx-central-1'];

/**
 * The CodeBuild-managed Amazon Linux 2023 images of each architecture (docs.aws.amazon.com,
 * CodeBuild User Guide, "Docker images provided by CodeBuild"); both ship git, bash, useradd and
 * setpriv, which the build spec needs (lib/constructs/test-runner.ts).
 */
export const CODEBUILD_IMAGES = {
  arm: 'aws/codebuild/amazonlinux-aarch64-standard:3.0',
  x86: 'aws/codebuild/amazonlinux-x86_64-standard:5.0',
} as const;

/** The architecture of the builds in `region`, a region name known at synth. */
export function buildArchitecture(region: string): keyof typeof CODEBUILD_IMAGES {
  return ARM_CODEBUILD_REGIONS.includes(region) ? 'arm' : 'x86';
}
