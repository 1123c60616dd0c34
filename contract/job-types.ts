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

/** A job, workspace or tenant id on the wire (`what` names it in the error). */
export function idSchema(what: string) {
  return z
    .string({ error: (issue) => (issue.input === undefined ? `${what} is required` : `${what} must be a string`) })
    .check(z.regex(ID_PATTERN, `${what} must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit`));
}
const gitSha = z.string().check(z.regex(/^[0-9a-f]{40}$/, 'must be a 40-character lowercase hex commit sha'));

/** A diff stored in S3 because it is larger than the inline limit (claim-check). */
export const diffRefSchema = z
  .strictObject({
    bucket: z
      .string()
      .check(z.minLength(3), z.maxLength(63), z.describe('The diff bucket (the stack output DiffBucketName).')),
    key: z.string().check(z.minLength(1), z.maxLength(1024)),
    /** sha256 hex of the stored bytes: the consumer refuses an object that does not match. */
    sha256: z
      .string()
      .check(
        z.regex(/^[0-9a-f]{64}$/),
        z.describe('sha256 of the stored bytes, lower-case hex: an object that does not match is refused.'),
      ),
    bytes: z
      .int()
      .check(z.nonnegative(), z.describe('Size of the stored object in bytes: an object of another size is refused.')),
  })
  .check(z.describe('A diff stored in S3 (claim-check), for a diff over the inline limit.'));

/**
 * The diff inline, in one of two forms (the producer picks: src/core/diff-wire.ts):
 * `diff`, UTF-8 text (readable in a DLQ), or `diffBase64`, the exact bytes of a diff that is not
 * UTF-8 (Latin-1 files, stray bytes). Base64 must be canonical (padded, standard alphabet, no
 * stray bits), so one byte sequence has one spelling.
 */
const diffText = z.string().check(
  z.minLength(1),
  z.refine(
    (text) => !/[\ud800-\udfff]/u.test(text),
    'must be well-formed Unicode text: send bytes that are not UTF-8 as diffBase64',
  ),
  z.describe('The unified diff (`git diff` output) as text, when it is UTF-8.'),
);
const diffBase64 = z.string().check(
  z.minLength(4),
  z.refine(
    (text) => /^[A-Za-z0-9+/]*={0,2}$/.test(text) && Buffer.from(text, 'base64').toString('base64') === text,
    'must be canonical base64 (RFC 4648, padded)',
  ),
  z.describe('The exact bytes of a diff that is not UTF-8, in canonical base64 (RFC 4648, standard alphabet, padded).'),
);

export const applyPatchPayloadSchema = z
  .strictObject({
    repo: z.strictObject({
      // Parsed, not pattern-matched: no credentials, http(s) only, carried normalised (contract/git-remotes.ts).
      url: repoUrlSchema,
      branch: branchNameSchema,
    }),
    diff: z.optional(diffText),
    diffBase64: z.optional(diffBase64),
    diffRef: z.optional(diffRefSchema),
    baseSha: z.optional(gitSha),
    // What fsck --strict accepts, and no NUL hiding the Agent-Job-Id trailer (contract/git-objects.ts).
    message: commitMessageSchema,
    author: z.optional(authorSchema),
  })
  .check(
    z.refine((p) => [p.diff, p.diffBase64, p.diffRef].filter((d) => d !== undefined).length === 1, {
      message: 'exactly one of diff, diffBase64 or diffRef is required',
      path: ['diff'],
    }),
    // The refinement above, as JSON Schema says it.
    z.meta({ oneOf: [{ required: ['diff'] }, { required: ['diffBase64'] }, { required: ['diffRef'] }] }),
  );

/**
 * The longest build timeout (minutes) a command stage's build may have. CodeBuild contradicts
 * itself: its quotas table lists the build timeout as 5 to 480 minutes, not adjustable, while its
 * "Other limits" and the API reference accept up to 2,160 (docs.aws.amazon.com, CodeBuild User
 * Guide, "Quotas for AWS CodeBuild"). The safe bound is the lower one: a timeout CodeBuild refuses
 * would fail every build start of the stage, where a lower one only bounds a build.
 */
export const MAX_BUILD_TIMEOUT_MINUTES = 480;

