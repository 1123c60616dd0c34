// @ts-check
/**
 * Rewrites a bundle's source map so that its `sources` are relative to the project root instead of
 * to the folder esbuild wrote the bundle in. That folder lies inside the cloud assembly, so with
 * the paths relative to it `cdk synth -o <elsewhere>` changed every source map, hence every asset
 * hash, and `cdk diff` showed code changes that were not there. On Lambda the map sits next to the
 * bundle in /var/task, so stack traces read /var/task/<path in the repository>.
 *
 * Plain CommonJS with no dependencies: the Worker construct runs it with node as an esbuild
 * after-bundling step (lib/constructs/worker.ts). esbuild has no option for this: its source paths
 * are always relative to the output file.
 *
 * Usage: node relocate-source-map.cjs <index.js.map> <project root>
 */
'use strict';
const { readFileSync, writeFileSync } = require('node:fs');
const path = require('node:path');

const [mapFile, projectRoot] = process.argv.slice(2);
if (!mapFile || !projectRoot) {
  process.stderr.write('usage: relocate-source-map.cjs <index.js.map> <project root>\n');
  process.exit(2);
}
const map = JSON.parse(readFileSync(mapFile, 'utf8'));
if (!Array.isArray(map.sources)) throw new Error(`${mapFile} has no sources array`);
const builtIn = path.dirname(path.resolve(mapFile));
map.sources = map.sources.map((/** @type {string} */ source) =>
  path.relative(projectRoot, path.resolve(builtIn, source)).split(path.sep).join('/'),
);
writeFileSync(mapFile, JSON.stringify(map));
