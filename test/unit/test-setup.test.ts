/**
 * test/setup/quiet-sdk-notice.ts turns off the AWS SDK's Node.js version notice through the SDK's
 * own variable: the SDK then never emits it (checked on emitWarning itself, so not through the
 * warning filter of test/setup/environment.ts).
 */
const NOTICE = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/**
 * What a fresh copy of the SDK emits when a client starts on Node.js 20: every SDK client calls
 * this gate with `process.version` (called with a fixed version here, so the check does not depend
 * on the Node.js running the tests).
 */
function noticesOnNode20(): string[] {
  const emitWarning = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
  try {
    jest.isolateModules(() => {
      const sdk = jest.requireActual<{ emitWarningIfUnsupportedVersion(version: string): void }>(
        '@aws-sdk/core/client',
      );
      sdk.emitWarningIfUnsupportedVersion('v20.0.0');
    });
    return emitWarning.mock.calls.map(([warning]) => String(warning));
  } finally {
    emitWarning.mockRestore();
  }
}

it('the SDK emits no Node.js version notice under the test setup', () => {
  expect(process.env[NOTICE]).toBe('true');
  expect(noticesOnNode20()).toEqual([]);
});

it('without the setting, the same SDK emits the notice (so the check above can fail)', () => {
  delete process.env[NOTICE];
  try {
    expect(noticesOnNode20()).toEqual([expect.stringMatching(/^NodeVersionSupportWarning/)]);
  } finally {
    process.env[NOTICE] = 'true';
  }
});
