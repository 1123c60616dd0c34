/**
 * A Lambda function fed by one QueueWithDlq (or by a schedule: no `queue`, an explicit `timeout`),
 * with the defaults every function of the platform shares.
 *
 * Default settings (the caller's `functionProps` win over each of them):
 * - The Node.js runtime of LAMBDA_NODE_MAJOR (below), ARM64, active X-Ray tracing, 512 MB.
 * - esbuild bundling on this machine (never Docker) for that same Node.js version, minified, with
 *   source maps enabled at run time whose paths are relative to the project root (so the asset
 *   hash does not depend on `cdk synth -o`); the AWS SDK clients a function uses bundled with it,
 *   never the runtime's own (EXTERNAL_MODULES); isomorphic-git from its ES module build (ESM_ALIASES); esbuild prints
 *   warnings and errors only. Each of `separateFiles` is bundled the same way into a file of its
 *   own beside index.js, and its constant defined to that file's name.
 * - An explicit log group (one month, not `logRetention`, which deploys an extra Lambda).
 * - Its own role, holding only what it is granted: writing to its log group, X-Ray, consuming its
 *   queue and sending to its DLQ (permanent failures are moved there by the handler).
 * - The queue's visibility timeout in its environment (ENV.visibilityTimeoutSeconds): heartbeats
 *   extend a message to the visibility this environment deploys, not the catalog's default.
 * - Event source mapping: ReportBatchItemFailures, batch size and MaximumConcurrency from the
 *   queue's consumer settings, EVENT_COUNT metrics. No `retryAttempts`: SQS redrive owns retries.
 * - Alarms on errors and throttles (more than 0 in 5 minutes by default).
 */
