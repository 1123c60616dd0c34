/**
 * Each function's bundle as the stack ships it: its bytes (and how much of them is the AWS SDK it
 * carries, docs/decisions.md §22), how long a cold start spends loading it, and what the first use
 * of each SDK client adds to the first event.
 *
 * Bundled with esbuild as the stack bundles it (lib/constructs/worker.ts: minified, for the
 * Lambda's Node.js major, the SDK clients inside, each separate file of the catalog beside
 * index.js); the synth test (test/infra/bundling.test.ts) holds each to its budget. Timed on the
 * Node.js of the Lambda runtime's major (the assembly run's, test/assembly/lambda-node.ts), in a
 * fresh process per load, from inside it (wall and CPU):
 * - module load: `require` of the bundle. No bundle runs an SDK client's code at load: each client
 *   is required where its port is first used (src/compose/aws.ts), so esbuild leaves its modules
 *   parsed but not run until then;
 * - first use of each client, in turn: the client's modules run and a client is made, as the
 *   function's first call through that port does (no request is sent). The bundle reaches those
 *   modules only from inside, so the load is timed on a copy bundled from an entry that holds the
 *   handler and a hook that requires a client package by name: the same modules, a few hundred
 *   bytes more;
 * - each separate file (the sequencer's git engine, open_pr's GitHub host), required after that.
 * In the same run and process layout, the same with the SDK left external and resolved from this
 * project's node_modules, as the stack bundled before §22 (the runtime's SDK stood in for it then):
 * the ratio is what carrying the SDK costs each cold start.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build, type Metafile } from 'esbuild';
import { BUILD_RECONCILER, allWorkers, type SeparateFile } from '../contract/job-types';
import { LAMBDA_NODE_MAJOR, separateFileDefines, stackEsbuildOptions } from '../lib/constructs/worker';
import { lambdaNode, lambdaNodeUnavailable } from '../test/assembly/lambda-node';
import { fmt, median, quick, type Benchmark, type BenchRow } from './harness';

const ROOT = join(__dirname, '..');

/** Every function the stack deploys: the catalog's queue-fed workers and the scheduled reconciler. */
const FUNCTIONS: readonly {
  name: string;
  handlerEntry: string;
  budgetKiB: number;
  separateFiles: readonly SeparateFile[];
}[] = [
  ...allWorkers().map(({ name, settings }) => ({
    name,
    handlerEntry: settings.handlerEntry,
    budgetKiB: settings.bundleBudgetKiB,
    separateFiles: settings.separateFiles ?? [],
  })),
  {
    name: 'build_reconciler',
    handlerEntry: BUILD_RECONCILER.handlerEntry,
    budgetKiB: BUILD_RECONCILER.bundleBudgetKiB,
    separateFiles: [],
  },
];

/** The two ways compared: what the stack ships, and the SDK left to the runtime as before §22. */
const VARIANTS = { shipped: [] as string[], sdkExternal: ['@aws-sdk/*', '@smithy/*'] } as const;
type Variant = keyof typeof VARIANTS;

/** An input of the bundle by package (`src`, `contract` for our own code). */
const packageOf = (input: string): string =>
  /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input.split('/')[0] ?? input;
const isSdk = (pkg: string): boolean => /^@(aws-sdk|smithy|aws-crypto)\//.test(pkg);

/** The inputs of the bundle's one output that have bytes in it (esbuild lists those it dropped too). */
function inputsOf(metafile: Metafile): [string, number][] {
  const [output] = Object.values(metafile.outputs);
  return Object.entries(output?.inputs ?? {}).flatMap(([input, { bytesInOutput }]) =>
    bytesInOutput > 0 ? [[input, bytesInOutput] as [string, number]] : [],
  );
}

/** Bytes of a bundle's output by package, largest first. */
function byPackage(metafile: Metafile): [string, number][] {
  const sizes = new Map<string, number>();
  for (const [input, bytes] of inputsOf(metafile))
    sizes.set(packageOf(input), (sizes.get(packageOf(input)) ?? 0) + bytes);
  return [...sizes].sort((a, b) => b[1] - a[1]);
}

/** The SDK client packages a bundle holds, in the order a first event uses them: the ledger's first. */
function clientPackages(metafile: Metafile): string[] {
  const found = new Set(
    inputsOf(metafile).flatMap(
      ([input]) => /node_modules\/(@aws-sdk\/(?:client-[^/]+|lib-dynamodb))\//.exec(input)?.[1] ?? [],
    ),
  );
  const first = ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb'];
  return [...first.filter((p) => found.has(p)), ...[...found].filter((p) => !first.includes(p)).sort()];
}

/**
 * The hook's entry: the handler's module, and `firstUse(package)`, which requires one of the client
 * packages the bundle holds from inside it and makes its client (lib-dynamodb wraps one: required only).
 */
