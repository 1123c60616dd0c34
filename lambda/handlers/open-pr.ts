/**
 * The open_pr stage: opens (or finds) the pull request of the workspace branch, pinned by the
 * sequencer. Idempotent in the target by head branch (see GitHubPullRequestHost), so a crash after
 * the create is repaired by the next delivery finding the PR. Everything else is the shared pipeline.
 */
import { Octokit } from '@octokit/rest';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { JOB_TYPES } from '../../contract/job-types';
import { ENV } from '../../contract/runtime-env';
import { parseStageMessage, type StageMessage } from '../core/envelope';
import { InvalidJobError } from '../core/errors';
import { processStandardBatch } from '../core/fifo-batch';
import { openPrResult, pullRequestRequest } from '../core/open-pr';
import { createRecordProcessor, type JobContext, type JobLogger, type JobProcessor, type PipelineDeps, type RunResult } from '../core/pipeline';
import type { PullRequestHost } from '../core/ports';
import { GitHubPullRequestHost } from '../adapters/github-pr-host';
import { awsClients, awsPipelineDeps, logger, requireEnv } from '../adapters/runtime';
import { SecretsManagerSecrets } from '../adapters/secrets';

export interface OpenPrDeps extends PipelineDeps {
  readonly host: PullRequestHost;
}

type OpenPrJob = StageMessage<'open_pr'>;

class OpenPrProcessor implements JobProcessor<OpenPrJob> {
  constructor(private readonly host: PullRequestHost) {}

  parse(body: string): OpenPrJob {
    const message = parseStageMessage(body);
    if (message.type !== 'open_pr') throw new InvalidJobError(`the open-pr queue received a ${message.type} job`);
    return message;
  }

  async run(job: OpenPrJob, ctx: JobContext): Promise<RunResult> {
    const pr = await this.host.findOrCreate(pullRequestRequest(job));
    ctx.logger.info(pr.created ? 'pull request created' : 'pull request already open', { number: pr.number, head: job.pin.branch });
    return { verdict: { status: 'SUCCEEDED', result: openPrResult(job, pr) } };
  }
}

/** The Lambda handler over injected adapters: AWS ones below, local ones from the local platform. */
export function createOpenPrHandler(deps: OpenPrDeps): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const process = createRecordProcessor(new OpenPrProcessor(deps.host), deps);
  return (event) => processStandardBatch(event.Records, process);
}

const GITHUB_API_DEFAULT = 'https://api.github.com';

/** Octokit's own request log, at debug: the pipeline logs the outcome once, with the job's ids. */
function octokitLog(log: JobLogger) {
  return { debug: (m: string) => log.debug(m), info: (m: string) => log.debug(m), warn: (m: string) => log.warn(m), error: (m: string) => log.debug(m) };
}

/** AWS adapters from the environment the stack sets; read at the first invocation (cold start). */
function awsDeps(): OpenPrDeps {
  const secrets = new SecretsManagerSecrets({ client: awsClients.secretsManager(), githubTokenArn: requireEnv(ENV.githubTokenSecretArn) });
  const baseUrl = process.env[ENV.githubApiUrl] || GITHUB_API_DEFAULT;
  return {
    ...awsPipelineDeps('stage', JOB_TYPES.open_pr.stage),
    // A client per job with the (cached) secret value: a rotated token is picked up without a restart.
    host: new GitHubPullRequestHost(async () => new Octokit({ auth: await secrets.githubToken(), baseUrl, log: octokitLog(logger) })),
  };
}

let instance: ReturnType<typeof createOpenPrHandler> | undefined;

export const handler = (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  logger.addContext(context);
  return (instance ??= createOpenPrHandler(awsDeps()))(event);
};
