// No import cycle in the code that ships (src/, lib/, contract/, bin/), type-only imports included:
// through `import type` too, each module of a cycle needs the others to be read. `npm run lint`
// (and so `npm test`) runs it after eslint. dependency-cruiser, not eslint-plugin-import-x's
// no-cycle rule: that rule skips type-only imports, and so passed the three cycles the tree had.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [{ name: 'no-circular', severity: 'error', from: {}, to: { circular: true } }],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};