/**
 * The payload of every command stage (run_tests, run_lint, ...): the command to run instead of the
 * stage's default, and a build timeout. No function waits for the build (it ends by event), so the
 * timeout may be anything CodeBuild accepts.
 */
export const commandPayloadSchema = z.strictObject({
  command: z.optional(
    z
      .string()
      .check(
        z.minLength(1),
        z.maxLength(4_000),
        z.describe(
          "The shell command to run in the repository at the pinned commit, instead of the stage's default (run_tests: `npm run test` when package.json has a test script, else `sh ./test.sh`). Exit code 0 passes; any other fails.",
        ),
      ),
  ),
  // Accepted and carried with the job; no runner reads it (README "Job types").
  profile: z.optional(
    z
      .string()
      .check(
        z.regex(/^[A-Za-z0-9_-]{1,64}$/),
        z.describe(
          'A label for the run (1-64 of A-Z a-z 0-9 _ -), kept with the request: no runner reads it, so it changes neither the command nor its environment. It counts in the request, so the same jobId with another profile is refused as a CONFLICT.',
        ),
      ),
  ),
  timeoutSeconds: z.optional(
    z
      .int()
      .check(
        z.minimum(1),
        z.maximum(MAX_BUILD_TIMEOUT_MINUTES * 60),
        z.describe(
          `Seconds the command may run before its build is stopped (TEST_RUN_ERROR, TIMED_OUT), 1 to ${MAX_BUILD_TIMEOUT_MINUTES * 60}; default the stack's build timeout (an hour locally).`,
        ),
      ),
  ),
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
  /** Start builds on the one command-runner project (and find one a crashed attempt started). */
  | 'commandRunner'
  /** Read the state of the command-runner project's builds (the reconciler). */
  | 'buildStatus'
  /** Stop a build of the command-runner project: the build of a cancelled job (the reconciler). */
  | 'buildStop'
  /** Read the GitHub token secret. */
  | 'githubToken';

/**
 * A module a function's bundle leaves to a file of its own beside it, required at its first use,
 * so that a cold start does not parse it. The code finds the file through a global constant that
 * the bundling defines (esbuild's define); running from the sources (tests, the local platform),
 * the constant is undefined and the code requires the module itself.
 */
export interface SeparateFile {
  /** The module, relative to the project root. */
  readonly entry: string;
  /** Its file in the function's asset. */
  readonly file: string;
  /** The constant the code reads the file's name from. */
  readonly constant: string;
  /** Largest the file may be (KiB of 1024 bytes), as WorkerSettings.bundleBudgetKiB. */
  readonly budgetKiB: number;
}

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
   * test/infra/bundling.test.ts fails above it. Every byte is parsed at each cold start (those of a
   * separate file at its first use).
   */
  readonly bundleBudgetKiB: number;
  readonly separateFiles?: readonly SeparateFile[];
}

/**
 * A stage that runs one shell command at the pinned commit on the command runner (CodeBuild on
 * AWS, a child process locally): tests, lint, a format or type check. It needs no processor of its
 * own: the shared one (COMMAND_STAGE_PROCESSOR) starts the build and the build-completion path
 * records the verdict.
 */
export interface CommandStageSpec {
  /** The shell line run when the job's payload names no command; exit status 0 passes. */
  readonly defaultCommand: string;
  /** What the command checks, as results say it: `tests` gives "tests passed", `lint` "lint failed". */
  readonly subject: string;
  /** What one run may use on the local runner, over DEFAULT_COMMAND_LIMITS. @default DEFAULT_COMMAND_LIMITS */
  readonly limits?: Partial<CommandLimits>;
}

/**
 * What one run of a command may use on the local runner (tools/local/test-runner.ts). A run that
 * reaches one is ended and its job fails with TEST_RUN_ERROR naming the limit. On AWS the build's
 * compute type bounds memory and CPU instead (lib/constructs/test-runner.ts).
 */
export interface CommandLimits {
  /** Processes and threads alive at once. */
  readonly processes: number;
  /** Memory of every process of the run, and of its files: the run's directories live in memory. */
  readonly memoryMiB: number;
  /** The run's writable places (checkout, HOME, /tmp) together. */
  readonly diskMiB: number;
  /** CPU time of all its processes together. */
  readonly cpuSeconds: number;
  /** Bytes it may print (stdout and stderr together). */
  readonly outputMiB: number;
}

/**
 * Sized like the smallest CodeBuild build (3 GB, 2 vCPUs): a test suite that passes there passes
 * here. A fork bomb, a runaway allocation or a disk fill ends at these, not at the machine's end.
 */
export const DEFAULT_COMMAND_LIMITS: CommandLimits = {
  processes: 1024,
  memoryMiB: 3072,
  diskMiB: 2048,
  cpuSeconds: 3600,
  outputMiB: 64,
};

export interface JobTypeDeclaration {
  readonly lane: Lane;
  readonly payload: z.ZodMiniType;
  /** One line for the CLI's help. */
  readonly summary: string;
  /**
   * The processor module, relative to the project root: an ordered type's mutation (run by the
   * sequencer) or a custom stage's processor. Command stages use COMMAND_STAGE_PROCESSOR.
   */
  readonly processor?: string;
  /** Present for staged job types: the stage queue and function that run them. */
  readonly stage?: WorkerSettings;
  /** Present for command stages (see commandStage). */
  readonly command?: CommandStageSpec;
  /**
   * The stages whose verdicts this stage requires at the commit it is pinned to (its gate): the
   * last job of each type the workspace ran before it at that commit must have passed. A failed
   * one ends the stage with REQUIREMENT_FAILED, none with REQUIREMENT_NOT_RUN, one without a verdict
   * yet is waited for (docs/decisions.md, "A stage's requirements"). Each names a command stage.
   */
  readonly requires?: readonly string[];
}

/** The processor and the handler every command stage shares. */
export const COMMAND_STAGE_PROCESSOR = 'src/core/jobs/command-stage.ts';
export const COMMAND_STAGE_HANDLER = 'src/handlers/command-stage.ts';

/** A command stage's separate file: the build checkout (src/compose/aws-build-checkout.ts). */
const BUILD_CHECKOUT_FILE: SeparateFile = {
  entry: 'src/compose/aws-build-checkout.ts',
  file: 'build-checkout.js',
  constant: 'BUILD_CHECKOUT_FILE',
  budgetKiB: 560,
};

/**
 * Declares a command stage: its payload is commandPayloadSchema, its processor and handler are the
 * shared ones, and its function starts builds on the command runner.
 */
export function commandStage(declaration: {
  readonly summary: string;
  readonly command: CommandStageSpec;
  readonly stage: Omit<WorkerSettings, 'handlerEntry' | 'needs'>;
}) {
  return {
    lane: 'staged',
    payload: commandPayloadSchema,
    summary: declaration.summary,
    processor: COMMAND_STAGE_PROCESSOR,
    command: declaration.command,
    stage: {
      ...declaration.stage,
      handlerEntry: COMMAND_STAGE_HANDLER,
      needs: ['commandRunner'],
      // The build's checkout credential (Secrets Manager, and auth-app for a GitHub App), loaded at the first build start.
      separateFiles: [...(declaration.stage.separateFiles ?? []), BUILD_CHECKOUT_FILE],
    },
  } as const satisfies JobTypeDeclaration;
}

/**
 * A command stage's default: `npm run <script>` (after `npm ci` when a lockfile is present) when
 * package.json has that script, else `sh ./<file>` when present, else exit 2 with a message. One
 * shell line, always sent as the build's command, so CodeBuild (which cannot look into the
 * repository before the build) and the local runner behave the same.
 */
function scriptOrFile(script: string, file: string): string {
  return (
    `if [ -f package.json ] && node -e "process.exit(require('./package.json').scripts?.${script} ? 0 : 1)"; then ` +
    `{ [ ! -f package-lock.json ] || npm ci; } && npm run ${script}; ` +
    `elif [ -f ${file} ]; then sh ./${file}; ` +
    `else echo 'no ${script} command: give payload.command, a package.json ${script} script or ${file}' >&2; exit ${NOT_CONFIGURED.exitCode}; fi`
  );
}

/**
 * How a default command says the workspace has nothing to run (no script, no file): its exit code
 * and its last line. A run that ends so reads "<subject> not configured", not "<subject> failed".
 */
export const NOT_CONFIGURED = {
  exitCode: 2,
  lastLine: /^no \S+ command: give payload\.command, a package\.json \S+ script or \S+$/,
} as const;

/** Used when a run_tests job names no command: the `test` script, else `./test.sh`. */
export const DEFAULT_TEST_COMMAND = scriptOrFile('test', 'test.sh');

/** Used when a run_lint job names no command: the `lint` script, else `./lint.sh`. */
export const DEFAULT_LINT_COMMAND = scriptOrFile('lint', 'lint.sh');

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
  // About 117 KiB (BENCHMARKS.md, bundles): the command stages' bundle and the ordered lane.
  bundleBudgetKiB: 960,
  // The git engine and its credentials, loaded at the first git call (src/compose/aws-sequencer.ts):
  // forwarding a staged job, a duplicate or a skip never parse it. About 169 KiB: isomorphic-git
  // (its ES module build, tree-shaken, with Node's zlib and crypto in place of pako and sha.js:
  // lib/constructs/worker.ts ESM_ALIASES) 64 KiB, the git adapter 31 KiB (9 of them the protocol v2
  // fetch by id of a cold job, docs/decisions.md §24) with 18 KiB of the packages it uses (diff,
  // async-lock, simple-get...), Secrets Manager through Powertools' parameters 10 KiB, and 41 KiB of
  // copies of what index.js holds too: zod and modules of src/core and contract/
  // (src/core/errors.ts says how errors keep their class across copies). A GitHub App in the
  // secret adds @octokit/auth-app and @octokit/core (the JWT, the token requests): about 24 KiB.
  separateFiles: [
    { entry: 'src/compose/aws-git-engine.ts', file: 'git-engine.js', constant: 'GIT_ENGINE_FILE', budgetKiB: 660 },
  ],
};

