/**
 * AWS console links for `agent-jobs logs` on a deployed stack. The CloudWatch console keeps its
 * route in the URL fragment with `%` written as `$`, and a log group name (a path) encoded twice.
 */

/** The events of one log group, filtered (a CloudWatch Logs filter pattern). */
export function logEventsUrl(region: string, logGroup: string, filterPattern: string): string {
  const fragment = (text: string) => encodeURIComponent(text).replace(/%/g, '$');
  const group = fragment(encodeURIComponent(logGroup));
  const query = fragment(`?filterPattern=${encodeURIComponent(filterPattern)}`);
  return `https://${region}.console.aws.amazon.com/cloudwatch/home?region=${region}#logsV2:log-groups/log-group/${group}/log-events${query}`;
}

/** The JSON log lines (Powertools) that carry this job id. */
export function jobFilterPattern(jobId: string): string {
  return `{ $.jobId = "${jobId}" }`;
}

/** A CodeBuild build's log in the console; the build id is `<project>:<uuid>`. */
export function buildLogUrl(region: string, buildId: string): string {
  const project = buildId.slice(0, buildId.indexOf(':'));
  return `https://${region}.console.aws.amazon.com/codesuite/codebuild/projects/${encodeURIComponent(project)}/build/${encodeURIComponent(buildId)}/log?region=${region}`;
}
