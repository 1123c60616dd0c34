#!/usr/bin/env node
// The package.json bin. No build step: the CLI runs from a bundle made on first use and after any
// change (bin/cli-bundle.js), or, when one cannot be made, from the sources through tsx.
// AGENT_JOBS_CLI_BUNDLE=0 runs the sources through tsx always.
'use strict';
const cli = process.env.AGENT_JOBS_CLI_BUNDLE === '0' ? undefined : require('./cli-bundle.js');
const bundle = cli?.cliBundle();
if (bundle !== undefined && process.argv.includes('--verbose')) {
  // The source map costs a read at load: only a --verbose stack trace needs the TypeScript lines,
  // which node maps for a module it loads itself, not for the code-cached script of runBundle.
  process.setSourceMapsEnabled(true);
  require(bundle);
} else if (bundle !== undefined) {
  cli.runBundle(bundle, process.argv[2]);
} else {
  require('tsx/cjs');
  require('./cli.ts');
}
