/**
 * A fork's first declaration must not turn the tests red. This lane (`npm run test:fork`) copies
 * the repository into a temporary directory, adds one command stage to contract/job-types.ts the
 * way the README's Customize section shows it (the section's own code block, renamed), then
 * type-checks the copy, regenerates its JSON Schemas (`npm run schema`), its bill (`npm run bill`)
 * and its reference pages (`npm run docs`), and runs its jest suites.
 * It passes when the only failing test is the stack snapshot (which a fork updates with
 * `npm run test:snapshot`), and when that one did fail: a snapshot that still matched would mean
 * the declaration never reached the stack.
 *
 * Extra arguments go to jest (`npm run test:fork -- test` runs every suite); without any, the
 * suites that spell out what the catalog holds: synth and unit, and the integration and end-to-end
 * suites that go through every stage of the catalog.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
export const FORK_JOB_TYPE = 'run_format';
export const SNAPSHOT_TEST = 'matches the snapshot (after a deliberate change, npm run test:snapshot updates it)';
const DEFAULT_SUITES = [
  'test/unit',
  'test/infra',
  'test/integration/catalog-extension-local.test.ts',
  'test/e2e/command-stages.test.ts',
];

/** The README's example declaration (Customize, "A command stage: one declaration"), as a new stage. */
export function forkDeclaration(readme: string): string {
  const section = readme.split('### A command stage: one declaration')[1];
  const block = section?.match(/```ts\n([\s\S]*?)```/)?.[1];
  if (!block || !block.includes('run_lint: commandStage('))
    throw new Error('README.md: no run_lint declaration under "A command stage: one declaration"');
  return block
    .replaceAll('run_lint', FORK_JOB_TYPE)
    .replaceAll('run-lint', 'run-format')
    .replace("subject: 'lint'", "subject: 'format check'")
    .replace('DEFAULT_LINT_COMMAND', "'npx prettier --check .'")
    .replace("the workspace's linter", "the workspace's format check");
}

/** contract/job-types.ts with the declaration added to JOB_TYPES (indented as an entry), before open_pr. */
export function withDeclaration(catalogSource: string, declaration: string): string {
  const anchor = '\n  open_pr: {';
  if (!catalogSource.includes(anchor)) throw new Error('contract/job-types.ts: no open_pr entry to insert before');
  const entry = declaration
    .trimEnd()
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
  return catalogSource.replace(anchor, `\n${entry}${anchor}`);
}

/**
 * A copy of the working tree (tracked and new files, not ignored ones). node_modules is hard-linked
 * (`cp -al`: no copy of its bytes, and paths inside the fork, as the bundling checks expect), without
 * its cache: the CLI's bundles of the fork's sources are the fork's own.
 */
function copyRepository(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'agent-jobs-fork-'));
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    if (!existsSync(path.join(ROOT, file))) continue; // deleted in the working tree
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    copyFileSync(path.join(ROOT, file), path.join(dir, file));
  }
  execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules')]);
  rmSync(path.join(dir, 'node_modules', '.cache'), { recursive: true, force: true });
  return dir;
}

interface JestReport {
  numFailedTests: number;
  testResults: Array<{ name: string; message: string; assertionResults: Array<{ fullName: string; status: string }> }>;
}

function main(): number {
  const dir = copyRepository();
  try {
    const catalog = path.join(dir, 'contract', 'job-types.ts');
    writeFileSync(
      catalog,
      withDeclaration(
        readFileSync(catalog, 'utf8'),
        forkDeclaration(readFileSync(path.join(ROOT, 'README.md'), 'utf8')),
      ),
    );
    process.stdout.write(`fork at ${dir}: ${FORK_JOB_TYPE} declared in contract/job-types.ts\n`);

    const tsc = spawnSync('npx', ['tsc', '--noEmit'], { cwd: dir, stdio: 'inherit' });
    if (tsc.status !== 0) return fail('the fork does not type-check');
    // The README's block pasted as it is keeps `npm run lint` green: it is already in Prettier's shape.
    const format = spawnSync('npx', ['prettier', '--check', catalog], { cwd: dir, stdio: 'inherit' });
    if (format.status !== 0) return fail("the README's declaration is not in Prettier's shape");
    // The wire contract's JSON Schemas are made from the catalog: a fork regenerates them, as the
    // README's Customize section says, and the drift test then holds them to the new catalog.
    const schema = spawnSync('npm', ['run', '--silent', 'schema'], { cwd: dir, stdio: 'inherit' });
    if (schema.status !== 0) return fail('npm run schema failed in the fork');
    // SCALE.md's bill counts the template's alarms: a fork's new stage adds its own, and the README
    // tells the fork to write the bill again, as it does the schemas.
    const bill = spawnSync('npm', ['run', '--silent', 'bill'], { cwd: dir, stdio: 'inherit' });
    if (bill.status !== 0) return fail('npm run bill failed in the fork');
    // The reference pages name every job type (the CLI's help, the settings, the schemas): after
    // the schemas, which the events page is made from.
    const docs = spawnSync('npm', ['run', '--silent', 'docs'], { cwd: dir, stdio: 'inherit' });
    if (docs.status !== 0) return fail('npm run docs failed in the fork');

    const suites = process.argv.slice(2);
    const report = path.join(dir, 'jest-report.json');
    spawnSync(
      'npx',
      ['jest', '--ci', '--json', `--outputFile=${report}`, ...(suites.length ? suites : DEFAULT_SUITES)],
      {
        cwd: dir,
        stdio: 'inherit',
      },
    );
    if (!existsSync(report)) return fail('jest wrote no report');
    const { testResults } = JSON.parse(readFileSync(report, 'utf8')) as JestReport;
    const failed = testResults.flatMap((suite) => {
      const file = path.relative(dir, suite.name);
      const tests = suite.assertionResults.filter((a) => a.status === 'failed').map((a) => `${file}: ${a.fullName}`);
      // A suite that failed to run at all has no failed test to name.
      return tests.length || !suite.message ? tests : [`${file}: ${suite.message.split('\n')[0]}`];
    });
    const snapshot = `test/infra/stack.test.ts: ${SNAPSHOT_TEST}`;
    const others = failed.filter((name) => name !== snapshot);
    if (others.length)
      return fail(`a catalog with one more stage fails more than the snapshot:\n  ${others.join('\n  ')}`);
    if (
      (suites.length === 0 || suites.some((s) => 'test/infra/stack.test.ts'.startsWith(s))) &&
      !failed.includes(snapshot)
    )
      return fail('the stack snapshot still matches: the declaration did not reach the stack');
    process.stdout.write(
      `fork lane passed: ${FORK_JOB_TYPE} declared, only the stack snapshot differs (a fork updates it with npm run test:snapshot)\n`,
    );
    return 0;
  } finally {
    if (!process.env.AGENT_JOBS_KEEP_FORK) rmSync(dir, { recursive: true, force: true });
  }
}

function fail(message: string): number {
  process.stderr.write(`fork lane failed: ${message}\n`);
  return 1;
}

if (require.main === module) process.exitCode = main();
