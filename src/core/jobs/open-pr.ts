/**
 * The open_pr stage: opens (or finds) the pull request of the workspace branch, pinned by the
 * sequencer. Idempotent in the target by head branch (the PullRequestHost port), so a crash after
 * the create is repaired by the next delivery finding the PR. Everything else is the shared
 * pipeline. Below the processor, the pure rules: which repository and branches the PR uses.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { parseStageMessageOf, type StageMessage } from '../envelope';
import { processStandardBatch } from '../fifo-batch';
import {
  createRecordProcessor,
  type JobContext,
  type JobProcessor,
  type PipelineDeps,
  type RunResult,
} from '../pipeline';
import type { PullRequestHost } from '../ports';

export interface OpenPrDeps extends PipelineDeps {
  readonly host: PullRequestHost;
}

type OpenPrJob = StageMessage<'open_pr'>;

class OpenPrProcessor implements JobProcessor<OpenPrJob> {
  constructor(private readonly host: PullRequestHost) {}

  parse(body: string): OpenPrJob {
    return parseStageMessageOf('open_pr', body);
  }

  async run(job: OpenPrJob, ctx: JobContext): Promise<RunResult> {
    const pr = await this.host.findOrCreate(pullRequestRequest(job));
    ctx.logger.info(pr.created ? 'pull request created' : 'pull request already open', {
      number: pr.number,
      head: job.pin.branch,
    });
    return { verdict: { status: 'SUCCEEDED', result: openPrResult(job, pr) } };
  }
}

/** The open-pr queue's batch handler over injected adapters (src/compose builds them for AWS and locally). */
export function createOpenPrHandler(deps: OpenPrDeps): (event: SQSEvent) => Promise<SQSBatchResponse> {
  const process = createRecordProcessor(new OpenPrProcessor(deps.host), deps);
  return (event) => processStandardBatch(event.Records, process);
}

export interface OpenPrResult extends Record<string, unknown> {
  readonly number: number;
  readonly url: string;
  readonly created: boolean;
  /** The workspace branch (the PR's head) and the commit it was pinned at. */
  readonly head: string;
  readonly sha: string;
}

export function openPrResult(
  job: StageMessage<'open_pr'>,
  pr: { number: number; url: string; created: boolean },
): OpenPrResult {
  return { number: pr.number, url: pr.url, created: pr.created, head: job.pin.branch, sha: job.pin.sha };
}

/** What the PR host is asked for: the workspace branch into the job's base branch. */
export function pullRequestRequest(job: StageMessage<'open_pr'>): {
  repoUrl: string;
  head: string;
  base: string;
  title: string;
  body?: string;
} {
  return {
    repoUrl: job.pin.repoUrl,
    head: job.pin.branch,
    base: job.payload.baseBranch,
    title: job.payload.title,
    ...(job.payload.body === undefined ? {} : { body: job.payload.body }),
  };
}
