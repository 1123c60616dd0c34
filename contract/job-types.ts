/**
 * The job-type catalog: the one declaration of every job type and of the functions that run them.
 *
 * The stack (lib/), the producer and the handlers (src/), the CLI and the local platform all
 * derive from this file, so adding a job type is one entry here plus one processor
 * (src/core/jobs/). This folder is pure data and schemas: it imports nothing from lib/ or src/ and
 * does no I/O, which is why both sides may import it without depending on each other.
 */
import * as z from 'zod/mini';
import { repoUrlSchema } from './git-remotes';
import { authorSchema, branchNameSchema, commitMessageSchema } from './git-objects';
import './zod-english';

/** Restricted id: ids end up in DynamoDB keys, git branch names and SQS message attributes. */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const gitSha = z.string().check(z.regex(/^[0-9a-f]{40}$/, 'must be a 40-character lowercase hex commit sha'));

/** A diff stored in S3 because it is larger than the inline limit (claim-check). */
export const diffRefSchema = z.strictObject({
  bucket: z.string().check(z.minLength(3), z.maxLength(63)),
  key: z.string().check(z.minLength(1), z.maxLength(1024)),
  /** sha256 hex of the stored bytes: the consumer refuses an object that does not match. */
  sha256: z.string().check(z.regex(/^[0-9a-f]{64}$/)),
  bytes: z.int().check(z.nonnegative()),
});

export const applyPatchPayloadSchema = z
  .strictObject({
    repo: z.strictObject({
      // Parsed, not pattern-matched: no credentials, http(s) only, carried normalised (contract/git-remotes.ts).
      url: repoUrlSchema,
      branch: branchNameSchema,
    }),
    diff: z.optional(z.string().check(z.minLength(1))),
    diffRef: z.optional(diffRefSchema),
    baseSha: z.optional(gitSha),
    // What fsck --strict accepts, and no NUL hiding the Agent-Job-Id trailer (contract/git-objects.ts).
    message: commitMessageSchema,
    author: z.optional(authorSchema),
  })
  .check(
    z.refine((p) => (p.diff === undefined) !== (p.diffRef === undefined), {
      message: 'exactly one of diff or diffRef is required',
      path: ['diff'],
    }),
  );

export const runTestsPayloadSchema = z.strictObject({
  command: z.optional(z.string().check(z.minLength(1), z.maxLength(4_000))),
  profile: z.optional(z.string().check(z.regex(/^[A-Za-z0-9_-]{1,64}$/))),
  /**
   * At most 45 minutes: a build longer than one invocation is resumed by later deliveries, and each
   * hand-over spends one of the stage queue's receives (5 x ~14 min with the catalog settings), so
   * a longer build would run out of receives before it ends.
   */
  timeoutSeconds: z.optional(z.int().check(z.minimum(1), z.maximum(45 * 60))),
});

export const openPrPayloadSchema = z.strictObject({
  baseBranch: branchNameSchema,
  title: z.string().check(z.minLength(1), z.maxLength(256)),
  body: z.optional(z.string().check(z.maxLength(65_536))),
});

/** The lane decides how a job travels. */
export type Lane =
  /** Runs inside the sequencer, in FIFO order: the only writer of a workspace. */
  | 'ordered'
  /** Pinned to the workspace head by the sequencer, then forwarded to its own standard queue. */
  | 'staged';

/** Permissions a function may need; lib/ turns each into one least-privilege grant. */
export type Capability =
  /** Read the git credentials secret (push and fetch workspace remotes). */
  | 'gitCredentials'
  /** Read claim-checked diffs from the payload bucket. */
  | 'diffBucketRead'
  /** Start and read builds of the one test-runner project. */
  | 'testRunner'
  /** Read the GitHub token secret. */
  | 'githubToken';

