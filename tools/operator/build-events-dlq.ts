/**
 * The build-events queue's DLQ: it holds build events, not jobs, so the ledger lists none of them.
 * What lands there: an event EventBridge could not deliver to the queue (its rule's DLQ: the event
 * as it was, with RULE_ARN, TARGET_ARN, ERROR_CODE and ERROR_MESSAGE attributes), an event the
 * consumer could not read (moved with a `reason`), and an event SQS moved after its receives ran
 * out. No verdict is lost with an event: the build reconciler asks the command runner about every
 * job still RUNNING past its due time and records the verdict from that answer. A redrive sends the
 * event back to the queue so the verdict comes now; the completion is fenced on the build and
 * RUNNING, so an event whose verdict is already recorded changes nothing.
 */
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { DLQ_ATTRIBUTES, EVENTBRIDGE_DLQ_ATTRIBUTES } from '../../contract/messages';
import { TEST_BUILD_ENV } from '../../contract/runtime-env';
import { buildIdFromArn } from '../../src/adapters/codebuild-builds';
import { walkDlq, type DlqMessage } from './dlq-messages';
import type { QueueEndpoint } from './targets';

/** The build an event on the build-events DLQ is about, as far as its body says. */
export interface BuildEventSummary {
  readonly buildId?: string;
  readonly jobId?: string;
  readonly jobType?: string;
  readonly buildStatus?: string;
}

type Json = Record<string, unknown>;
const asObject = (value: unknown): Json | undefined =>
  typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
const asString = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * Reads what it can of a CodeBuild "Build State Change" event (AWS) or a local build's event; an
 * empty summary for a body that is neither (the consumer's own reason then says what it is).
 */
export function buildEventSummary(body: string): BuildEventSummary {
  let detail: Json | undefined;
  try {
    detail = asObject(asObject(JSON.parse(body))?.['detail']);
  } catch {
    return {};
  }
  if (detail === undefined) return {};
  const arn = asString(detail['build-id']);
  if (arn !== undefined) {
    const info = asObject(asObject(detail['additional-information'])?.['environment']);
    const variables = Array.isArray(info?.['environment-variables'])
      ? (info['environment-variables'] as unknown[]).map(asObject)
      : [];
    const variable = (name: string) => asString(variables.find((v) => v?.['name'] === name)?.['value']);
    return prune({
      buildId: buildIdFromArn(arn),
      jobId: variable(TEST_BUILD_ENV.jobId),
      jobType: variable(TEST_BUILD_ENV.jobType),
      buildStatus: asString(detail['build-status']),
    });
  }
  return prune({
    buildId: asString(detail['buildId']),
    jobId: asString(detail['jobId']),
    jobType: asString(detail['jobType']),
    buildStatus: asString(asObject(detail['status'])?.['state']),
  });
}

function prune(summary: BuildEventSummary): BuildEventSummary {
  return Object.fromEntries(Object.entries(summary).filter(([, v]) => v !== undefined));
}

/** Why the consumer refused an event it moved here itself (a redrive would be refused again), or undefined. */
function refusedBy(message: Pick<DlqMessage, 'attributes'>): string | undefined {
  const reason = message.attributes[DLQ_ATTRIBUTES.reason];
  return reason === undefined
    ? undefined
    : [reason, message.attributes[DLQ_ATTRIBUTES.errorMessage]].filter(Boolean).join(': ');
}

/** What to do with one message on the build-events DLQ, in words. */
export function buildEventAdvice(message: Pick<DlqMessage, 'attributes'>): string {
  const verdict =
    "the build reconciler records the verdict of a build whose job is still RUNNING past its due time (its build's timeouts plus a margin), with or without the event";
  const refused = refusedBy(message);
  if (refused !== undefined) {
    return `the build-events consumer could not read it (${refused}): a redrive would be refused again; it is no build this platform started, or one of a job type it lacks. SQS deletes it at the end of its retention`;
  }
  const code = message.attributes[EVENTBRIDGE_DLQ_ATTRIBUTES.errorCode];
  const cause =
    code === undefined
      ? 'the build-events consumer failed on it until its receives ran out (its logs say why)'
      : `EventBridge could not deliver it to the build-events queue (${[code, message.attributes[EVENTBRIDGE_DLQ_ATTRIBUTES.errorMessage]].filter(Boolean).join(': ')}; fix the rule's target, its queue policy, if the code says so)`;
  return `${cause}: nothing is lost, ${verdict}; "dlq redrive --queue build-events" sends it now (a verdict already recorded is not changed) and clears the DLQ alarm`;
}

export interface BuildEventRedrive {
  readonly redriven: readonly { readonly messageId: string; readonly summary: BuildEventSummary }[];
  readonly left: readonly { readonly summary: BuildEventSummary; readonly why: string }[];
}

/** Sends the build-events DLQ's events back to the build-events queue as EventBridge sends them (the body alone); leaves the ones its consumer refused. */
export async function redriveBuildEvents(sqs: SQSClient, queue: QueueEndpoint): Promise<BuildEventRedrive> {
  const redriven: BuildEventRedrive['redriven'][number][] = [];
  const left: BuildEventRedrive['left'][number][] = [];
  await walkDlq(sqs, queue, async (message) => {
    const summary = buildEventSummary(message.body);
    const refused = refusedBy(message);
    if (refused !== undefined) {
      left.push({
        summary,
        why: `the build-events consumer refused it (${refused}): it would be refused again (message ${message.messageId})`,
      });
      return 'hold';
    }
    const sent = await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: message.body }));
    redriven.push({ messageId: sent.MessageId ?? '', summary });
    return 'delete';
  });
  return { redriven, left };
}
