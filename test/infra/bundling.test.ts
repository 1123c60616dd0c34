/**
 * Real synths with esbuild (local, no Docker), into two cloud-assembly folders at different
 * depths: every handler of the catalog is bundled on its own, with a source map whose paths are
 * relative to the project root (so the asset hash does not depend on the output folder), without
 * the AWS SDK (the Lambda runtime provides it), within the size budget its catalog entry declares,
 * requiring only the SDK clients it uses, and the bundle loads and exports `handler` without loading
 * any SDK package (each is loaded when its port is first used: src/compose/aws.ts). A module the
 * catalog gives a separate file (the sequencer's git engine) is in that file, not in index.js.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { BUILD_RECONCILER, allWorkers, type Capability, type WorkerSettings } from '../../contract/job-types';
import { ROOT, addStack, newApp } from './helpers';

/** The SDK packages every worker's pipeline uses: ledger, DLQ and back-off, events. */
const PIPELINE_SDK = ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb', '@aws-sdk/util-dynamodb', '@aws-sdk/client-sqs', '@aws-sdk/client-eventbridge'];
/** The SDK packages a capability's adapter uses. */
const CAPABILITY_SDK: Record<Capability, readonly string[]> = {
  gitCredentials: ['@aws-sdk/client-secrets-manager'],
  githubToken: ['@aws-sdk/client-secrets-manager'],
  diffBucketRead: ['@aws-sdk/client-s3'],
  commandRunner: ['@aws-sdk/client-codebuild'],
  buildStatus: ['@aws-sdk/client-codebuild'],
};

/** Every function of the stack: the catalog's queue-fed workers and the scheduled build reconciler. */
type BundleSettings = Pick<WorkerSettings, 'handlerEntry' | 'needs' | 'bundleBudgetKiB' | 'separateFiles'>;
const FUNCTIONS: readonly { name: string; settings: BundleSettings }[] = [...allWorkers(), { name: 'build_reconciler', settings: BUILD_RECONCILER }];

interface Bundle {
  readonly worker: string;
  readonly settings: BundleSettings;
  readonly handlerEntry: string;
  readonly assetHash: string;
  readonly dir: string;
}

/** Paths of the stack's functions that are not a catalog worker (and so have no declared budget). */
let undeclaredFunctions: string[];

/** Synthesizes into `outdir` and returns each worker's bundle (the S3 key is the asset hash). */
function synthInto(outdir: string): Bundle[] {
  const app = newApp({ bundle: true, outdir });
  const stack = addStack(app, 'dev');
  const functionOf = (name: string) => (name === 'build_reconciler' ? stack.buildReconciler!.worker.function : stack.lanes.find((l) => l.spec.consumer === name)!.worker.function);
  const declared = new Set(FUNCTIONS.map((f) => functionOf(f.name)));
  undeclaredFunctions = stack.node.findAll().filter((c) => c instanceof NodejsFunction && !declared.has(c)).map((c) => c.node.path);
  const resources = Template.fromStack(stack).toJSON().Resources;
  const assembly = app.synth();
  return FUNCTIONS.map(({ name, settings }) => {
    const fn = resources[stack.getLogicalId(functionOf(name).node.defaultChild as never)];
    const assetHash = String(fn.Properties.Code.S3Key).replace(/\.zip$/, '');
    return { worker: name, settings, handlerEntry: settings.handlerEntry, assetHash, dir: join(assembly.directory, `asset.${assetHash}`) };
  });
}

let root: string;
let bundles: Bundle[];
let elsewhere: Bundle[];
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'agent-jobs-bundle-'));
  bundles = synthInto(join(root, 'cdk.out'));
  const deeper = join(root, 'a', 'deeper', 'folder');
  mkdirSync(deeper, { recursive: true });
  elsewhere = synthInto(deeper);
}, 240_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('bundles each handler separately', () => {
  // The command stages share one handler (STAGE_JOB_TYPE tells it which it serves): one bundle each, the same code.
  const entries = new Set(FUNCTIONS.map((f) => f.settings.handlerEntry));
  expect(new Set(bundles.map((b) => b.assetHash)).size).toBe(entries.size);
});

it('gives every asset the same hash whatever the output folder (cdk synth -o), so cdk diff shows no phantom code change', () => {
  expect(elsewhere.map((b) => b.assetHash)).toEqual(bundles.map((b) => b.assetHash));
});

