/**
 * A deployed stack's run output as it is printed: CodeBuild writes each build's output to a
 * CloudWatch Logs stream, named in the build itself (BatchGetBuilds), and GetLogEvents reads it on
 * from the token the last page ended at. One page (at most PAGE_EVENTS events, 1 MB) at a time.
 */
import type { BatchGetBuildsCommandOutput, CodeBuildClient } from '@aws-sdk/client-codebuild';
import type { CloudWatchLogsClient, GetLogEventsCommandOutput } from '@aws-sdk/client-cloudwatch-logs';

// Loaded on the first follow of a stack's run (require: see targets.ts).
const loadCodeBuild = (): typeof import('@aws-sdk/client-codebuild') => require('@aws-sdk/client-codebuild');
const loadLogs = (): typeof import('@aws-sdk/client-cloudwatch-logs') => require('@aws-sdk/client-cloudwatch-logs');

/** A run's output read on from where the last read ended: the next piece, or undefined when nothing new is there yet. */
export interface OutputTail {
  next(): Promise<string | undefined>;
}

export interface BuildLogClients {
  readonly codeBuild: Pick<CodeBuildClient, 'send'>;
  readonly logs: Pick<CloudWatchLogsClient, 'send'>;
}

const PAGE_EVENTS = 1_000;

/** The output of build `buildId` on its CloudWatch Logs stream. A build that has not logged yet has nothing to read. */
export function buildLogTail(clients: BuildLogClients, buildId: string): OutputTail {
  let stream: { readonly logGroupName: string; readonly logStreamName: string } | undefined;
  let token: string | undefined;
  return {
    async next() {
      stream ??= await streamOf(clients.codeBuild, buildId);
      if (stream === undefined) return undefined;
      const { GetLogEventsCommand } = loadLogs();
      let page: GetLogEventsCommandOutput;
      try {
        page = await clients.logs.send(
          new GetLogEventsCommand({
            ...stream,
            startFromHead: true,
            limit: PAGE_EVENTS,
            ...(token && { nextToken: token }),
          }),
        );
      } catch (error) {
        // The stream is made by the build's first line: until then there is nothing to read.
        if ((error as { name?: string }).name === 'ResourceNotFoundException') return undefined;
        throw error;
      }
      // The same token back is the stream's end for now (GetLogEvents' own rule).
      token = page.nextForwardToken ?? token;
      const text = (page.events ?? []).map((event) => event.message ?? '').join('');
      return text === '' ? undefined : text;
    },
  };
}

async function streamOf(
  codeBuild: BuildLogClients['codeBuild'],
  buildId: string,
): Promise<{ logGroupName: string; logStreamName: string } | undefined> {
  const { BatchGetBuildsCommand } = loadCodeBuild();
  const answer: BatchGetBuildsCommandOutput = await codeBuild.send(new BatchGetBuildsCommand({ ids: [buildId] }));
  const logs = answer.builds?.[0]?.logs;
  return logs?.groupName && logs.streamName
    ? { logGroupName: logs.groupName, logStreamName: logs.streamName }
    : undefined;
}
