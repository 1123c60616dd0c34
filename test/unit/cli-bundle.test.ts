/**
 * The CLI's start (bin/cli-bundle.js): the bundle it runs is ASCII only, carries the SDK, stands
 * for the installed packages by npm's record instead of their files, and each command gets a V8
 * code cache that later calls accept. Run in child processes: the bin is plain JavaScript.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'agent-jobs.js');
const { cliBundle, CACHE_DIR } = require('../../bin/cli-bundle.js') as { cliBundle(): string | undefined; CACHE_DIR: string };

let bundle: string;
beforeAll(() => {
  const made = cliBundle();
  if (made === undefined) throw new Error('bin/cli-bundle.js could not make the bundle');
  bundle = made;
}, 120_000);

it('is ASCII only: node reads any other character through its slow UTF-8 path', () => {
  const text = readFileSync(bundle, 'latin1');
  expect(text.match(/[^\x00-\x7f].{0,20}/)?.[0]).toBeUndefined();
});

it('carries the AWS SDK packages the CLI depends on: none is required from node_modules', () => {
  const { dependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const required = new Set([...readFileSync(bundle, 'latin1').matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]));
  const sdk = Object.keys(dependencies).filter((name) => name.startsWith('@aws-sdk/'));
  expect(sdk.length).toBeGreaterThan(0);
  expect(sdk.filter((name) => required.has(name))).toEqual([]);
});

it("records the installed packages as npm's record of node_modules, not file by file", () => {
  const manifest = JSON.parse(readFileSync(join(CACHE_DIR, 'cli.json'), 'utf8')) as { inputs: Record<string, string> };
  const inNodeModules = Object.keys(manifest.inputs).filter((f) => f.startsWith('node_modules'));
  expect(inNodeModules).toEqual([join('node_modules', '.package-lock.json')]);
});

it("writes a command's code cache at its first run and keeps it at the next, which accepts it", () => {
  const cacheOf = () => readdirSync(CACHE_DIR).find((f) => bundle.endsWith(f.replace(/\.other\.v8-cache$/, '')) && f.endsWith('.other.v8-cache'));
  execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' });
  const cache = cacheOf();
  expect(cache).toBeDefined();
  const written = statSync(join(CACHE_DIR, cache!)).mtimeMs;

  expect(execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' })).toMatch(/^agent-jobs /);
  // Rejected (other source, another V8), the cache would be written again.
  expect(statSync(join(CACHE_DIR, cache!)).mtimeMs).toBe(written);
});
