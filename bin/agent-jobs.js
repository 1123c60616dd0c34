#!/usr/bin/env node
// The package.json bin. No build step: the CLI runs from a bundle made on first use and after any
// change (bin/cli-bundle.js), or, when one cannot be made, from the sources through tsx.
// AGENT_JOBS_CLI_BUNDLE=0 runs the sources through tsx always.
'use strict';
const cli = process.env.AGENT_JOBS_CLI_BUNDLE === '0' ? undefined : require('./cli-bundle.js');
const bundles = cli?.cliBundle();
if (bundles !== undefined && process.argv.includes('--verbose')) {
  // The source map costs a read at load: only a --verbose stack trace needs the TypeScript lines,
  // which node maps for a module it loads itself, not for the code-cached script of runBundle.
  // Its SDK packages then load from node_modules.
  process.setSourceMapsEnabled(true);
  cli.resolvePartsOf(bundles);
  require(bundles.file);
} else if (bundles !== undefined) {
  cli.runBundle(bundles, process.argv[2]);
} else {
  require('tsx/cjs');
  require('./cli.ts');
}
