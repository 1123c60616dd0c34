/**
 * The deploy boundary in the tree (docs/design.md "Layout"): `npm run lint` runs dependency-cruiser
 * with .dependency-cruiser.cjs over the real tree. Here the same configuration meets a small tree
 * that breaks each rule once, so a rule that stopped matching would fail this test, not pass lint.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const DEPCRUISE = join(ROOT, 'node_modules', '.bin', 'depcruise');

/** Runs the repository's dependency rules over a tree made of `files` (path -> source). */
function cruise(files: Record<string, string>): { status: number | null; output: string } {
  const dir = mkdtempSync(join(tmpdir(), 'layout-'));
  try {
    copyFileSync(join(ROOT, '.dependency-cruiser.cjs'), join(dir, '.dependency-cruiser.cjs'));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true } }));
    for (const [file, source] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      writeFileSync(join(dir, file), source);
    }
    const run = spawnSync(
      DEPCRUISE,
      ['src', 'tools', 'lib', 'contract', 'bin', '--config', '.dependency-cruiser.cjs'],
      {
        cwd: dir,
        encoding: 'utf8',
      },
    );
    return { status: run.status, output: run.stdout + run.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const ALLOWED = {
  'contract/catalog.ts': 'export const TYPES = ["apply_patch"];\n',
  'src/core/rules.ts': 'import { TYPES } from "../../contract/catalog";\nexport const first = TYPES[0];\n',
  'lib/stack.ts':
    'import { TYPES } from "../contract/catalog";\nexport const entry = "src/core/rules.ts" + TYPES.length;\n',
  'tools/cli/main.ts': 'import { first } from "../../src/core/rules";\nexport const shown = first;\n',
  'bin/cli.ts': 'import { shown } from "../tools/cli/main";\nexport default shown;\n',
};

describe('the layout rules', () => {
  it('pass a tree where tools/ uses src/ and contract/, and lib/ only contract/', () => {
    const { status, output } = cruise(ALLOWED);
    expect(output).toContain('no dependency violations found');
    expect(status).toBe(0);
  });

  it('refuse each crossing: one tree that breaks every rule, each named with its file', () => {
    const { status, output } = cruise({
      ...ALLOWED,
      'src/core/view.ts': 'import { shown } from "../../tools/cli/main";\nexport const v = shown;\n',
      'lib/console.ts': 'import { shown } from "../tools/cli/main";\nexport const v = shown;\n',
      'contract/rules.ts': 'import { first } from "../src/core/rules";\nexport const v = first;\n',
      'lib/handler.ts': 'import { first } from "../src/core/rules";\nexport const v = first;\n',
    });
    expect(output).toContain('error aws-side-never-imports-tools: src/core/view.ts → tools/cli/main.ts');
    expect(output).toContain('error aws-side-never-imports-tools: lib/console.ts → tools/cli/main.ts');
    expect(output).toContain('error contract-imports-nothing-of-ours: contract/rules.ts → src/core/rules.ts');
    expect(output).toContain('error stack-bundles-src-never-imports-it: lib/handler.ts → src/core/rules.ts');
    expect(status).not.toBe(0);
  });
});