/**
 * The build-completion consumer: reads the build-events queue (CodeBuild "Build State Change"
 * events on AWS, the local runner's exits locally) and records each command stage's verdict.
 * Present when the catalog has a command stage.
 */
export const BUILD_EVENTS: WorkerSettings = {
  queue: 'build-events',
  handlerEntry: 'src/handlers/build-events.ts',
  timeoutSeconds: 60,
  memoryMb: 256,
  batchSize: 10,
  maxConcurrency: 5,
  maxReceiveCount: 5,
  oldestMessageAlarmSeconds: 900,
  needs: [],
  bundleBudgetKiB: 750,
};

/** The build reconciler: on a schedule, completes command-stage jobs whose completion event never came. */
export interface ReconcilerSettings {
  readonly handlerEntry: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** How often it runs. */
  readonly everyMinutes: number;
  /** Alarm when a job's build is overdue (no verdict after its timeout and the margin) for longer than this. */
  readonly overdueAlarmSeconds: number;
  readonly needs: readonly Capability[];
  /** As WorkerSettings.bundleBudgetKiB. */
  readonly bundleBudgetKiB: number;
}

export const BUILD_RECONCILER: ReconcilerSettings = {
  handlerEntry: 'src/handlers/build-reconciler.ts',
  timeoutSeconds: 60,
  memoryMb: 256,
  everyMinutes: 5,
  overdueAlarmSeconds: 3_600,
  needs: ['buildStatus', 'buildStop'],
  bundleBudgetKiB: 810,
};

