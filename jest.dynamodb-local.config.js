/** @type {import('jest').Config} */
// The DynamoDB Local lane (`npm run test:dynamodb-local`): every suite that starts the local
// emulators, run with AWS's DynamoDB Local (Java) in place of dynalite; `npm test` stays on
// dynalite and needs Node.js only. The suites are chosen by the script's --findRelatedTests: those
// that reach tools/local/emulators.ts through their imports (so src/ and tools/ join the module map here) and
// those that start the platform as a child process through test/e2e/harness.ts. A new suite joins
// the lane by what it imports, not by a list.
const base = require('./jest.config');

// Read by tools/local/emulators.ts in the workers and in every process they start (`local up`, the CLI).
process.env.AGENT_JOBS_LOCAL_DYNAMODB = 'dynamodb-local';

module.exports = {
  ...base,
  roots: [...base.roots, '<rootDir>/src', '<rootDir>/tools'],
  globalSetup: '<rootDir>/test/setup/java-present.ts',
};
