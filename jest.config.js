const { existsSync } = require('node:fs');

// The browser tests need a Chromium (Debian's package, or CHROMIUM_PATH): without one they are left
// out, in one line, except under CI=true, where they run and fail (.ci/run installs Chromium).
const chromium = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const browserTests = existsSync(chromium) || process.env.CI === 'true';
if (!browserTests) {
  process.stderr.write(
    `browser tests skipped: no Chromium at ${chromium} (install it: apt-get install chromium, as root; or set CHROMIUM_PATH)\n`,
  );
}

/** @type {import('jest').Config} */
// Type checking is `tsc --noEmit` in npm test; ts-jest only transpiles (isolatedModules in tsconfig.json).
// Octokit and a few of its dependencies ship ESM only, as do the Markdown parser and slugger of the
// link test: let ts-jest transpile them (allowJs).
const esmOnly = [
  '@octokit',
  'universal-user-agent',
  'before-after-hook',
  'content-type',
  'json-with-bigint',
  'fast-content-type-parse',
  'universal-github-app-jwt',
  'marked',
  'github-slugger',
];

module.exports = {
  testEnvironment: '<rootDir>/test/setup/environment.ts',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', ...(browserTests ? [] : ['<rootDir>/test/browser/'])],
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