/** Settings of one function and the queue that feeds it. Every value can be overridden per environment. */
export interface WorkerSettings {
  /** Construct id and base of the local queue name; physical names are generated on AWS. */
  readonly queue: string;
  /** Handler entry file, relative to the project root (a function exported as `handler`). */
  readonly handlerEntry: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** Records per event-source-mapping batch (at most 10 on FIFO). */
  readonly batchSize: number;
  /** Event source mapping MaximumConcurrency (2..1000). */
  readonly maxConcurrency: number;
  /** Deliveries before SQS moves a message to the DLQ (>= 5). */
  readonly maxReceiveCount: number;
  /** Alarm when the oldest message of the queue is older than this. */
  readonly oldestMessageAlarmSeconds: number;
  readonly needs: readonly Capability[];
  /**
   * Largest bundle the function may ship (minified index.js, KiB of 1024 bytes): the synth test
   * test/infra/bundling.test.ts fails above it. Every byte is parsed at each cold start.
   */
  readonly bundleBudgetKiB: number;
}

export interface JobTypeDeclaration {
  readonly lane: Lane;
  readonly payload: z.ZodMiniType;
  /** Present for staged job types: the stage queue and function that run them. */
  readonly stage?: WorkerSettings;
  /** One line for the CLI's help. */
  readonly summary: string;
}

/** The sequencer: consumes the FIFO queue, runs ordered job types, pins and forwards staged ones. */
export const SEQUENCER: WorkerSettings = {
  queue: 'agent-jobs',
  handlerEntry: 'src/handlers/apply-patch.ts',
  timeoutSeconds: 120,
  memoryMb: 1024,
  batchSize: 10,
  maxConcurrency: 10,
  maxReceiveCount: 5,
  oldestMessageAlarmSeconds: 900,
  needs: ['gitCredentials', 'diffBucketRead'],
  // isomorphic-git and its zlib (pako) are 205 KiB of it: its CommonJS build, which esbuild gets on
  // Node, cannot be tree-shaken.
  bundleBudgetKiB: 380,
};

export const JOB_TYPES = {
  apply_patch: {
    lane: 'ordered',
    payload: applyPatchPayloadSchema,
    summary: 'apply a unified diff to the workspace branch as one commit',
  },
  run_tests: {
    lane: 'staged',
    payload: runTestsPayloadSchema,
    summary: "run the workspace's tests at the pinned commit",
    stage: {
      queue: 'run-tests',
      handlerEntry: 'src/handlers/run-tests.ts',
      timeoutSeconds: 900,
      memoryMb: 512,
      batchSize: 1,
      maxConcurrency: 10,
      maxReceiveCount: 5,
      oldestMessageAlarmSeconds: 1800,
      needs: ['testRunner'],
      bundleBudgetKiB: 120,
    },
  },
  open_pr: {
    lane: 'staged',
    payload: openPrPayloadSchema,
    summary: 'open (or find) the pull request of the workspace branch',
    stage: {
      queue: 'open-pr',
      handlerEntry: 'src/handlers/open-pr.ts',
      timeoutSeconds: 60,
      memoryMb: 256,
      batchSize: 5,
      maxConcurrency: 5,
      maxReceiveCount: 5,
      oldestMessageAlarmSeconds: 900,
      needs: ['githubToken'],
      bundleBudgetKiB: 200,
    },
  },
} as const satisfies Record<string, JobTypeDeclaration>;

export type JobType = keyof typeof JOB_TYPES;
export const JOB_TYPE_NAMES = Object.keys(JOB_TYPES) as JobType[];
export type StagedJobType = { [K in JobType]: (typeof JOB_TYPES)[K]['lane'] extends 'staged' ? K : never }[JobType];
export type OrderedJobType = Exclude<JobType, StagedJobType>;

export type ApplyPatchPayload = z.infer<typeof applyPatchPayloadSchema>;
export type RunTestsPayload = z.infer<typeof runTestsPayloadSchema>;
export type OpenPrPayload = z.infer<typeof openPrPayloadSchema>;
export type DiffRef = z.infer<typeof diffRefSchema>;

/** Every worker of the platform: the sequencer, then one per staged job type. */
export function allWorkers(): { name: 'sequencer' | StagedJobType; settings: WorkerSettings }[] {
  const staged = JOB_TYPE_NAMES.flatMap((name) => {
    const decl: JobTypeDeclaration = JOB_TYPES[name];
    return decl.stage ? [{ name: name as StagedJobType, settings: decl.stage }] : [];
  });
  return [{ name: 'sequencer', settings: SEQUENCER }, ...staged];
}
