import { newApp, nagFindings, synth } from './helpers';
import { Stack } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';

describe('cdk-nag AwsSolutions checks', () => {
  it('leave no unacknowledged finding on the platform stack', () => {
    const { app } = synth({ alarmEmail: 'ops@example.com' });
    expect(nagFindings(app)).toEqual([]);
  });

  it('report findings in this harness (a bare queue breaks several rules)', () => {
    // Proves the check above can fail: the same harness flags an unencrypted queue without DLQ or TLS policy.
    const app = newApp();
    new sqs.Queue(new Stack(app, 'Bare'), 'Queue', { encryption: sqs.QueueEncryption.UNENCRYPTED });
    app.synth();
    expect(nagFindings(app)).toEqual(expect.arrayContaining([expect.stringMatching(/^AwsSolutions-SQS3 at Bare\/Queue/), expect.stringMatching(/^AwsSolutions-SQS4 at Bare\/Queue/)]));
  });
});
