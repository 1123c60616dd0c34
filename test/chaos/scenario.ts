/**
 * The chaos run's traffic, from the seed: workspaces on a few repositories (one branch each), and
 * per workspace a sequence of jobs as an agent sends them: real `git diff` patches made one on
 * top of the other with the git CLI, test runs, pull requests, and mixed in: hostile patches (the
 * workspace must fence), poison messages (the DLQ, nothing else), a job id reused for other work
 * (CONFLICT), jobs cancelled before they are sent, and late duplicates.
 */
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import type { JobEnvelope } from '../../src/core/envelope';
import { git } from '../support/git-fixtures';
import { Random } from './random';

export type ItemKind = 'apply_patch' | 'hostile_patch' | 'run_tests' | 'open_pr' | 'poison' | 'conflict';

export interface PlannedItem {
  readonly kind: ItemKind;
  readonly workspaceId: string;
  /** Position in the workspace's send order. */
  readonly position: number;
  /** The job's id; for poison, the id it carries in its attributes only. */
  readonly jobId: string;
  /** What is sent: a valid job (its id may be reused: `conflict`), or a raw message (`poison`). */
  readonly job?: JobEnvelope;
  readonly raw?: { readonly body: string; readonly groupId: string };
  /** Cancelled by the operator before it is sent: it must end CANCELLED. */
  readonly cancelled?: boolean;
  /** Sent a second time later, as after SQS's deduplication window (a new deduplication id). */
  readonly lateDuplicate?: boolean;
  /** run_tests: the command exits 1, so the verdict must be `failed`. */
  readonly testsFail?: boolean;
}

export interface PlannedWorkspace {
  readonly workspaceId: string;
  readonly repo: string;
  readonly branch: string;
  readonly baseSha: string;
  readonly items: PlannedItem[];
  /** A clone holding the base and every patch of the plan, for building expected trees. */
  readonly scratchGitDir: string;
}

export interface Scenario {
  readonly seed: string;
  readonly workspaces: PlannedWorkspace[];
  /** Every item, in a global send order that keeps each workspace's order. */
  readonly items: PlannedItem[];
  /**
   * What every test command sleeps (`sleep <runTag>`, about a second), unique to this chaos run: a
   * run in progress, or a process one left, is found by it. Each command first prints
   * `chaos-run <jobId> <commit>`: its run's kept output is the witness that it ran (a sandboxed
   * command can write nowhere else).
   */
  readonly runTag: string;
  readonly repos: readonly string[];
}

export interface ScenarioOptions {
  readonly seed: string;
  readonly jobs: number;
  readonly workspaces: number;
  /** Work directory of the run: sources, scratch clones. */
  readonly dir: string;
  /** The platform's repository root (`<stateDir>/repos`): bare copies are made there, as `repo import` does. */
  readonly reposDir: string;
  /** Repository URL of a repository name, as agents send it (through the flaky proxy). */
  readonly repoUrl: (repo: string) => string;
}

const WORKSPACES_PER_REPO = 8;
/** The first word of the line each test command prints: `chaos-run <jobId> <commit>`. */
export const RUN_WITNESS = 'chaos-run';
const TENANT = 'chaos';
const BASE_TIME = Date.parse('2026-06-01T00:00:00Z');

/** Hostile patches: each must fail permanently and fence its workspace, leaving the tree as it was. */
const HOSTILE_DIFFS: readonly string[] = [
  [
    'diff --git a/../escape.txt b/../escape.txt',
    'new file mode 100644',
    '--- /dev/null',
    '+++ b/../escape.txt',
    '@@ -0,0 +1 @@',
    '+out',
    '',
  ].join('\n'),
  [
    'diff --git a/.git/hooks/post-merge b/.git/hooks/post-merge',
    'new file mode 100755',
    '--- /dev/null',
    '+++ b/.git/hooks/post-merge',
    '@@ -0,0 +1 @@',
    '+#!/bin/sh',
    '',
  ].join('\n'),
  [
    'diff --git a/link b/link',
    'new file mode 120000',
    '--- /dev/null',
    '+++ b/link',
    '@@ -0,0 +1 @@',
    '+/etc/passwd',
    '\\ No newline at end of file',
    '',
  ].join('\n'),
  [
    'diff --git a/README.md b/README.md',
    '--- a/README.md',
    '+++ b/README.md',
    '@@ -1,2 +1,2 @@',
    '-this line is not in the file',
    '+patched',
    ' nor is this one',
    '',
  ].join('\n'),
  [
    'diff --git a/blob.bin b/blob.bin',
    'new file mode 100644',
    'index 0000000..1111111',
    'GIT binary patch',
    'literal 3',
    'Kc${NkU|;|M00aO4',
    '',
    'literal 0',
    'HcmV?d00001',
    '',
  ].join('\n'),
];

