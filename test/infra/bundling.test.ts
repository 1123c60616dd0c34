/**
 * Real synths with esbuild (local, no Docker), into two cloud-assembly folders at different
 * depths: every handler of the catalog is bundled on its own, with a source map whose paths are
 * relative to the project root (so the asset hash does not depend on the output folder), with the
 * AWS SDK clients it uses bundled in (never the runtime's own: docs/decisions.md §22) and no other,
 * within the size budget its catalog entry declares, and the bundle loads and exports `handler`
 * without running any SDK client's code or loading Node's network modules (each client is made
 * when its port is first used: src/compose/aws.ts). A module the catalog gives a separate file
 * (the sequencer's git engine) is in that file, not in index.js.
 */
import { spawnSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { Template } from 'aws-cdk-lib/assertions';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { BUILD_RECONCILER, allWorkers, type Capability, type WorkerSettings } from '../../contract/job-types';
import { ROOT, addStack, newApp } from './helpers';

/** The SDK packages every worker's pipeline uses: ledger, DLQ and back-off, events. */
const PIPELINE_SDK = [
  '@aws-sdk/client-dynamodb',
  '@aws-sdk/lib-dynamodb',
  '@aws-sdk/util-dynamodb',
  '@aws-sdk/client-sqs',
  '@aws-sdk/client-eventbridge',
];
/** The SDK packages a capability's adapter uses. */
const CAPABILITY_SDK: Record<Capability, readonly string[]> = {
  gitCredentials: ['@aws-sdk/client-secrets-manager'],
  githubToken: ['@aws-sdk/client-secrets-manager'],
  diffBucketRead: ['@aws-sdk/client-s3'],
  // Secrets Manager: the read-only secret, and the checkout secret of each build (build-checkout.js).
  commandRunner: ['@aws-sdk/client-codebuild', '@aws-sdk/client-secrets-manager'],
  buildStatus: ['@aws-sdk/client-codebuild'],
  buildStop: ['@aws-sdk/client-codebuild'],
};

/** Every function of the stack: the catalog's queue-fed workers and the scheduled build reconciler. */
type BundleSettings = Pick<WorkerSettings, 'handlerEntry' | 'needs' | 'bundleBudgetKiB' | 'separateFiles'>;
const FUNCTIONS: readonly { name: string; settings: BundleSettings }[] = [
  ...allWorkers(),
  { name: 'build_reconciler', settings: BUILD_RECONCILER },
];

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
  const functionOf = (name: string) =>
    name === 'build_reconciler'
      ? stack.buildReconciler!.worker.function
      : stack.lanes.find((l) => l.spec.consumer === name)!.worker.function;
  const declared = new Set(FUNCTIONS.map((f) => functionOf(f.name)));
  undeclaredFunctions = stack.node
    .findAll()
    .filter((c) => c instanceof NodejsFunction && !declared.has(c))
    .map((c) => c.node.path);
  const resources = Template.fromStack(stack).toJSON().Resources;
  const assembly = app.synth();
  return FUNCTIONS.map(({ name, settings }) => {
    const fn = resources[stack.getLogicalId(functionOf(name).node.defaultChild as never)];
    const assetHash = String(fn.Properties.Code.S3Key).replace(/\.zip$/, '');
    return {
      worker: name,
      settings,
      handlerEntry: settings.handlerEntry,
      assetHash,
      dir: join(assembly.directory, `asset.${assetHash}`),
    };
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
  const sourcesOf = (file: string): string[] =>
    JSON.parse(readFileSync(join(bundle().dir, `${file}.map`), 'utf8')).sources;
  const sources = (): string[] => sourcesOf('index.js');

  it('has source maps whose paths are relative to the project root and name its handler', () => {
    expect(sources()).toContain(bundle().handlerEntry);
    for (const file of codeFiles()) {
      expect(sourcesOf(file).filter((s) => s.startsWith('../') || isAbsolute(s))).toEqual([]);
      // Our own files exist at those paths (a dependency's map may name sources its package does not ship).
      expect(sourcesOf(file).filter((s) => !s.startsWith('node_modules/') && !existsSync(join(ROOT, s)))).toEqual([]);
    }
  });

  it('carries the AWS SDK it runs with: nothing required from the runtime but Node itself', () => {
    for (const file of codeFiles()) {
      const required = [...readFileSync(join(bundle().dir, file), 'utf8').matchAll(/require\("([^"]+)"\)/g)].map(
        (m) => m[1]!,
      );
      // signature-v4-crt is the SDK's optional SigV4a signer, required in a try block and never used here.
      expect(
        required.filter(
          (name) => !name.startsWith('node:') && !builtinModules.includes(name) && name !== '@aws-sdk/signature-v4-crt',
        ),
      ).toEqual([]);
    }
    expect(sources()).toEqual(expect.arrayContaining([expect.stringMatching(/^node_modules\/@aws-sdk\/client-sqs\//)]));
  });

  it('stays within the bundle budgets its catalog entry declares', () => {
    expect(statSync(join(bundle().dir, 'index.js')).size / 1024).toBeLessThanOrEqual(bundle().settings.bundleBudgetKiB);
    for (const { file, budgetKiB } of separateFiles())
      expect(statSync(join(bundle().dir, file)).size / 1024).toBeLessThanOrEqual(budgetKiB);
  });

  it('holds each module its catalog entry separates in a file of its own, not in index.js', () => {
    for (const { entry, file } of separateFiles()) {
      expect(sourcesOf(file)).toContain(entry);
      expect(sources()).not.toContain(entry);
    }
  });

  it('bundles exactly the SDK clients of its pipeline and of its declared capabilities', () => {
    const clients = new Set(
      codeFiles()
        .flatMap(sourcesOf)
        .flatMap(
          (source) =>
            /^node_modules\/(@aws-sdk\/(?:client-[^/]+|lib-dynamodb|util-dynamodb))\//.exec(source)?.[1] ?? [],
        ),
    );
    const expected = new Set([...PIPELINE_SDK, ...bundle().settings.needs.flatMap((need) => CAPABILITY_SDK[need])]);
    expect([...clients].sort()).toEqual([...expected].sort());
  });

  it('loads in node, exports a handler function and loads no git engine or network module until a port is used', () => {
    // The SDK's HTTP handler loads http and https: none loaded means no client was made at load.
    const script = [
      `const { handler } = require(${JSON.stringify(join(bundle().dir, 'index.js'))});`,
      // Node's own modules the SDK's HTTP client and the git engine load: none before a port is used
      // (not net: a process whose stdout is a pipe, as here, loads it for that).
      `const network = process.moduleLoadList.filter((m) => /^NativeModule (http|https|tls|zlib)$/.test(m));`,
      `const separate = ${JSON.stringify(separateFiles().map((f) => join(bundle().dir, f.file)))}.filter((f) => f in require.cache);`,
      'process.stdout.write(JSON.stringify({ exported: typeof handler, network, separate }));',
    ].join('\n');
    // From a folder where no node_modules can be found: the bundle must carry everything it loads.
    const load = spawnSync(process.execPath, ['-e', script], {
      encoding: 'utf8',
      cwd: tmpdir(),
      env: { ...process.env, NODE_PATH: '' },
    });
    expect({ status: load.status, stderr: load.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(load.stdout)).toEqual({ exported: 'function', network: [], separate: [] });
  });
});
