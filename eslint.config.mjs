// Lint: the few rules the type checker cannot enforce. Focused or skipped tests must never land,
// runtime code logs through Powertools Logger, never console, and no import runs back up the
// layers: only bin/ imports the CLI, and the read model for people (tools/operator) imports neither
// the CLI nor the local platform (but for the modules that name its files).
import tseslint from 'typescript-eslint';
import jest from 'eslint-plugin-jest';

export default tseslint.config(
  { ignores: ['node_modules/**', 'cdk.out/**', '.agent-jobs/**', 'coverage/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser },
  },
  {
    files: ['test/**/*.ts'],
    plugins: { jest },
    rules: {
      'jest/no-focused-tests': 'error',
      'jest/no-disabled-tests': 'error',
      'jest/no-identical-title': 'error',
      'jest/valid-expect': 'error',
    },
  },
  {
    files: ['src/core/**/*.ts', 'src/adapters/**/*.ts', 'src/compose/**/*.ts', 'src/handlers/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    files: ['tools/**/*.ts'],
    ignores: ['tools/cli/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/cli', '**/cli/*'],
              message: 'only bin/ imports the CLI: read and change the platform through tools/operator',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['tools/operator/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/cli', '**/cli/*'], message: 'the read model serves the CLI, it never imports it' },
            // It reads the local platform's files through the modules that define them: the state
            // directory's names, and the test runner's kept outputs (loaded when a log is read).
            {
              group: ['**/local/*', '!**/local/state-dir', '!**/local/test-runner'],
              message:
                'the read model reads the local platform through its target (platform.json) and its files, not its code',
            },
          ],
        },
      ],
    },
  },
);