/** Poison bodies: each must land on the FIFO DLQ as INVALID_JOB and do nothing else. */
function poisonBody(rng: Random, workspaceId: string, id: string): { body: string; groupId: string } {
  const group = `ws#${workspaceId}`;
  switch (rng.int(4)) {
    case 0:
      return { body: `{"jobId": "${id}", "type": "apply_patch"`, groupId: group };
    case 1:
      return {
        body: JSON.stringify({
          jobId: 'has spaces!',
          workspaceId,
          tenantId: TENANT,
          type: 'apply_patch',
          createdAt: new Date(BASE_TIME).toISOString(),
          payload: {},
        }),
        groupId: group,
      };
    case 2:
      return {
        body: JSON.stringify({
          jobId: id,
          workspaceId,
          tenantId: TENANT,
          type: 'deploy_prod',
          createdAt: new Date(BASE_TIME).toISOString(),
          payload: {},
        }),
        groupId: group,
      };
    default:
      // A valid job of another workspace put in this workspace's group.
      return {
        body: JSON.stringify({
          jobId: id,
          workspaceId: `${workspaceId}-other`,
          tenantId: TENANT,
          type: 'run_tests',
          createdAt: new Date(BASE_TIME).toISOString(),
          payload: {},
        }),
        groupId: group,
      };
  }
}

/** Builds the repositories and every workspace's jobs. */
export async function makeScenario(options: ScenarioOptions): Promise<Scenario> {
  const root = new Random(options.seed);
  const runTag = `1.${process.pid}${Date.now() % 1000}`;
  const repoCount = Math.max(1, Math.ceil(options.workspaces / WORKSPACES_PER_REPO));
  const repos = Array.from({ length: repoCount }, (_, i) => `repo-${i}`);
  const sizes = spread(root.fork('sizes'), options.jobs, options.workspaces);
  const specs = sizes.map((size, i) => ({
    workspaceId: `ws-${i}`,
    repo: repos[i % repoCount] as string,
    branch: `agent/ws-${i}`,
    size,
  }));

  const sources = path.join(options.dir, 'sources');
  const baseShas = new Map<string, string>();
  for (const repo of repos) {
    const dir = path.join(sources, repo);
    await mkdir(dir, { recursive: true });
    baseShas.set(
      repo,
      await createSource(
        dir,
        specs.filter((s) => s.repo === repo).map((s) => s.branch),
      ),
    );
    await git(options.dir, 'clone', '--quiet', '--bare', '--no-local', dir, path.join(options.reposDir, `${repo}.git`));
  }

  const workspaces = await mapLimit(specs, 4, (spec) =>
    planWorkspace(root.fork(spec.workspaceId), {
      ...spec,
      baseSha: baseShas.get(spec.repo) as string,
      source: path.join(sources, spec.repo),
      options,
      runTag,
    }),
  );
  return { seed: options.seed, workspaces, items: interleave(root.fork('order'), workspaces), runTag, repos };
}

/** `total` split over `parts`, each at least 1, unevenly (busy and quiet workspaces). */
function spread(rng: Random, total: number, parts: number): number[] {
  const weights = Array.from({ length: parts }, () => 0.3 + rng.next() * 1.7);
  const sum = weights.reduce((a, b) => a + b, 0);
  const sizes = weights.map((w) => Math.max(1, Math.floor((w / sum) * total)));
  for (let i = 0, left = total - sizes.reduce((a, b) => a + b, 0); left > 0; i = (i + 1) % parts, left--)
    sizes[i] = (sizes[i] ?? 0) + 1;
  return sizes;
}

