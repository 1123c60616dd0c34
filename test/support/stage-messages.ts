/** A forwarded run_tests message, as the sequencer sends it to the run-tests queue. */
import type { StageMessage } from '../../src/core/envelope';

export function runTestsMessage(options: {
  jobId?: string;
  payload?: StageMessage<'run_tests'>['payload'];
  pin?: Partial<StageMessage['pin']>;
} = {}): StageMessage<'run_tests'> {
  return {
    jobId: options.jobId ?? 'job-1',
    workspaceId: 'ws-1',
    tenantId: 't-1',
    type: 'run_tests',
    createdAt: '2026-11-29T10:00:00.000Z',
    payload: options.payload ?? {},
    pin: { sha: 'a'.repeat(40), repoUrl: 'https://git.example/acme/widgets.git', branch: 'agent/ws-1', ...options.pin },
  };
}
