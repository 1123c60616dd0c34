#!/usr/bin/env node
// The package.json bin: runs the TypeScript CLI through tsx (a runtime dependency), no build step.
'use strict';

// Two warnings are known and not actionable by a CLI user, so they are kept off stderr: the AWS
// SDK's notice that future SDK releases need Node 22 (the lockfile pins this one), and the
// experimental-loader notice for how fauxqs (ESM only) is loaded. Every other warning still prints.
const QUIET = [/^NodeVersionSupportWarning/, /USE_MAIN_CONTEXT_DEFAULT_LOADER/];
process.removeAllListeners('warning');
process.on('warning', (warning) => {
  if (QUIET.some((pattern) => pattern.test(warning.message) || pattern.test(warning.name))) return;
  process.stderr.write(`${warning.name}: ${warning.message}\n`);
});

require('tsx/cjs');
require('./cli.ts');