/** The workspaces' items merged into one send order that keeps each workspace's order. */
function interleave(rng: Random, workspaces: readonly PlannedWorkspace[]): PlannedItem[] {
  const queues = workspaces.map((w) => [...w.items]);
  const merged: PlannedItem[] = [];
  for (let open = queues.filter((q) => q.length > 0); open.length > 0; open = open.filter((q) => q.length > 0)) {
    merged.push(rng.pick(open).shift() as PlannedItem);
  }
  return merged;
}

async function createSource(dir: string, branches: readonly string[]): Promise<string> {
  await git(dir, 'init', '--quiet', '--initial-branch=main');
  await git(dir, 'config', 'core.autocrlf', 'false');
  await writeFile(path.join(dir, 'README.md'), '# chaos\n\nA repository the chaos harness patches.\n');
  await mkdir(path.join(dir, 'src'));
  for (const name of ['alpha', 'beta', 'gamma'])
    await writeFile(path.join(dir, 'src', `${name}.txt`), `${name} 1\n${name} 2\n${name} 3\n`);
  await git(dir, 'add', '--all');
  await git(dir, '-c', 'user.name=chaos', '-c', 'user.email=chaos@example.invalid', 'commit', '--quiet', '-m', 'base');
  for (const branch of branches) await git(dir, 'branch', branch);
  return git(dir, 'rev-parse', 'HEAD');
}

interface WorkspaceSpec {
  readonly workspaceId: string;
  readonly repo: string;
  readonly branch: string;
  readonly size: number;
  readonly baseSha: string;
  readonly source: string;
  readonly options: ScenarioOptions;
  readonly runTag: string;
}

async function planWorkspace(rng: Random, spec: WorkspaceSpec): Promise<PlannedWorkspace> {
  const { workspaceId, options } = spec;
  const scratch = path.join(options.dir, 'scratch', workspaceId);
  await git(options.dir, 'clone', '--quiet', '--branch', spec.branch, spec.source, scratch);
  await git(scratch, 'config', 'core.autocrlf', 'false');
  const tree = new WorkTree(scratch, rng.fork('edits'));
  const repo = { url: options.repoUrl(spec.repo), branch: spec.branch };
  // One workspace in eight carries a hostile patch in its second half.
  const hostileAt =
    rng.chance(1 / 8) && spec.size >= 4 ? Math.floor(spec.size / 2) + rng.int(Math.ceil(spec.size / 2)) : -1;
  const items: PlannedItem[] = [];
  const applied: string[] = [];
  for (let position = 0; position < spec.size; position++) {
    const jobId = `${workspaceId}-${position}`;
    const createdAt = new Date(BASE_TIME + position * 1000).toISOString();
    const base = { workspaceId, position, jobId };
    const envelope = <T extends JobEnvelope['type']>(type: T, payload: Extract<JobEnvelope, { type: T }>['payload']) =>
      ({ jobId, workspaceId, tenantId: TENANT, type, createdAt, payload }) as JobEnvelope;
    const roll = rng.next();
    if (position === hostileAt) {
      const diff = rng.pick(HOSTILE_DIFFS);
      items.push({
        ...base,
        kind: 'hostile_patch',
        job: envelope('apply_patch', { repo, diff, message: `hostile ${position}` }),
      });
    } else if (position === 0 || roll < 0.62) {
      const diff = await tree.nextPatch();
      items.push({
        ...base,
        kind: 'apply_patch',
        job: envelope('apply_patch', { repo, diff, message: `chaos ${workspaceId} #${position}` }),
        lateDuplicate: rng.chance(0.03),
      });
      applied.push(jobId);
    } else if (roll < 0.82) {
      const testsFail = rng.chance(0.2);
      const command = `printf '${RUN_WITNESS} %s %s\\n' "$JOB_ID" "$(git rev-parse HEAD)"; sleep ${spec.runTag}; exit ${testsFail ? 1 : 0}`;
      items.push({
        ...base,
        kind: 'run_tests',
        job: envelope('run_tests', { command }),
        testsFail,
        cancelled: rng.chance(0.03),
        lateDuplicate: rng.chance(0.03),
      });
    } else if (roll < 0.9) {
      items.push({
        ...base,
        kind: 'open_pr',
        job: envelope('open_pr', { baseBranch: 'main', title: `Chaos ${workspaceId}` }),
        cancelled: rng.chance(0.03),
      });
    } else if (roll < 0.95 || applied.length === 0) {
      items.push({
        ...base,
        kind: 'poison',
        jobId: `poison-${jobId}`,
        raw: poisonBody(rng, workspaceId, `poison-${jobId}`),
      });
    } else {
      // An earlier job id reused for other work: CONFLICT, the original is kept.
      const reused = rng.pick(applied);
      items.push({
        ...base,
        kind: 'conflict',
        jobId: reused,
        job: {
          jobId: reused,
          workspaceId,
          tenantId: TENANT,
          type: 'apply_patch',
          createdAt,
          payload: { repo, diff: HOSTILE_DIFFS[3] as string, message: 'reused id' },
        },
      });
    }
  }
  return {
    workspaceId,
    repo: spec.repo,
    branch: spec.branch,
    baseSha: spec.baseSha,
    items,
    scratchGitDir: path.join(scratch, '.git'),
  };
}

