'use strict';
/**
 * How the CLI starts fast without a build step. Its TypeScript sources run from one CommonJS
 * bundle that esbuild makes on first use, under node_modules/.cache/agent-jobs/ (so `npm ci`
 * starts afresh), and makes again whenever one of the files it was made from changes. Running the
 * sources through tsx instead cost most of a call's time: tsx's resolver and transpiler cache,
 * and the garbage they leave, before the command does anything.
 *
 * Packages stay outside the bundle and load from node_modules when a command first needs them,
 * except two, bundled and minified:
 * - zod: as a package it loads every one of its locales; bundled, the unused ones drop out.
 * - The AWS SDK (the @aws-sdk packages the CLI depends on, with the @smithy packages they use):
 *   from node_modules, a client was resolved and compiled file by file at every call (the
 *   DynamoDB client alone was most of `status`); in the bundle its code is in the V8 code cache
 *   (runBundle). Each client still runs only when a command first uses it: the CLI requires them
 *   at the point of use, and esbuild keeps such a module unevaluated until then.
 *
 * Freshness: the manifest lists every input with its size and modification time; a start
 * compares them (a few stat calls) and rebuilds on any difference. The files of bundled packages
 * count as one input, npm's record of what node_modules holds (node_modules/.package-lock.json,
 * rewritten by every install), instead of about 700 stat calls per start. Builds write new files
 * and replace the manifest by rename, so concurrent starts never read half a bundle.
 *
 * Plain JavaScript: it runs before any TypeScript can.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const ENTRY = path.join(__dirname, 'cli.ts');
const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'agent-jobs');
const MANIFEST = path.join(CACHE_DIR, 'cli.json');
const bundledPackage = (name) => name === 'zod' || name.startsWith('@aws-sdk/');
/** What npm installed: stands for every file of node_modules in the manifest (see the header). */
const INSTALLED = path.join(ROOT, 'node_modules', '.package-lock.json');
/** Files that shape the output besides the sources esbuild reports: this file and the settings it reads. */
const SETTINGS = [__filename, path.join(ROOT, 'package.json'), path.join(ROOT, 'tsconfig.json')];
/** Bundles older than this, other than the current one, are removed by the next build. */
const STALE_BUNDLE_MS = 60_000;

function fingerprint(file) {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  return stat ? `${stat.size}:${stat.mtimeMs}` : 'missing';
}

/** The current bundle's path, or undefined when there is none or an input changed since it was made. */
function freshBundle() {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof manifest.bundle !== 'string' || typeof manifest.inputs !== 'object' || manifest.inputs === null) return undefined;
  for (const [file, print] of Object.entries(manifest.inputs)) {
    if (fingerprint(path.resolve(ROOT, file)) !== print) return undefined;
  }
  const bundle = path.join(CACHE_DIR, manifest.bundle);
  return fs.existsSync(bundle) ? bundle : undefined;
}

/** Bundles the CLI and records its inputs; returns the bundle's path. Throws when esbuild cannot. */
function build() {
  const esbuild = require('esbuild');
  const manifestJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const packages = Object.keys({ ...manifestJson.dependencies, ...manifestJson.devDependencies });
  const name = `cli-${process.pid}-${Date.now()}.cjs`;
  const started = Date.now();
  const result = esbuild.buildSync({
    absWorkingDir: ROOT,
    entryPoints: [ENTRY],
    outfile: path.join(CACHE_DIR, name),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${process.versions.node.split('.')[0]}`,
    // A package name also covers its subpaths (`@aws-sdk/client-sqs`, `zod/mini`).
    external: packages.filter((p) => !bundledPackage(p)),
    minify: true,
    // Read only with --verbose (bin/agent-jobs.js), so stack traces name the TypeScript files.
    sourcemap: 'linked',
    // The map names the files; their text is in the repository (a map five times the bundle otherwise).
    sourcesContent: false,
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  for (const file of result.outputFiles) fs.writeFileSync(file.path, file.contents);
  const inputs = {};
  const installed = fs.existsSync(INSTALLED);
  const sources = Object.keys(result.metafile.inputs).filter((f) => !(installed && f.startsWith('node_modules/')));
  for (const file of [...sources.map((f) => path.resolve(ROOT, f)), ...SETTINGS, ...(installed ? [INSTALLED] : [])]) {
    // Edited while the build ran: maybe not what was bundled, so the next start builds again.
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    inputs[path.relative(ROOT, file)] = stat && stat.mtimeMs >= started ? 'changed during the build' : fingerprint(file);
  }
  const temporary = `${MANIFEST}.${process.pid}`;
  fs.writeFileSync(temporary, JSON.stringify({ bundle: name, esbuild: esbuild.version, inputs }));
  fs.renameSync(temporary, MANIFEST);
  removeOldBundles(name);
  return path.join(CACHE_DIR, name);
}

/** Earlier bundles, once no start can still be about to load them. */
function removeOldBundles(current) {
  for (const file of fs.readdirSync(CACHE_DIR)) {
    if (!file.startsWith('cli-') || file.startsWith(current)) continue;
    const full = path.join(CACHE_DIR, file);
    const stat = fs.statSync(full, { throwIfNoEntry: false });
    if (stat && Date.now() - stat.mtimeMs > STALE_BUNDLE_MS) fs.rmSync(full, { force: true });
  }
}

/**
 * The bundle to run, made now if needed; undefined when it cannot be made (esbuild missing, a
 * source that does not compile, a read-only node_modules): the caller then runs the sources
 * through tsx, which reports a compile error with its file and line.
 */
function cliBundle() {
  try {
    return freshBundle() ?? build();
  } catch {
    return undefined;
  }
}

/**
 * Runs the bundle as require() would, with a V8 code cache: compiling the bundle's functions (the
 * SDK client's among them) was a large part of a call. A command's cache is made when its first
 * run exits, so it holds what that command compiled (`status` and `enqueue` run different code);
 * V8 refuses a cache made from other source or by another V8, and that run writes a new one. The
 * caches sit beside their bundle and are removed with it (removeOldBundles).
 * AGENT_JOBS_CLI_CODE_CACHE=0 runs without (the comparison in the CLI latency benchmark).
 */
function runBundle(bundle, command) {
  const vm = require('node:vm');
  const Module = require('node:module');
  const useCache = process.env.AGENT_JOBS_CLI_CODE_CACHE !== '0';
  const cacheFile = `${bundle}.${/^[a-z][a-z-]*$/.test(command ?? '') ? command : 'other'}.v8-cache`;
  let cachedData;
  try {
    cachedData = useCache ? fs.readFileSync(cacheFile) : undefined;
  } catch {
    cachedData = undefined;
  }
  const script = new vm.Script(Module.wrap(fs.readFileSync(bundle, 'utf8')), { filename: bundle, cachedData });
  if (useCache && (cachedData === undefined || script.cachedDataRejected)) {
    process.once('exit', () => {
      try {
        const temporary = `${cacheFile}.${process.pid}`;
        fs.writeFileSync(temporary, script.createCachedData());
        fs.renameSync(temporary, cacheFile);
      } catch {
        // A read-only node_modules: every call compiles, as without a cache.
      }
    });
  }
  // The bundle requires only node's modules and packages, which its require (from its own path) resolves.
  const module = new Module(bundle, null);
  module.filename = bundle;
  script.runInThisContext().call(module.exports, module.exports, Module.createRequire(bundle), module, bundle, path.dirname(bundle));
}

module.exports = { cliBundle, runBundle, CACHE_DIR };