import { type Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { join } from 'node:path';
import { Construct } from 'constructs';
import type { SeparateFile } from '../../contract/job-types';
import { ENV } from '../../contract/runtime-env';
import { acknowledgeWildcard } from '../nag';
import { ALARM_PERIOD, alarmAbove } from './alarms';
import { InvalidSettingsError, SettingsProblems } from './settings-problems';
import type { QueueWithDlq } from './queue-with-dlq';

export type WorkerAlarm = 'errors' | 'throttles';
type OwnedFunctionProp = 'entry' | 'timeout' | 'role' | 'logGroup';

export interface WorkerProps {
  /** Absolute path of the handler entry file (exports `handler`). */
  readonly entry: string;
  /** Modules the bundle leaves to files of their own; entries are absolute paths, as `entry`. */
  readonly separateFiles?: readonly SeparateFile[];
  /**
   * The queue this worker consumes; its consumer settings give the timeout, batch size and
   * concurrency. Absent for a function invoked otherwise (a schedule), which gives `timeout`.
   */
  readonly queue?: QueueWithDlq;
  /** The function timeout of a worker without a queue. */
  readonly timeout?: Duration;
  /** @default 512 */
  readonly memorySize?: number;
  readonly environment?: Readonly<Record<string, string>>;
  /** Where every alarm of this construct notifies. */
  readonly alarmAction: cloudwatch.IAlarmAction;
  /** Alarm when the metric's 5-minute sum is above the threshold. @default 0 for each */
  readonly alarmThresholds?: Partial<Record<WorkerAlarm, number>>;
  /** @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Anything else of NodejsFunctionProps; wins over our defaults. The entry, timeout (from the
   * queue), role and log group belong to this construct.
   */
  readonly functionProps?: Omit<nodejs.NodejsFunctionProps, OwnedFunctionProp>;
}

/**
 * Nothing stays out of a bundle, the AWS SDK included: the Lambda runtime's own SDK is a version
 * AWS chooses and changes without a deploy, so a function runs with the SDK clients its bundle
 * holds, the versions the lockfile pins and the tests run (docs/decisions.md §22). An explicit
 * empty list, because NodejsFunction's default (and the `sdkV3ExcludeSmithyPackages` flag) leaves
 * `@aws-sdk/*` and `@smithy/*` to the runtime.
 */
export const EXTERNAL_MODULES: string[] = [];

/**
 * Modules the bundles take from elsewhere than their package's entry point. Paths are relative to
 * the project root, where esbuild runs; an alias also matches subpaths, so each subpath used is
 * listed too.
 * - isomorphic-git from its ES module build, which esbuild can tree-shake: its export map sends
 *   Node to its CommonJS build (one object of every command, 160 KiB in the sequencer); the ES
 *   module build, imported as a namespace, leaves out the commands the adapter never calls.
 * - pako and sha.js, which isomorphic-git imports for zlib and SHA-1, replaced by the runtime's
 *   own (lib/bundling/pako-node-zlib.ts, sha1-node-crypto.ts): 67 KiB less in the sequencer, and
 *   native inflate for every object read. test/integration/git-bundled.test.ts holds the bundled
 *   adapter to the same commits as the source one.
 * - diff3 and ignore, which isomorphic-git imports for merges and .gitignore rules, commands the
 *   platform never runs: left out (lib/bundling/left-out.ts), 7 KiB.
 */
export const ESM_ALIASES: Readonly<Record<string, string>> = {
  'isomorphic-git': './node_modules/isomorphic-git/index.js',
  'isomorphic-git/http/node': './node_modules/isomorphic-git/http/node/index.cjs',
  pako: './lib/bundling/pako-node-zlib.ts',
  'sha.js/sha1.js': './lib/bundling/sha1-node-crypto.ts',
  diff3: './lib/bundling/left-out.ts',
  ignore: './lib/bundling/left-out.ts',
};

/**
 * The one Node.js major version of every function: it selects the Lambda runtime and esbuild's
 * target, and the README states it (a test checks that README and docs/ agree with it). The
 * newest runtime aws-cdk-lib knows, for the longest support window (docs/decisions.md).
 */
export const LAMBDA_NODE_MAJOR = 24;

/**
 * The esbuild options the stack's bundling comes to (below), for what bundles a handler or an
 * adapter the stack's way outside a synth: the bundle benchmark and the bundled-adapter test.
 */
export function stackEsbuildOptions(projectRoot: string) {
  return {
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: `node${LAMBDA_NODE_MAJOR}`,
    minify: true,
    external: EXTERNAL_MODULES,
    alias: ESM_ALIASES,
    absWorkingDir: projectRoot,
    logLevel: 'error',
  } as const;
}

/**
 * The Lambda runtime of LAMBDA_NODE_MAJOR, from aws-cdk-lib's list (a major it lacks fails the
 * synth); never NODEJS_LATEST, which has the same name but moves with aws-cdk-lib.
 */
export function lambdaRuntime(major: number = LAMBDA_NODE_MAJOR): lambda.Runtime {
  const runtime = lambda.Runtime.ALL.find((r) => r.name === `nodejs${major}.x` && !r.isVariable);
  if (!runtime) throw new Error(`this aws-cdk-lib has no nodejs${major}.x Lambda runtime`);
  return runtime;
}

/**
 * The esbuild `define` that points the code at its separate files: each constant, the JSON string
 * of its file's name. Without it the code requires the module itself, and esbuild bundles it in.
 */
export function separateFileDefines(files: readonly SeparateFile[] = []): Record<string, string> {
  return Object.fromEntries(files.map((f) => [f.constant, JSON.stringify(f.file)]));
}

/** Makes a bundle's source map paths relative to the project root (see the script's header). */
const RELOCATE_SOURCE_MAP = join(__dirname, '..', 'bundling', 'relocate-source-map.cjs');
/** Runs esbuild's build with the options given as JSON: the separate files' bundling step. */
const ESBUILD = join(__dirname, '..', 'bundling', 'esbuild.cjs');
const shellQuote = (value: string): string => `'${value.replace(/'/g, `'\\''`)}'`;
const command = (...words: string[]): string => words.map(shellQuote).join(' ');

/**
 * After esbuild made index.js: bundle each separate file beside it, the same way (the stack's
 * options, with a source map), then make every source map's paths relative to the project root.
 */
function afterBundlingHooks(separateFiles: readonly SeparateFile[]): nodejs.ICommandHooks {
  return {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (inputDir, outputDir) => [
      ...separateFiles.map((f) =>
        command(
          process.execPath,
          ESBUILD,
          JSON.stringify({
            ...stackEsbuildOptions(inputDir),
            sourcemap: true,
            entryPoints: [f.entry],
            outfile: join(outputDir, f.file),
          }),
        ),
      ),
      ...['index.js', ...separateFiles.map((f) => f.file)].map((file) =>
        command(process.execPath, RELOCATE_SOURCE_MAP, join(outputDir, `${file}.map`), inputDir),
      ),
    ],
  };
}

const DEFAULT_MEMORY_MB = 512;
/** What Lambda accepts; CloudFormation would only refuse it at deploy. */
const MAX_TIMEOUT_SECONDS = 900;
const MEMORY_MB = { min: 128, max: 10_240 } as const;

export class Worker extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  readonly alarms: Readonly<Record<WorkerAlarm, cloudwatch.Alarm>>;

  constructor(scope: Construct, id: string, props: WorkerProps) {
    super(scope, id);
    const { queue } = props;
    const caller = props.functionProps ?? {};
    const timeout = queue?.consumer.timeout ?? props.timeout;
    if (timeout === undefined)
      throw new InvalidSettingsError(this.node.path, ['timeout: required for a worker without a queue']);
    validate(this.node.path, timeout.toSeconds(), caller.memorySize ?? props.memorySize ?? DEFAULT_MEMORY_MB);
    this.logGroup = new logs.LogGroup(this, 'LogGroup', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Execution role of ${this.node.path}`,
    });
    // Scoped to this function's log group instead of AWSLambdaBasicExecutionRole's logs:* on *.
    this.logGroup.grantWrite(this.role);
    acknowledgeWildcard(
      this.role,
      'Resource::*',
      'Active tracing: xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level permissions.',
    );

    const defaults: nodejs.NodejsFunctionProps = {
      runtime: lambdaRuntime(),
      architecture: lambda.Architecture.ARM_64,
      memorySize: DEFAULT_MEMORY_MB,
      tracing: lambda.Tracing.ACTIVE,
      bundling: {
        minify: true,
        sourceMap: true,
        target: `node${LAMBDA_NODE_MAJOR}`,
        externalModules: EXTERNAL_MODULES,
        esbuildArgs: Object.fromEntries(Object.entries(ESM_ALIASES).map(([name, path]) => [`--alias:${name}`, path])),
        define: separateFileDefines(props.separateFiles),
        // Local esbuild only: the steps after bundling run node on this machine's paths.
        forceDockerBundling: false,
        commandHooks: afterBundlingHooks(props.separateFiles ?? []),
        logLevel: nodejs.LogLevel.WARNING,
      },
    };
    this.function = new nodejs.NodejsFunction(this, 'Function', {
      ...defaults,
      ...(props.memorySize === undefined ? {} : { memorySize: props.memorySize }),
      ...caller,
      bundling: { ...defaults.bundling, ...caller.bundling },
      entry: props.entry,
      timeout,
      role: this.role,
      logGroup: this.logGroup,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        ...(queue
          ? {
              [ENV.dlqUrl]: queue.deadLetterQueue.queueUrl,
              [ENV.visibilityTimeoutSeconds]: String(queue.visibilityTimeout.toSeconds()),
            }
          : {}),
        ...props.environment,
        ...caller.environment,
      },
    });
    if (queue) {
      // SendMessage only (not grantSendMessages' GetQueueAttributes and GetQueueUrl): the URL is in the environment.
      this.allow(['sqs:SendMessage'], [queue.deadLetterQueue.queueArn]);
      this.function.addEventSource(
        new SqsEventSource(queue.queue, {
          batchSize: queue.consumer.batchSize,
          maxConcurrency: queue.consumer.maxConcurrency,
          reportBatchItemFailures: true,
          metricsConfig: { metrics: [lambda.MetricType.EVENT_COUNT] },
        }),
      );
    }
    const thresholds = { errors: 0, throttles: 0, ...props.alarmThresholds };
    const metricOptions = { period: ALARM_PERIOD, statistic: cloudwatch.Stats.SUM };
    this.alarms = {
      errors: alarmAbove(this, 'ErrorsAlarm', {
        metric: this.function.metricErrors(metricOptions),
        threshold: thresholds.errors,
        description: `${this.node.path}: the function failed (an invocation error, not a reported batch item failure)`,
        action: props.alarmAction,
      }),
      throttles: alarmAbove(this, 'ThrottlesAlarm', {
        metric: this.function.metricThrottles(metricOptions),
        threshold: thresholds.throttles,
        description: `${this.node.path}: invocations were throttled (account concurrency exhausted)`,
        action: props.alarmAction,
      }),
    };
  }

  /** Grants `actions` on exactly `resources` to this worker's role. */
  allow(actions: string[], resources: string[]): void {
    this.role.addToPrincipalPolicy(new iam.PolicyStatement({ actions, resources }));
  }
}

function validate(path: string, timeoutSeconds: number, memoryMb: number): void {
  const problems = new SettingsProblems();
  problems.check(
    'timeout',
    timeoutSeconds,
    (v) => v < 1 || v > MAX_TIMEOUT_SECONDS,
    `must be 1..${MAX_TIMEOUT_SECONDS} seconds (the Lambda maximum)`,
  );
  problems.check(
    'memorySize',
    memoryMb,
    (v) => v < MEMORY_MB.min || v > MEMORY_MB.max,
    `must be ${MEMORY_MB.min}..${MEMORY_MB.max} MB (what Lambda accepts)`,
  );
  problems.throwIfAny(path);
}