/**
 * A work tree that makes the next patch: a random edit (change lines, add, delete or rename a
 * file, flip the executable bit), staged and diffed by git, then committed so the next patch
 * applies on top of it.
 */
class WorkTree {
  private files: string[] = ['src/alpha.txt', 'src/beta.txt', 'src/gamma.txt'];
  private serial = 0;

  constructor(
    private readonly dir: string,
    private readonly rng: Random,
  ) {}

  async nextPatch(): Promise<string> {
    for (let edits = 1 + this.rng.int(2); ; edits = 1) {
      for (let i = 0; i < edits; i++) await this.edit();
      await git(this.dir, 'add', '--all');
      // An edit can cancel out (a mode set to what it was): edit again until there is a change.
      const diff = await git(this.dir, 'diff', '--cached', '--no-color', '-M');
      if (diff === '') continue;
      await git(
        this.dir,
        '-c',
        'user.name=chaos',
        '-c',
        'user.email=chaos@example.invalid',
        'commit',
        '--quiet',
        '-m',
        'step',
      );
      return `${diff}\n`;
    }
  }

  private async edit(): Promise<void> {
    const file = this.rng.pick(this.files);
    const full = path.join(this.dir, file);
    const roll = this.rng.next();
    if (roll < 0.55 || this.files.length < 3) {
      const lines = (await readFile(full, 'utf8')).split('\n').filter((l) => l !== '');
      const at = this.rng.int(lines.length + 1);
      if (this.rng.chance(0.3) && lines.length > 1) lines.splice(Math.min(at, lines.length - 1), 1, this.rng.word());
      else lines.splice(at, 0, `${this.rng.word()} ${this.rng.word()}`);
      await writeFile(full, `${lines.join('\n')}\n`);
    } else if (roll < 0.75) {
      const name = `src/${this.rng.word(5)}-${++this.serial}.txt`;
      await writeFile(path.join(this.dir, name), `${this.rng.word()}\n${this.rng.word()}\n`);
      this.files.push(name);
    } else if (roll < 0.85) {
      await rm(full);
      this.files = this.files.filter((f) => f !== file);
    } else if (roll < 0.95) {
      const name = `src/${this.rng.word(5)}-${++this.serial}.txt`;
      await rename(full, path.join(this.dir, name));
      this.files = this.files.map((f) => (f === file ? name : f));
    } else {
      await chmod(full, this.rng.chance(0.5) ? 0o755 : 0o644);
    }
  }
}

/** Runs `work` over `items`, at most `limit` at a time, keeping the order of results. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  work: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await work(items[i] as T, i);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}
