/**
 * The CLI's start (bin/cli-bundle.js): the bundles it runs are ASCII only, the SDK's bundles hold
 * every SDK package the CLI requires and `status` loads only the DynamoDB one, the manifest stands
 * for the installed packages by npm's record instead of their files, and each command gets a V8
 * code cache that later calls accept; the console and the MCP server are parts of their own,
 * outside the bundle every command reads. Run in child processes: the bin is plain JavaScript.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { EXIT } from '../../tools/cli/errors';
import { LOCAL_REGION } from '../../tools/local/emulators';
import { PLATFORM_FILE } from '../../tools/local/state-dir';
import { withEmulators } from '../support/emulators';

const execFileAsync = promisify(execFile);

const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'bin', 'agent-jobs.js');
interface Bundles {
  readonly file: string;
  readonly sdk: Record<string, { readonly file: string; readonly packages: readonly string[] }>;
  readonly parts: Record<string, string>;
  readonly encodings: Record<string, string>;
}
const { cliBundle, CACHE_DIR } = require('../../bin/cli-bundle.js') as {
  cliBundle(): Bundles | undefined;
  CACHE_DIR: string;
};

let bundles: Bundles;
let bundle: string;
const requiredBy = (file: string) =>
  new Set([...readFileSync(file, 'latin1').matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]));
beforeAll(() => {
  const made = cliBundle();
  if (made === undefined) throw new Error('bin/cli-bundle.js could not make the bundle');
  bundles = made;
  bundle = made.file;
}, 120_000);

it('is ASCII only, and read as such: node decodes any other character through its slow UTF-8 path', () => {
  const files = [
    bundle,
    ...Object.values(bundles.sdk).map((s) => join(CACHE_DIR, s.file)),
    ...Object.values(bundles.parts).map((file) => join(CACHE_DIR, file)),
  ];
  for (const file of files) expect(readFileSync(file, 'latin1').match(/[^\x00-\x7f].{0,20}/)?.[0]).toBeUndefined();
  expect(files.map((file) => bundles.encodings[basename(file)])).toEqual(files.map(() => 'latin1'));
});

it("keeps the console out of the CLI's bundle, in a part that `console` loads and no other command reads", () => {
  const part = bundles.parts['../../console/server'];
  expect(part).toBeDefined();
  expect(readFileSync(bundle, 'latin1')).not.toMatch(/sse-connect|htmx/);
  expect(readFileSync(join(CACHE_DIR, part!), 'latin1')).toMatch(/sse-connect/);
  expect(requiredBy(bundle)).toContain('../../console/server');
  // --help of `console` runs no console, --version nothing: the part is loaded by the command's run only.
  expect(execFileSync(process.execPath, [BIN, 'console', '--help'], { encoding: 'utf8' })).toMatch(
    /^Usage: agent-jobs console/,
  );
});

it("keeps the MCP server out of the CLI's bundle, in a part that `mcp` loads: no other command reads it or loads the MCP SDK", () => {
  const part = bundles.parts['../../mcp/server'];
  expect(part).toBeDefined();
  expect(requiredBy(bundle)).not.toContain('@modelcontextprotocol/sdk/server/mcp.js');
  expect(requiredBy(join(CACHE_DIR, part!))).toContain('@modelcontextprotocol/sdk/server/mcp.js');
  expect(requiredBy(bundle)).toContain('../../mcp/server');
  expect(execFileSync(process.execPath, [BIN, 'mcp', '--help'], { encoding: 'utf8' })).toMatch(
    /^Usage: agent-jobs mcp/,
  );
});

it('bundles every AWS SDK package the CLI requires, in a full SDK bundle that requires none from node_modules', () => {
  const { dependencies } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const sdk = [...requiredBy(bundle)].filter((name) => name!.startsWith('@aws-sdk/')).sort();
  expect(sdk.length).toBeGreaterThan(0);
  expect(sdk.filter((name) => dependencies[name!] === undefined)).toEqual([]);
  expect(bundles.sdk['sdk']!.packages).toEqual(sdk);
  const full = join(CACHE_DIR, bundles.sdk['sdk']!.file);
  // An optional package the SDK tries inside a try (@aws-sdk/signature-v4-crt) is not installed, so not bundled.
  const installed = (name: string) => existsSync(join(ROOT, 'node_modules', name));
  expect([...requiredBy(full)].filter((name) => /^@(aws-sdk|smithy)\//.test(name!) && installed(name!))).toEqual([]);
});

describe('on a local platform (emulated: the emulators alone, described by a platform file)', () => {
  const emulators = withEmulators();

  it('runs `status` with the DynamoDB packages alone: the full SDK bundle is never loaded', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'cli-bundle-'));
    try {
      const { endpoints, queueUrls, dlqUrls, tableName, bucketName } = emulators();
      const platform = {
        pid: process.pid,
        region: LOCAL_REGION,
        endpoints,
        queueUrls,
        dlqUrls,
        tableName,
        bucketName,
        gitUrl: 'http://127.0.0.1:9/',
        eventLog: join(stateDir, 'events.jsonl'),
      };
      writeFileSync(join(stateDir, PLATFORM_FILE), JSON.stringify(platform));
      const run = await execFileAsync(process.execPath, [BIN, 'status', 'no-such-job', '--state-dir', stateDir], {
        encoding: 'utf8',
      }).catch((error: { code: number; stderr: string }) => error);
      expect(run).toMatchObject({
        code: EXIT.notFound,
        stderr: expect.stringMatching(/no-such-job is not in the ledger/),
      });
      const caches = readdirSync(CACHE_DIR).filter((f) => f.endsWith('.status.v8-cache'));
      expect(caches).toContain(`${bundles.sdk['sdk-dynamodb']!.file}.status.v8-cache`);
      expect(caches).not.toContain(`${bundles.sdk['sdk']!.file}.status.v8-cache`);
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});

it("records the installed packages as npm's record of node_modules, not file by file", () => {
  const manifest = JSON.parse(readFileSync(join(CACHE_DIR, 'cli.json'), 'utf8')) as { inputs: Record<string, string> };
  const inNodeModules = Object.keys(manifest.inputs).filter((f) => f.startsWith('node_modules'));
  expect(inNodeModules).toEqual([join('node_modules', '.package-lock.json')]);
});

it("writes a command's code cache at its first run and keeps it at the next, which accepts it", () => {
  const cacheOf = () =>
    readdirSync(CACHE_DIR).find(
      (f) => bundle.endsWith(f.replace(/\.other\.v8-cache$/, '')) && f.endsWith('.other.v8-cache'),
    );
  execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' });
  const cache = cacheOf();
  expect(cache).toBeDefined();
  const written = statSync(join(CACHE_DIR, cache!)).mtimeMs;

  expect(execFileSync(process.execPath, [BIN, '--version'], { encoding: 'utf8' })).toMatch(/^agent-jobs /);
  // Rejected (other source, another V8), the cache would be written again.
  expect(statSync(join(CACHE_DIR, cache!)).mtimeMs).toBe(written);
});
