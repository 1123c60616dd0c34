/**
 * Stack output keys: the stack (lib/) emits them and the CLI (tools/cli) resolves a deployed
 * stack from them (DescribeStacks), so they are stable API shared by both sides. Queue keys derive from the topology's queue names, so a new job type's queue gets
 * its outputs with no change here.
 */
export const STACK_OUTPUTS = {
  ledgerTableName: 'LedgerTableName',
  eventBusName: 'EventBusName',
  diffBucketName: 'DiffBucketName',
  alarmTopicArn: 'AlarmTopicArn',
  testRunnerProjectName: 'TestRunnerProjectName',
  /** The secrets the platform reads (created by the stack or given by ARN): where an operator stores credentials. */
  gitCredentialsSecretArn: 'GitCredentialsSecretArn',
  gitReadCredentialsSecretArn: 'GitReadCredentialsSecretArn',
  githubTokenSecretArn: 'GithubTokenSecretArn',
} as const;

/** `agent-jobs` -> `AgentJobs` (output keys are alphanumeric). */
function pascal(name: string): string {
  return name
    .split(/[^A-Za-z0-9]+/)
    .filter((part) => part.length > 0)
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

/** Output key of a queue's URL: `QueueUrlAgentJobs`, `QueueUrlRunTests`, ... */
export function queueUrlOutputKey(queueName: string): string {
  return `QueueUrl${pascal(queueName)}`;
}

/**
 * The build reconciler's log group (it has no queue). Log group outputs are links for `agent-jobs
 * logs`, kept out of STACK_OUTPUTS, whose every key `doctor` probes.
 */
export const BUILD_RECONCILER_LOG_GROUP_OUTPUT = 'LogGroupBuildReconciler';

/** Output key of a queue worker's log group name: `LogGroupSequencer`, `LogGroupRunTests`, ... */
export function logGroupOutputKey(workerName: string): string {
  return `LogGroup${pascal(workerName)}`;
}

/** Output key of a queue's DLQ URL: `DlqUrlAgentJobs`, `DlqUrlRunTests`, ... */
export function dlqUrlOutputKey(queueName: string): string {
  return `DlqUrl${pascal(queueName)}`;
}
