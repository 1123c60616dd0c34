'use strict';
/**
 * How the CLI starts fast without a build step. Its TypeScript sources run from a CommonJS bundle
 * that esbuild makes on first use, under node_modules/.cache/agent-jobs/ (so `npm ci` starts
 * afresh), and makes again whenever one of the files it was made from changes. Running the
 * sources through tsx instead cost most of a call's time: tsx's resolver and transpiler cache,
 * and the garbage they leave, before the command does anything.
 *
 * Packages stay outside the bundle and load from node_modules when a command first needs them,
 * except two, bundled and minified:
 * - zod, in the CLI's bundle: as a package it loads every one of its locales; bundled, the unused
 *   ones drop out.
 * - The AWS SDK (the @aws-sdk packages the CLI requires, with the @smithy packages they use), in
 *   bundles of their own: from node_modules, a client was resolved and compiled file by file at
 *   every call (the DynamoDB client alone was most of `status`). One bundle holds every package;
 *   a smaller one holds the DynamoDB packages alone, all that the job commands (`status`, `jobs`,
 *   `wait`) use, so they read and compile 0.8 MB instead of 1.4 (SDK_GROUPS). A package comes
 *   from a smaller bundle that holds it once that is loaded, or while the full one is not, and
 *   from the full one otherwise. A bundle loads at the first require of one of its packages, and
 *   the CLI requires each client where it uses it: `--version` loads none.
 *
 * Parts that only some commands use are bundles of their own too (PARTS): the web console's server
 * and pages, which `console` and `local up` load, and the MCP server (with the MCP SDK it requires
 * from node_modules), which `mcp` loads, so no other command reads or compiles them. The
 * CLI's code requires such a part by its relative path, which the CLI's bundle keeps as written
 * and runBundle serves from the part's bundle (the part requires the SDK through the CLI's
 * require, so there is one copy of each SDK package per process). A part carries its own copy of
 * the modules it shares with the CLI: it takes plain values across (a state directory, not a
 * connection), so no object of one copy meets a class of the other.
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
/** Bundled into the CLI's own bundle. The SDK's packages have bundles of their own (see the header). */
const bundledPackage = (name) => name === 'zod';
const sdkPackage = (name) => name.startsWith('@aws-sdk/');
/** The full SDK bundle's group name. */
const FULL_SDK = 'sdk';
/** The smaller SDK bundles, by group name: the packages each holds. */
const SDK_GROUPS = { 'sdk-dynamodb': ['@aws-sdk/client-dynamodb', '@aws-sdk/lib-dynamodb', '@aws-sdk/util-dynamodb'] };
/** Bundled apart, by the path the CLI's sources require them with (relative to tools/cli/commands): the file of each. */
const PARTS = { '../../console/server': 'tools/console/server.ts', '../../mcp/server': 'tools/mcp/server.ts' };
/** What npm installed: stands for every file of node_modules in the manifest (see the header). */
const INSTALLED = path.join(ROOT, 'node_modules', '.package-lock.json');
/** Files that shape the output besides the sources esbuild reports: this file and the settings it reads. */
const SETTINGS = [__filename, path.join(ROOT, 'package.json'), path.join(ROOT, 'tsconfig.json')];
/** Bundles older than this, other than the current ones, are removed by the next build. */
const STALE_BUNDLE_MS = 60_000;

function fingerprint(file) {
  const stat = fs.statSync(file, { throwIfNoEntry: false });
  return stat ? `${stat.size}:${stat.mtimeMs}` : 'missing';
}

/**
 * The bundles to run: `file`, the CLI's (absolute path); `sdk`, the SDK's by group (`{ file,
 * packages }`, file names in CACHE_DIR); `encodings`, how each file is read (by file name).
 */
function bundlesOf(manifest) {
  return {
    file: path.join(CACHE_DIR, manifest.bundle),
    sdk: manifest.sdk,
    parts: manifest.parts ?? {},
    encodings: manifest.encodings,
  };
}

/** The current bundles, or undefined when there are none or an input changed since they were made. */
function freshBundles() {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(MANIFEST, 'utf8'));
  } catch {
    return undefined;
  }
  if (
    typeof manifest.bundle !== 'string' ||
    typeof manifest.sdk?.[FULL_SDK] !== 'object' ||
    typeof manifest.parts !== 'object'
  )
    return undefined;
  if (typeof manifest.inputs !== 'object' || manifest.inputs === null) return undefined;
  for (const [file, print] of Object.entries(manifest.inputs)) {
    if (fingerprint(path.resolve(ROOT, file)) !== print) return undefined;
  }
  return fs.existsSync(path.join(CACHE_DIR, manifest.bundle)) ? bundlesOf(manifest) : undefined;
}

