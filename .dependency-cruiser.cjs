// The tree's two halves and its cycles, checked by `npm run lint` (and so `npm test`) after eslint.
// What ships to AWS (src/, contract/, lib/) never imports what runs on a person's machine (tools/):
// docs/design.md "Layout". Cycles count type-only imports too: through `import type`, each module of
// a cycle needs the others to be read (eslint-plugin-import-x's no-cycle skips them, and so passed
// the three cycles the tree once had).
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', from: {}, to: { circular: true } },
    {
      name: 'aws-side-never-imports-tools',
      comment:
        'src/, contract/ and lib/ ship to AWS: the local platform, CLI, console, MCP server and read model stay out',
      severity: 'error',
      from: { path: '^(src|contract|lib)/' },
      to: { path: '^tools/' },
    },
    {
      name: 'contract-imports-nothing-of-ours',
      comment: 'contract/ is what both sides agree on: it imports neither side',
      severity: 'error',
      from: { path: '^contract/' },
      to: { path: '^(src|tools|lib|bin)/' },
    },
    {
      name: 'stack-bundles-src-never-imports-it',
      comment: 'lib/ (the CDK app) reaches the functions by path, for esbuild: synth loads none of their code',
      severity: 'error',
      from: { path: '^lib/' },
      to: { path: '^src/' },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};
