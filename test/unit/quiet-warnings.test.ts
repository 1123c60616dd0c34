/**
 * The filter the CLI and the tests' environment install (tools/local/quiet-warnings.ts): it keeps
 * the two known notices off stderr and prints every other warning. Run in a child process, because
 * the filter replaces the process's own warning listeners.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

function stderrOf(script: string): string {
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--eval', script], { cwd: ROOT, encoding: 'utf8' });
  expect(child.status).toBe(0);
  return child.stderr;
}

const EMIT_BOTH = `
  process.emitWarning('vm.USE_MAIN_CONTEXT_DEFAULT_LOADER is an experimental feature', 'ExperimentalWarning');
  process.emitWarning('something else entirely', 'ExperimentalWarning');
`;

it('keeps the known loader notice off stderr and prints any other warning', () => {
  const stderr = stderrOf(`require('./tools/local/quiet-warnings.ts').quietKnownWarnings();${EMIT_BOTH}`);
  expect(stderr).not.toContain('USE_MAIN_CONTEXT_DEFAULT_LOADER');
  expect(stderr).toContain('ExperimentalWarning: something else entirely');
});

it('without the filter, Node prints both (so the check above can fail)', () => {
  const stderr = stderrOf(EMIT_BOTH);
  expect(stderr).toContain('USE_MAIN_CONTEXT_DEFAULT_LOADER');
  expect(stderr).toContain('something else entirely');
});
