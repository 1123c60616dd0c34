// Lint: the few rules the type checker cannot enforce. Focused or skipped tests must never land,
// and runtime code logs through Powertools Logger, never console.
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
);
