/**
 * What `dlq peek` says of a message on the build-events DLQ: the build and job its body names (a
 * CodeBuild "Build State Change" event as EventBridge delivers it on AWS), and the advice by why it
 * is there (EventBridge's ERROR_CODE, or the consumer's own reason).
 */
import { buildEventAdvice, buildEventSummary } from '../../tools/operator/build-events-dlq';
import { codeBuildStateChange } from '../support/codebuild-events';

describe('the build-events DLQ as peek shows it', () => {
  it("reads a CodeBuild event's build id (from its ARN), job and status; nothing from a body that is not an event", () => {
    const event = codeBuildStateChange({
      buildId: 'agent-jobs-tests:1b2c',
      status: 'SUCCEEDED',
      jobId: 'tests-1',
      jobType: 'run_tests',
      sha: 'a'.repeat(40),
    });
    expect(buildEventSummary(JSON.stringify(event))).toEqual({
      buildId: 'agent-jobs-tests:1b2c',
      jobId: 'tests-1',
      jobType: 'run_tests',
      buildStatus: 'SUCCEEDED',
    });
    expect(buildEventSummary('not json')).toEqual({});
    expect(buildEventSummary('{"detail": 3}')).toEqual({});
  });

  it('advises a redrive for a failed delivery, and none for an event the consumer refused', () => {
    expect(
      buildEventAdvice({
        attributes: { RULE_ARN: 'arn:aws:events:eu-west-1:1:rule/r', ERROR_CODE: 'SQS_ACCESS_DENIED' },
      }),
    ).toMatch(
      /^EventBridge could not deliver it .*SQS_ACCESS_DENIED.*nothing is lost, the build reconciler records the verdict.*"dlq redrive --queue build-events"/,
    );
    expect(
      buildEventAdvice({ attributes: { reason: 'INVALID_BUILD_EVENT', errorMessage: 'not a local build event' } }),
    ).toMatch(/could not read it \(INVALID_BUILD_EVENT: not a local build event\): a redrive would be refused again/);
  });
});