/**
 * How a bundle is read: as Latin-1 when it is ASCII only, as esbuild writes it (it escapes every
 * other character), which node turns into a string by a copy; as UTF-8 otherwise, a decode of
 * every byte (15 ms for the CLI's bundle here).
 */
const encodingOf = (contents) => (contents.every((byte) => byte < 0x80) ? 'latin1' : 'utf8');

/** Bundles the CLI and the SDK packages it requires, and records their inputs; returns the bundles (bundlesOf). Throws when esbuild cannot. */
function build() {
  const esbuild = require('esbuild');
  const manifestJson = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
  const packages = Object.keys({ ...manifestJson.dependencies, ...manifestJson.devDependencies });
  const name = `cli-${process.pid}-${Date.now()}`;
  const started = Date.now();
  const options = {
    absWorkingDir: ROOT,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${process.versions.node.split('.')[0]}`,
    minify: true,
    metafile: true,
    write: false,
    logLevel: 'silent',
  };
  // A package name also covers its subpaths (`@aws-sdk/client-sqs`, `zod/mini`).
  const external = packages.filter((p) => !bundledPackage(p));
  const code = {
    ...options,
    external,
    // Read only with --verbose (bin/agent-jobs.js), so stack traces name the TypeScript files.
    sourcemap: 'linked',
    // The map names the files; their text is in the repository (a map five times the bundle otherwise).
    sourcesContent: false,
  };
  const cli = esbuild.buildSync({
    ...code,
    entryPoints: [ENTRY],
    outfile: path.join(CACHE_DIR, `${name}.cjs`),
    external: [...external, ...Object.keys(PARTS).map((p) => `*/${path.posix.basename(p)}`)],
  });
  const parts = {};
  const partBuilds = Object.entries(PARTS).map(([id, entry], index) => {
    const file = `${name}.part${index}.cjs`;
    parts[id] = file;
    return esbuild.buildSync({ ...code, entryPoints: [path.join(ROOT, entry)], outfile: path.join(CACHE_DIR, file) });
  });
  const required = [cli, ...partBuilds].flatMap((b) =>
    Object.values(b.metafile.inputs).flatMap((input) =>
      input.imports.filter((i) => i.external && !(i.path in PARTS)).map((i) => i.path),
    ),
  );
  const groups = { [FULL_SDK]: [...new Set(required.filter(sdkPackage))].sort(), ...SDK_GROUPS };
  const sdk = {};
  const builds = [cli, ...partBuilds];
  for (const [group, members] of Object.entries(groups)) {
    const file = `${name}.${group}.cjs`;
    // A getter per package: a bundle evaluates only the packages required of it.
    const entry = `module.exports = {${members.map((p) => `get ${JSON.stringify(p)}() { return require(${JSON.stringify(p)}); }`).join(',')}};`;
    builds.push(
      esbuild.buildSync({
        ...options,
        stdin: { contents: entry, resolveDir: ROOT, loader: 'js' },
        outfile: path.join(CACHE_DIR, file),
      }),
    );
    sdk[group] = { file, packages: members };
  }
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  const encodings = {};
  for (const file of builds.flatMap((b) => b.outputFiles)) {
    fs.writeFileSync(file.path, file.contents);
    encodings[path.basename(file.path)] = encodingOf(file.contents);
  }
  const inputs = {};
  const installed = fs.existsSync(INSTALLED);
  const bundled = new Set(builds.flatMap((b) => Object.keys(b.metafile.inputs)));
  const sources = [...bundled].filter((f) => f !== '<stdin>' && !(installed && f.startsWith('node_modules/')));
  for (const file of [...sources.map((f) => path.resolve(ROOT, f)), ...SETTINGS, ...(installed ? [INSTALLED] : [])]) {
    // Edited while the build ran: maybe not what was bundled, so the next start builds again.
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    inputs[path.relative(ROOT, file)] =
      stat && stat.mtimeMs >= started ? 'changed during the build' : fingerprint(file);
  }
  const manifest = { bundle: `${name}.cjs`, sdk, parts, encodings, esbuild: esbuild.version, inputs };
  const temporary = `${MANIFEST}.${process.pid}`;
  fs.writeFileSync(temporary, JSON.stringify(manifest));
  fs.renameSync(temporary, MANIFEST);
  removeOldBundles(name);
  return bundlesOf(manifest);
}

/** Earlier bundles, once no start can still be about to load them. */
function removeOldBundles(current) {
  for (const file of fs.readdirSync(CACHE_DIR)) {
    if (!file.startsWith('cli-') || file.startsWith(`${current}.`)) continue;
    const full = path.join(CACHE_DIR, file);
    const stat = fs.statSync(full, { throwIfNoEntry: false });
    if (stat && Date.now() - stat.mtimeMs > STALE_BUNDLE_MS) fs.rmSync(full, { force: true });
  }
}

/**
 * The bundles to run (bundlesOf), made now if needed; undefined when they cannot be made (esbuild
 * missing, a source that does not compile, a read-only node_modules): the caller then runs the
 * sources through tsx, which reports a compile error with its file and line.
 */
function cliBundle() {
  try {
    return freshBundles() ?? build();
  } catch {
    return undefined;
  }
}

/**
 * Runs the CLI's bundle as require() would, and each SDK bundle when the CLI first requires one
 * of its packages, with a V8 code cache: compiling the bundles' functions (the SDK client's among
 * them) was a large part of a call. A command's cache of a bundle is made when its first run
 * exits, so it holds what that command compiled (`status` and `enqueue` run different code); V8
 * refuses a cache made from other source or by another V8, and that run writes a new one. The
 * caches sit beside their bundle and are removed with it (removeOldBundles).
 * AGENT_JOBS_CLI_CODE_CACHE=0 runs without (the comparison in the CLI latency benchmark).
 */
function runBundle(bundles, command) {
  const vm = require('node:vm');
  const Module = require('node:module');
  const useCache = process.env.AGENT_JOBS_CLI_CODE_CACHE !== '0';
  const cacheName = /^[a-z][a-z-]*$/.test(command ?? '') ? command : 'other';
  // Node's modules and other packages resolve from the bundles' directory, as there.
  const requireInstalled = Module.createRequire(bundles.file);

  /** Evaluates one bundle with `require` as its require; returns its exports. */
  function run(file, require) {
    const cacheFile = `${file}.${cacheName}.v8-cache`;
    let cachedData;
    try {
      cachedData = useCache ? fs.readFileSync(cacheFile) : undefined;
    } catch {
      cachedData = undefined;
    }
    const source = fs.readFileSync(file, bundles.encodings?.[path.basename(file)] ?? 'utf8');
    const script = new vm.Script(Module.wrap(source), { filename: file, cachedData });
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
    const module = new Module(file, null);
    module.filename = file;
    script.runInThisContext().call(module.exports, module.exports, require, module, file, path.dirname(file));
    return module.exports;
  }

  // A package of a smaller bundle comes from it once it is loaded, or while the full one is not:
  // the packages of one group (the DynamoDB client and its document client) always come from one
  // copy, so no object of one copy meets a class of the other.
  const loaded = {};
  const groupOf = (id) => {
    const smaller = Object.keys(bundles.sdk).find(
      (group) => group !== FULL_SDK && bundles.sdk[group].packages.includes(id),
    );
    return smaller !== undefined && (loaded[smaller] !== undefined || loaded[FULL_SDK] === undefined)
      ? smaller
      : FULL_SDK;
  };
  const requireFromCli = (id) => {
    if (bundles.parts[id] !== undefined)
      return (loaded[id] ??= run(path.join(CACHE_DIR, bundles.parts[id]), requireFromCli));
    if (!bundles.sdk[FULL_SDK].packages.includes(id)) return requireInstalled(id);
    const group = groupOf(id);
    loaded[group] ??= run(path.join(CACHE_DIR, bundles.sdk[group].file), requireInstalled);
    return loaded[group][id];
  };
  run(
    bundles.file,
    Object.assign(requireFromCli, { resolve: requireInstalled.resolve, cache: requireInstalled.cache }),
  );
}

/**
 * For a plain require of the CLI's bundle (`--verbose`, bin/agent-jobs.js): node resolves a part's
 * path, kept as written in the bundle, to the part's bundle.
 */
function resolvePartsOf(bundles) {
  const Module = require('node:module');
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, ...rest) {
    const part = bundles.parts[request];
    return part === undefined ? resolve.call(this, request, ...rest) : path.join(CACHE_DIR, part);
  };
}

module.exports = { cliBundle, runBundle, resolvePartsOf, CACHE_DIR };