const hookEntry = (handlerEntry: string, clients: readonly string[]): string =>
  [
    // Re-exported as a module, as the handler is an entry point: required, esbuild would keep every export of its graph.
    `export { handler } from ${JSON.stringify(join(ROOT, handlerEntry))};`,
    'const packages = {',
    ...clients.map((p) => `  ${JSON.stringify(p)}: () => require(${JSON.stringify(p)}),`),
    '};',
    'export function firstUse(name) {',
    '  const m = packages[name]();',
    "  const Client = Object.entries(m).find(([key, value]) => /Client$/.test(key) && key !== 'DynamoDBDocumentClient' && typeof value === 'function');",
    "  if (Client) new Client[1]({ region: 'eu-west-1' });",
    '}',
  ].join('\n');

interface Load {
  /** `require` of the bundle: wall and CPU (user + system) ms. */
  readonly loadMs: number;
  readonly loadCpuMs: number;
  /** Wall ms each client's first use added, in turn, then each separate file's require. */
  readonly steps: readonly number[];
  /** Module load and every step: wall and CPU ms. */
  readonly totalMs: number;
  readonly totalCpuMs: number;
}

function timeLoad(node: string, file: string, clients: readonly string[], separate: readonly string[]): Load {
  const script = [
    'const cpu = (from) => { const u = process.cpuUsage(from); return (u.user + u.system) / 1000; };',
    `const t0 = performance.now(); const c0 = process.cpuUsage(); const bundle = require(${JSON.stringify(file)});`,
    'const loadMs = performance.now() - t0; const loadCpuMs = cpu(c0); const steps = [];',
    `for (const p of ${JSON.stringify(clients)}) { const t = performance.now(); bundle.firstUse(p); steps.push(performance.now() - t); }`,
    `for (const f of ${JSON.stringify(separate)}) { const t = performance.now(); require(f); steps.push(performance.now() - t); }`,
    'process.stdout.write(JSON.stringify({ loadMs, loadCpuMs, steps, totalMs: performance.now() - t0, totalCpuMs: cpu(c0) }));',
  ].join('\n');
  // NODE_PATH: where the SDK left external resolves from (the shipped bundles need nothing).
  const result = spawnSync(node, ['-e', script], {
    encoding: 'utf8',
    cwd: tmpdir(),
    env: { ...process.env, NODE_PATH: join(ROOT, 'node_modules') },
  });
  if (result.status !== 0) throw new Error(`loading ${file} failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Load;
}

interface Built {
  readonly bytes: number;
  readonly metafile: Metafile;
  /** The client packages the shipped bundle holds, in the order of a first event. */
  readonly clients: readonly string[];
  readonly hookFile: string;
  readonly separate: readonly { file: string; path: string; bytes: number; budgetKiB: number }[];
  readonly loads: Load[];
}

/** Bytes the hook may add to a bundle: its own few lines, never a module the function lacks. */
const HOOK_BYTES = 1024;

async function bundle(
  fn: (typeof FUNCTIONS)[number],
  variant: Variant,
  dir: string,
  clientsOf?: readonly string[],
): Promise<Built> {
  const options = {
    ...stackEsbuildOptions(ROOT),
    external: [...VARIANTS[variant]],
    define: separateFileDefines(fn.separateFiles),
  };
  const outfile = join(dir, 'index.js');
  const { metafile } = await build({ entryPoints: [join(ROOT, fn.handlerEntry)], outfile, ...options, metafile: true });
  const bytes = (await stat(outfile)).size;
  const clients = clientsOf ?? clientPackages(metafile);
  const hookFile = join(dir, 'hooked.js');
  await build({
    stdin: { contents: hookEntry(fn.handlerEntry, clients), resolveDir: ROOT, loader: 'js' },
    outfile: hookFile,
    ...options,
  });
  const hookBytes = (await stat(hookFile)).size - bytes;
  if (hookBytes > HOOK_BYTES)
    throw new Error(
      `${fn.name}: the hooked copy is ${hookBytes} bytes larger than index.js: it holds modules the function does not`,
    );
  const separate = [];
  for (const { entry, file, budgetKiB } of fn.separateFiles) {
    const path = join(dir, file);
    await build({ entryPoints: [join(ROOT, entry)], outfile: path, ...options });
    separate.push({ file, path, bytes: (await stat(path)).size, budgetKiB });
  }
  return { bytes, metafile, clients, hookFile, separate, loads: [] };
}

export const bench: Benchmark = {
  name: 'bundles',
  async run() {
    const rounds = quick() ? 3 : 10;
    const lambdaMajor = lambdaNodeUnavailable() === undefined;
    const node = lambdaMajor ? lambdaNode(LAMBDA_NODE_MAJOR) : process.execPath;
    const nodeVersion = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout.trim();
    const out = await mkdtemp(join(tmpdir(), 'bench-bundles-'));
    const rows: BenchRow[] = [];
    const figures: {
      name: string;
      kib: number;
      sdkKib: number;
      budget: number;
      separateKib: number;
      loadMs: number;
      loadCpuMs: number;
      totalMs: number;
      totalCpuMs: number;
      loadRatio: number;
      loadCpuRatio: number;
      totalRatio: number;
      totalCpuRatio: number;
    }[] = [];
    try {
      const built = [];
      for (const fn of FUNCTIONS) {
        const shipped = await bundle(fn, 'shipped', join(out, fn.name, 'shipped'));
        const sdkExternal = await bundle(fn, 'sdkExternal', join(out, fn.name, 'sdk-external'), shipped.clients);
        built.push({ fn, clients: shipped.clients, shipped, sdkExternal });
      }
      // Round by round across the functions and both ways, so that a noisy spell of the machine falls on all alike.
      for (let round = 0; round < rounds; round++) {
        for (const b of built) {
          for (const variant of [b.shipped, b.sdkExternal])
            variant.loads.push(
              timeLoad(
                node,
                variant.hookFile,
                b.clients,
                variant.separate.map((f) => f.path),
              ),
            );
        }
      }
      for (const { fn, clients, shipped, sdkExternal } of built) {
        const packages = byPackage(shipped.metafile);
        const sdkBytes = packages.filter(([pkg]) => isSdk(pkg)).reduce((sum, [, bytes]) => sum + bytes, 0);
        const top = packages
          .slice(0, 5)
          .map(([pkg, size]) => `${pkg} ${fmt.kib(size)}`)
          .join(', ');
        const pick = (loads: readonly Load[], key: 'loadMs' | 'loadCpuMs' | 'totalMs' | 'totalCpuMs') =>
          loads.map((l) => l[key]);
        const step = (loads: readonly Load[], i: number) => median(loads.map((l) => l.steps[i] ?? 0));
        const stepNames = [...clients.map((p) => p.replace('@aws-sdk/', '')), ...shipped.separate.map((f) => f.file)];
        const separateBytes = shipped.separate.reduce((sum, f) => sum + f.bytes, 0);
        const ratio = (key: Parameters<typeof pick>[1]) =>
          median(pick(shipped.loads, key)) / median(pick(sdkExternal.loads, key));
        const [loadRatio, loadCpuRatio, totalRatio, totalCpuRatio] = [
          ratio('loadMs'),
          ratio('loadCpuMs'),
          ratio('totalMs'),
          ratio('totalCpuMs'),
        ];
        figures.push({
          name: fn.name,
          kib: shipped.bytes / 1024,
          sdkKib: sdkBytes / 1024,
          budget: fn.budgetKiB,
          separateKib: separateBytes / 1024,
          loadMs: median(pick(shipped.loads, 'loadMs')),
          loadCpuMs: median(pick(shipped.loads, 'loadCpuMs')),
          totalMs: median(pick(shipped.loads, 'totalMs')),
          totalCpuMs: median(pick(shipped.loads, 'totalCpuMs')),
          loadRatio,
          loadCpuRatio,
          totalRatio,
          totalCpuRatio,
        });
        rows.push(
          {
            label: `${fn.name}: bundle (index.js)`,
            value: `${fmt.kib(shipped.bytes)} (budget ${fn.budgetKiB} KiB), of which the AWS SDK ${fmt.kib(sdkBytes)}; largest: ${top}`,
          },
          ...shipped.separate.map((f) => ({
            label: `${fn.name}: separate file ${f.file}, loaded at first use`,
            value: `${fmt.kib(f.bytes)} (budget ${f.budgetKiB} KiB)`,
          })),
          {
            label: `${fn.name}: cold module load`,
            value: `${fmt.msSpread(pick(shipped.loads, 'loadMs'))}; CPU ${fmt.msSpread(pick(shipped.loads, 'loadCpuMs'))}`,
          },
          {
            label: `${fn.name}: first use of each client, then of each separate file, in turn (medians)`,
            value: stepNames.map((name, i) => `${name} +${step(shipped.loads, i).toFixed(0)} ms`).join(', '),
          },
          {
            label: `${fn.name}: module load + all of the above`,
            value: `${fmt.msSpread(pick(shipped.loads, 'totalMs'))}; CPU ${fmt.msSpread(pick(shipped.loads, 'totalCpuMs'))}`,
          },
          {
            label: `${fn.name}: the same with the SDK external, as before §22 (index.js ${fmt.kib(sdkExternal.bytes)})`,
            value: [
              `module load ${fmt.msSpread(pick(sdkExternal.loads, 'loadMs'))}, CPU ${fmt.msSpread(pick(sdkExternal.loads, 'loadCpuMs'))};`,
              `with all first uses ${fmt.msSpread(pick(sdkExternal.loads, 'totalMs'))}, CPU ${fmt.msSpread(pick(sdkExternal.loads, 'totalCpuMs'))};`,
              `shipped / external: module load ${fmt.ratio(loadRatio)} (CPU ${fmt.ratio(loadCpuRatio)}), with all first uses ${fmt.ratio(totalRatio)} (CPU ${fmt.ratio(totalCpuRatio)})`,
            ].join(' '),
          },
        );
      }
    } finally {
      await rm(out, { recursive: true, force: true });
    }
    const list = (values: readonly number[], digits = 0) => values.map((v) => v.toFixed(digits)).join(' / ');
    const within = (values: readonly number[], goal: number) =>
      `${values.filter((v) => v <= goal).length} of ${values.length}`;
    return {
      title: 'Function bundles: bytes and cold module load',
      description: [
        `Every function as the stack ships it: esbuild as the stack bundles (minified, node${LAMBDA_NODE_MAJOR} target, the AWS SDK clients it uses inside: decisions §22);`,
        'the synth test enforces the budgets. "Of which the AWS SDK" counts the @aws-sdk, @smithy and @aws-crypto modules in index.js.',
        `Timed with ${nodeVersion} (${lambdaMajor ? "the Lambda runtime's major, the assembly run's binary" : `not the Lambda runtime's major: ${lambdaNodeUnavailable()}`}), in a fresh process`,
        `per load, from inside it; median (min-max) of ${rounds}, wall and CPU; the functions and both ways take turns, one load each per round.`,
        'Cold module load: `require` of the bundle. No bundle runs an SDK client at load (each is required where its port is first used:',
        'src/compose/aws.ts), so its modules are parsed at load and run at first use. First use of a client: its modules run and a client is',
        "made (no request), in the order a first event meets them (the ledger's DynamoDB first, which also pays for the SDK's shared core),",
        "then each separate file (the sequencer's git engine at its first git call, open_pr's GitHub host at its first pull request), which",
        'carry their own Secrets Manager client. A path that never calls a client never pays for it. The load is timed on a copy bundled',
        'with a hook that reaches those modules from inside (the same modules, a few hundred bytes more).',
        'The last row of each function bundles it with the SDK external and resolved from node_modules, as the stack did before §22 (the',
        "runtime's own SDK stood in for it then): the ratios are what carrying the SDK costs a cold start, measured in the same run. A module",
        "load ratio above 1 with a total near 1 means the SDK's parsing moved from its first use (where the runtime's SDK was read file by",
        "file) into module load, not that it was added: every event's first step is a ledger call, so a first event pays both either way.",
        'The machine is shared with other work while this runs (see the load average above): absolute figures move with it, the ratios less.',
        '',
        'Command: `npm run bench bundles`',
      ].join('\n'),
      rows,
      summary: [
        {
          measure: `bundle (index.js), ${figures.map((f) => f.name).join(' / ')}`,
          value: `${list(figures.map((f) => f.kib))} KiB, of which the AWS SDK ${list(figures.map((f) => f.sdkKib))}; ${figures
            .filter((f) => f.separateKib > 0)
            .map((f) => `${f.name}'s separate files ${f.separateKib.toFixed(0)} KiB more`)
            .join('; ')}`,
          goal: `within the budgets (${figures.map((f) => f.budget).join(' / ')}); the earlier goals (sequencer <= 250, run_tests <= 120, open_pr <= 200 KiB) assumed the runtime's SDK and no longer hold (decisions §22)`,
        },
        {
          measure: `cold module load of a bundle, ${nodeVersion}: wall; CPU; CPU against the SDK external`,
          value: `${list(figures.map((f) => f.loadMs))} ms; CPU ${list(figures.map((f) => f.loadCpuMs))} ms; ${figures.map((f) => fmt.ratio(f.loadCpuRatio)).join(' / ')}; ${within(
            figures.map((f) => f.loadCpuMs),
            40,
          )} within the goal in CPU`,
          goal: '<= 40 ms each',
        },
        {
          measure:
            'module load + first use of every SDK client a bundle can call, and of its separate files: wall; CPU; CPU against the SDK external',
          value: `${list(figures.map((f) => f.totalMs))} ms; CPU ${list(figures.map((f) => f.totalCpuMs))} ms; ${figures.map((f) => fmt.ratio(f.totalCpuRatio)).join(' / ')}`,
          goal: 'the most a first event adds; a path loads only the clients it calls',
        },
      ],
    };
  },
};
