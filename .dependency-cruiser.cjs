// No import cycle in the code that ships (src/, lib/, contract/, bin/), type-only imports included:
// through `import type` too, each module of a cycle needs the others to be read. Checked by
// test/unit/import-cycles.test.ts with dependency-cruiser rather than by eslint-plugin-import-x's
// no-cycle: that rule skips type-only imports, and so passes every cycle the tree had.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [{ name: 'no-circular', severity: 'error', from: {}, to: { circular: true } }],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};