export const JOB_TYPES = {
  apply_patch: {
    lane: 'ordered',
    payload: applyPatchPayloadSchema,
    summary: 'apply a unified diff to the workspace branch as one commit',
    processor: 'src/core/jobs/apply-patch.ts',
  },
  run_tests: commandStage({
    summary: "run the workspace's tests at the pinned commit",
    command: { defaultCommand: DEFAULT_TEST_COMMAND, subject: 'tests' },
    stage: {
      queue: 'run-tests',
      // Starts a build and returns: the build ends by event, so a short timeout does.
      timeoutSeconds: 60,
      memoryMb: 256,
      batchSize: 1,
      maxConcurrency: 10,
      maxReceiveCount: 5,
      oldestMessageAlarmSeconds: 1800,
      bundleBudgetKiB: 820,
    },
  }),
  // The example command stage: a declaration and nothing else (README "Customize").
  run_lint: commandStage({
    summary: "run the workspace's linter at the pinned commit",
    command: { defaultCommand: DEFAULT_LINT_COMMAND, subject: 'lint' },
    stage: {
      queue: 'run-lint',
      timeoutSeconds: 60,
      memoryMb: 256,
      batchSize: 1,
      maxConcurrency: 5,
      maxReceiveCount: 5,
      oldestMessageAlarmSeconds: 1800,
      bundleBudgetKiB: 820,
    },
  }),
  open_pr: {
    lane: 'staged',
    payload: openPrPayloadSchema,
    summary: 'open (or find) the pull request of the workspace branch',
    processor: 'src/core/jobs/open-pr.ts',
    // A pull request only on a commit whose tests passed; a fork names its own checks, or [] for none.
    requires: ['run_tests'],
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
      // About 110 KiB: the pipeline's stage and the open_pr processor.
      bundleBudgetKiB: 760,
      // Octokit and the token from Secrets Manager (through Powertools' parameters, with zod for the
      // secret's shape), loaded at the first pull request (src/compose/aws-open-pr.ts): about 57 KiB,
      // and 12 KiB more with @octokit/auth-app for a GitHub App in the secret.
      separateFiles: [
        {
          entry: 'src/compose/aws-github-host.ts',
          file: 'github-host.js',
          constant: 'GITHUB_HOST_FILE',
          budgetKiB: 540,
        },
      ],
    },
  },
} as const satisfies Record<string, JobTypeDeclaration>;

