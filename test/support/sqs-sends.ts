/**
 * Records what an SQS client sends (SendMessage inputs), seen by SDK middleware on the real client:
 * the request still goes to the emulator. fauxqs accepts a MessageGroupId on a standard queue but
 * does not return it on receive, so a fair queue's group is checked here, on the way out.
 */
import type { SendMessageCommandInput, SQSClient } from '@aws-sdk/client-sqs';

export interface SendRecorder {
  readonly sent: SendMessageCommandInput[];
  /** The recorded sends to one queue. */
  to(queueUrl: string): SendMessageCommandInput[];
  /** Removes the middleware (call it in afterEach / finally: the client is shared). */
  stop(): void;
}

export function recordSends(sqs: SQSClient): SendRecorder {
  const name = `recordSends-${Math.random().toString(36).slice(2)}`;
  const sent: SendMessageCommandInput[] = [];
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'SendMessageCommand') sent.push(args.input as SendMessageCommandInput);
      return next(args);
    },
    { step: 'initialize', name },
  );
  return {
    sent,
    to: (queueUrl) => sent.filter((s) => s.QueueUrl === queueUrl),
    stop: () => void sqs.middlewareStack.remove(name),
  };
}
