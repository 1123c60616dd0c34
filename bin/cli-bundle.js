'use strict';
/**
 * How the CLI starts fast without a build step. Its TypeScript sources run from one CommonJS
 * bundle that esbuild makes on first use, under node_modules/.cache/agent-jobs/ (so `npm ci`
 * starts afresh), and makes again whenever one of the files it was made from changes. Running the
 * sources through tsx instead cost most of a call's time: tsx's resolver and transpiler cache,
 * and the garbage they leave, before the command does anything.
 *
 * Packages stay outside the bundle and load from node_modules when a command first needs them
 * (the SDK clients are required at the point of use), except zod: bundled, its unused locales
 * drop out, where the package loads every one of them.
 *
 * Freshness: the manifest lists every input with its size and modification time; a start
 * compares them (a few stat calls) and rebuilds on any difference. Builds write new files and
 * replace the manifest by rename, so concurrent starts never read half a bundle.
 *
 * Plain JavaScript: it runs before any TypeScript can.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const ENTRY = path.join(__dirname, 'cli.ts');
const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'agent-jobs');
const MANIFEST = path.join(CACHE_DIR, 'cli.json');
const BUNDLED_PACKAGES = ['zod'];
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
    external: packages.filter((p) => !BUNDLED_PACKAGES.includes(p)),
    // Read only with --verbose (bin/agent-jobs.js), so stack traces name the TypeScript files.
    sourcemap: 'linked',
    metafile: true,
    write: false,
    logLevel: 'silent',
  });
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  for (const file of result.outputFiles) fs.writeFileSync(file.path, file.contents);
  const inputs = {};
  for (const file of [...Object.keys(result.metafile.inputs).map((f) => path.resolve(ROOT, f)), ...SETTINGS]) {
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

module.exports = { cliBundle, CACHE_DIR };