it('bundles only catalog workers and the reconciler, so every function has a declared bundle budget', () => {
  expect(undeclaredFunctions).toEqual([]);
});

describe.each(FUNCTIONS.map((w) => w.name))('the %s bundle', (worker) => {
  const bundle = (): Bundle => bundles.find((b) => b.worker === worker)!;
  const separateFiles = () => bundle().settings.separateFiles ?? [];
  /** index.js and the separate files: every file of code the asset ships. */
  const codeFiles = (): string[] => ['index.js', ...separateFiles().map((f) => f.file)];
  const sourcesOf = (file: string): string[] => JSON.parse(readFileSync(join(bundle().dir, `${file}.map`), 'utf8')).sources;
  const sources = (): string[] => sourcesOf('index.js');

  it('has source maps whose paths are relative to the project root and name its handler', () => {
    expect(sources()).toContain(bundle().handlerEntry);
    for (const file of codeFiles()) {
      expect(sourcesOf(file).filter((s) => s.startsWith('../') || isAbsolute(s))).toEqual([]);
      // Our own files exist at those paths (a dependency's map may name sources its package does not ship).
      expect(sourcesOf(file).filter((s) => !s.startsWith('node_modules/') && !existsSync(join(ROOT, s)))).toEqual([]);
    }
  });

  it('leaves the AWS SDK to the runtime: required at run time, never inlined', () => {
    expect(readFileSync(join(bundle().dir, 'index.js'), 'utf8')).toMatch(/require\("@aws-sdk\/client-sqs"\)/);
    for (const file of codeFiles()) expect(sourcesOf(file).filter((s) => /node_modules\/@(aws-sdk|smithy)\//.test(s))).toEqual([]);
  });

  it('stays within the bundle budgets its catalog entry declares', () => {
    expect(statSync(join(bundle().dir, 'index.js')).size / 1024).toBeLessThanOrEqual(bundle().settings.bundleBudgetKiB);
    for (const { file, budgetKiB } of separateFiles()) expect(statSync(join(bundle().dir, file)).size / 1024).toBeLessThanOrEqual(budgetKiB);
  });

  it('holds each module its catalog entry separates in a file of its own, not in index.js', () => {
    for (const { entry, file } of separateFiles()) {
      expect(sourcesOf(file)).toContain(entry);
      expect(sources()).not.toContain(entry);
    }
  });

  it('requires exactly the SDK clients of its pipeline and of its declared capabilities', () => {
    const code = codeFiles().map((file) => readFileSync(join(bundle().dir, file), 'utf8')).join('\n');
    const required = new Set([...code.matchAll(/require\("(@aws-sdk\/[^"]+)"\)/g)].map((m) => m[1]));
    const expected = new Set([...PIPELINE_SDK, ...bundle().settings.needs.flatMap((need) => CAPABILITY_SDK[need])]);
    expect([...required].sort()).toEqual([...expected].sort());
  });

  it('loads in node, exports a handler function and loads no SDK package, git engine or network module until a port is used', () => {
    // NODE_PATH stands in for the runtime's own @aws-sdk/* (the bundle requires them when first used).
    const script = [
      `const { handler } = require(${JSON.stringify(join(bundle().dir, 'index.js'))});`,
      `const sdk = Object.keys(require.cache).filter((f) => /[\\/]node_modules[\\/]@(aws-sdk|smithy)[\\/]/.test(f));`,
      // Node's own modules the SDK's HTTP client and the git engine load: none before a port is used
      // (not net: a process whose stdout is a pipe, as here, loads it for that).
      `const network = process.moduleLoadList.filter((m) => /^NativeModule (http|https|tls|zlib)$/.test(m));`,
      `const separate = ${JSON.stringify(separateFiles().map((f) => join(bundle().dir, f.file)))}.filter((f) => f in require.cache);`,
      'process.stdout.write(JSON.stringify({ exported: typeof handler, sdkModules: sdk.length, network, separate }));',
    ].join('\n');
    const load = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, NODE_PATH: join(ROOT, 'node_modules') } });
    expect({ status: load.status, stderr: load.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(load.stdout)).toEqual({ exported: 'function', sdkModules: 0, network: [], separate: [] });
  });
});
