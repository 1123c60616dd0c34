/** `agent-jobs doctor` on the local platform: what it makes of the isolation the platform reported at start. */
import { checkTestIsolation, TEST_ISOLATION_CHECK } from '../../tools/cli/doctor';
import { describeIsolation } from '../../tools/local/confinement';

const cgroup = { kind: 'cgroup', parents: { version: 1, pids: '/p', memory: '/m' } } as const;

it('passes the full sandbox, saying what it stops and what it does not', () => {
  const result = checkTestIsolation(
    describeIsolation({ confinement: { kind: 'sandbox', network: 'slirp4netns' }, resources: cgroup }),
  );

  expect(result).toMatchObject({ check: TEST_ISOLATION_CHECK, status: 'pass' });
  expect(result.detail).toMatch(
    /^sandbox \(bubblewrap\).*\. Stops: .*connections to the host loopback.*\. Does not stop: .*outbound connections/,
  );
});

it('warns below it, naming what is missing first', () => {
  const result = checkTestIsolation(
    describeIsolation({ confinement: { kind: 'namespaces', reason: 'bwrap: not found' }, resources: cgroup }),
  );

  expect(result).toMatchObject({
    status: 'warn',
    detail: expect.stringMatching(
      /^bubblewrap is not in use: bwrap: not found \(apt-get install bubblewrap slirp4netns\)\. namespaces/,
    ),
  });
});

it('skips a platform that did not say (an older version)', () => {
  expect(checkTestIsolation(undefined)).toMatchObject({ status: 'skip' });
});
