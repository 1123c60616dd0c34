// The inner loop, `npm run test:unit`: the pure core, the contracts and the synth tests (test/unit,
// test/infra), without the two costs that dominate them and that the code under edit rarely
// changes: building bundles with esbuild (the functions' assets, test/infra/bundling.test.ts; the
// CLI's, test/unit/cli-bundle.test.ts, which also starts emulators) and CDK's CloudFormation
// validation of each template (test/setup/no-template-validation.ts). `npm run test:pr` (CI's
// pull-request job) and `npm test` run both; test/workflows is left to them too.
const base = require('./jest.config.js');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  roots: ['<rootDir>/test/unit', '<rootDir>/test/infra'],
  testPathIgnorePatterns: [
    ...base.testPathIgnorePatterns,
    '<rootDir>/test/infra/bundling.test.ts',
    '<rootDir>/test/unit/cli-bundle.test.ts',
  ],
  setupFiles: [...base.setupFiles, '<rootDir>/test/setup/no-template-validation.ts'],
};
