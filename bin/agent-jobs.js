#!/usr/bin/env node
// The package.json bin: runs the TypeScript CLI through tsx (a runtime dependency), no build step.
'use strict';
require('tsx/cjs');
require('../src/local/quiet-warnings.ts').quietKnownWarnings();
require('./cli.ts');
