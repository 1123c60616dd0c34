/** @type {import('jest').Config} */
// Type checking is `tsc --noEmit` in npm test; ts-jest only transpiles (isolatedModules in tsconfig.json).
// Octokit and a few of its dependencies ship ESM only: let ts-jest transpile them (allowJs).
const esmOnly = ['@octokit', 'universal-user-agent', 'before-after-hook', 'content-type', 'json-with-bigint', 'fast-content-type-parse'];

module.exports = {
  testEnvironment: '<rootDir>/test/setup/environment.ts',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: {
    '^.+\\.[tj]sx?$': ['ts-jest', { tsconfig: { allowJs: true } }],
  },
  transformIgnorePatterns: [`node_modules/(?!(${esmOnly.join('|')})/)`],
  snapshotSerializers: ['<rootDir>/test/infra/asset-hash-serializer.ts'],
  setupFiles: ['<rootDir>/test/setup/quiet-sdk-notice.ts'],
  setupFilesAfterEnv: ['aws-cdk-lib/testhelpers/jest-autoclean'],
  testTimeout: 60_000,
  maxWorkers: 2,
};
