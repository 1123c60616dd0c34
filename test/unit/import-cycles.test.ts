/**
 * No import cycle in src/, lib/, contract/ and bin/, type-only imports included
 * (.dependency-cruiser.cjs says why this is not an eslint rule). dependency-cruiser ships as ES
 * modules only, so it runs as its own process.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

it('finds no import cycle in the code that ships', () => {
  const run = spawnSync(join(ROOT, 'node_modules', '.bin', 'depcruise'), ['src', 'lib', 'contract', 'bin', '--config', '.dependency-cruiser.cjs', '--output-type', 'err'], { cwd: ROOT, encoding: 'utf8' });
  expect(run.stdout + run.stderr).toMatch(/no dependency violations found/);
  expect(run.status).toBe(0);
});
