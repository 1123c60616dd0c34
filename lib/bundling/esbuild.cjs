// @ts-check
/**
 * Runs esbuild's build with the options given as one JSON argument: how the Worker construct
 * (lib/constructs/worker.ts) bundles a function's separate files after the index.js that CDK's
 * NodejsFunction makes, with the same options as the stack's own bundling. NodejsFunction builds
 * one entry per function; esbuild's command line would need every option spelt as a flag.
 *
 * Usage: node esbuild.cjs '<build options as JSON>'
 */
'use strict';
const { buildSync } = require('esbuild');

const [json] = process.argv.slice(2);
if (!json) {
  process.stderr.write("usage: esbuild.cjs '<build options as JSON>'\n");
  process.exit(2);
}
buildSync(JSON.parse(json));
