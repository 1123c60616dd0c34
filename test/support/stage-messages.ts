/** Forwarded command-stage messages, as the sequencer sends them to the stage's queue. */
import type { CommandJobType } from '../../contract/job-types';
import type { StageMessage } from '../../src/core/envelope';

interface MessageOptions<T extends CommandJobType> {
  jobId?: string;
  payload?: StageMessage<T>['payload'];
  pin?: Partial<StageMessage['pin']>;
}

export function commandStageMessage<T extends CommandJobType>(
  type: T,
  options: MessageOptions<T> = {},
): StageMessage<T> {
  return {
    jobId: options.jobId ?? 'job-1',
    workspaceId: 'ws-1',
    tenantId: 't-1',
    type,
    createdAt: '2026-11-29T10:00:00.000Z',
    payload: options.payload ?? {},
    pin: { sha: 'a'.repeat(40), repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-1', ...options.pin },
  } as StageMessage<T>;
}

/** A forwarded run_tests message. */
export function runTestsMessage(options: MessageOptions<'run_tests'> = {}): StageMessage<'run_tests'> {
  return commandStageMessage('run_tests', options);
}
