#!/usr/bin/env node
// The package.json bin. No build step: the CLI runs from a bundle made on first use and after any
// change (bin/cli-bundle.js), or, when one cannot be made, from the sources through tsx.
// AGENT_JOBS_CLI_BUNDLE=0 runs the sources through tsx always.
'use strict';
const bundle = process.env.AGENT_JOBS_CLI_BUNDLE === '0' ? undefined : require('./cli-bundle.js').cliBundle();
if (bundle !== undefined) {
  // The source map costs a read at load: only a --verbose stack trace needs the TypeScript lines.
  if (process.argv.includes('--verbose')) process.setSourceMapsEnabled(true);
  require(bundle);
} else {
  require('tsx/cjs');
  require('./cli.ts');
}