export type JobType = keyof typeof JOB_TYPES;
export type StagedJobType = { [K in JobType]: (typeof JOB_TYPES)[K]['lane'] extends 'staged' ? K : never }[JobType];
export type OrderedJobType = Exclude<JobType, StagedJobType>;
/** Staged types that run a command on the command runner. */
export type CommandJobType = {
  [K in JobType]: (typeof JOB_TYPES)[K] extends { command: CommandStageSpec } ? K : never;
}[JobType];
/** Staged types with a processor of their own. */
export type CustomStagedJobType = Exclude<StagedJobType, CommandJobType>;

export type ApplyPatchPayload = z.infer<typeof applyPatchPayloadSchema>;
export type CommandPayload = z.infer<typeof commandPayloadSchema>;
export type OpenPrPayload = z.infer<typeof openPrPayloadSchema>;
export type DiffRef = z.infer<typeof diffRefSchema>;

/** A worker of the platform: the sequencer, a stage, or the build-completion consumer. */
export type WorkerName = 'sequencer' | StagedJobType | 'build_events';

/**
 * Everything derived from a set of declarations. The module exports it for JOB_TYPES; a test can
 * derive it for a catalog with a throw-away job type added and mock this module with the result,
 * so the stack, the CLI and the local platform all see that catalog.
 */
export function deriveCatalog(types: Readonly<Record<string, JobTypeDeclaration>>) {
  const names = Object.keys(types) as JobType[];
  const declaration = (type: string): JobTypeDeclaration | undefined => types[type];
  const commandStageOf = (type: string): CommandStageSpec | undefined => declaration(type)?.command;
  const commandJobTypes = names.filter((name) => commandStageOf(name) !== undefined) as CommandJobType[];
  return {
    JOB_TYPE_NAMES: names,
    COMMAND_JOB_TYPES: commandJobTypes,
    /** The command-stage settings of a job type, when it is one. */
    commandStageOf,
    /** What one run of a command stage may use: its declaration's limits over the defaults. */
    commandLimitsOf(type: string): CommandLimits {
      return { ...DEFAULT_COMMAND_LIMITS, ...commandStageOf(type)?.limits };
    },
    /** How a result of a command stage reads: "tests passed", "lint failed". */
    verdictWording(type: string, verdict: string): string {
      return `${commandStageOf(type)?.subject ?? type} ${verdict}`;
    },
    /** Every queue-fed worker: the sequencer, one per staged job type, the build-completion consumer when there are command stages. */
    allWorkers(): { name: WorkerName; settings: WorkerSettings }[] {
      const staged = names.flatMap((name) => {
        const stage = declaration(name)?.stage;
        return stage ? [{ name: name as StagedJobType, settings: stage }] : [];
      });
      const completion = commandJobTypes.length > 0 ? [{ name: 'build_events' as const, settings: BUILD_EVENTS }] : [];
      return [{ name: 'sequencer', settings: SEQUENCER }, ...staged, ...completion];
    },
  };
}

export const { JOB_TYPE_NAMES, COMMAND_JOB_TYPES, commandStageOf, commandLimitsOf, verdictWording, allWorkers } =
  deriveCatalog(JOB_TYPES);
