/**
 * The Lambda service of the assembly run: invokes a function of the cloud assembly the way Lambda
 * does. Each concurrent invocation gets an execution environment of its own (a Node process of
 * the template's runtime major, in the sandbox, with bootstrap.cjs as its runtime), reused by later
 * invocations while it lives, like a warm container. An environment gets the template's
 * Environment, the variables Lambda itself sets, its role's credentials and the endpoint variable
 * that points the SDK at the run's AWS endpoint; nothing else. The template's timeout ends an
 * invocation (the environment is killed, as Lambda does) and its memory size sets V8's heap limits
 * as Lambda's Node.js bootstrap does.
 *
 * Time cannot be waited for (the reconciler acts on builds overdue by more than an hour), so an
 * invocation may ask for a clock moved forward (`clockOffsetMs`): it gets an environment of its
 * own, whose runtime (bootstrap.cjs) shifts `Date` by that much before the handler loads, and
 * which ends with the invocation; warm environments keep the real clock. Nothing else of the
 * environment changes (no variable is added).
 *
 * Not modelled: freezing an idle environment (it keeps running between invocations), the memory
 * limit as a cgroup (V8's heap limits only), CPU scaled by memory, X-Ray (no daemon: tracing
 * segments are not sent), Lambda's log formatting (stdout and stderr are kept per function).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { AssemblyFunction } from './cloud-assembly';
import { REGION } from './cloud-assembly';
import type { Sandbox } from './sandbox';

export interface InvocationError {
  readonly errorType: string;
  readonly errorMessage: string;
  readonly stack?: readonly string[];
}

export type InvocationResult =
  { readonly ok: true; readonly result: unknown } | { readonly ok: false; readonly error: InvocationError };

/** The credentials a function's environment gets: they name its role to the run's AWS endpoint. */
export interface RoleCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
}

export interface LambdaServiceOptions {
  readonly sandbox: Sandbox;
  /** The Node.js binary of the runtime's major. */
  readonly node: string;
  /** AWS_ENDPOINT_URL inside the sandbox. */
  readonly awsEndpoint: string;
  /** NODE_EXTRA_CA_CERTS: the certificate of the run's TLS front, the only other variable added. */
  readonly extraCaCerts?: string;
  readonly credentialsOf: (fn: AssemblyFunction) => RoleCredentials;
  /** What the function wrote to stdout and stderr, line by line (its log group). */
  readonly onLog?: (fn: AssemblyFunction, line: string) => void;
  /** An environment was started (a cold start) or ended. */
  readonly onEnvironment?: (fn: AssemblyFunction, change: 'started' | 'ended') => void;
}

interface Environment {
  readonly child: ChildProcess;
  readonly ready: Promise<InvocationError | undefined>;
  busy: boolean;
  ended: boolean;
}

export interface InvokeOptions {
  /** Milliseconds the function's clock runs ahead of the real one, in an environment of its own. */
  readonly clockOffsetMs?: number;
}

export class LambdaService {
  private readonly environments = new Map<string, Environment[]>();

  constructor(private readonly options: LambdaServiceOptions) {}

  /** Environments started so far for a function (cold starts). */
  coldStarts = new Map<string, number>();

  async invoke(fn: AssemblyFunction, event: unknown, options: InvokeOptions = {}): Promise<InvocationResult> {
    const ownClock = (options.clockOffsetMs ?? 0) !== 0;
    const environment = ownClock ? this.start(fn, options.clockOffsetMs) : (this.idleEnvironment(fn) ?? this.start(fn));
    environment.busy = true;
    try {
      const initError = await environment.ready;
      if (initError) {
        this.end(fn, environment);
        return { ok: false, error: initError };
      }
      return await this.send(fn, environment, event);
    } finally {
      environment.busy = false;
      if (ownClock && !environment.ended) this.end(fn, environment);
    }
  }

  /** Ends every environment. */
  async stop(): Promise<void> {
    for (const [, environments] of this.environments) for (const e of environments) e.child.kill('SIGKILL');
    await Promise.all(
      [...this.environments.values()]
        .flat()
        .map((e) => (e.ended ? undefined : new Promise((resolve) => e.child.once('exit', resolve)))),
    );
    this.environments.clear();
  }

  private idleEnvironment(fn: AssemblyFunction): Environment | undefined {
    return (this.environments.get(fn.logicalId) ?? []).find((e) => !e.busy && !e.ended);
  }

  private start(fn: AssemblyFunction, clockOffsetMs = 0): Environment {
    const credentials = this.options.credentialsOf(fn);
    const logStream = `${new Date().toISOString().slice(0, 10).replace(/-/g, '/')}/[$LATEST]${randomBytes(16).toString('hex')}`;
    const env: Record<string, string> = {
      ...fn.environment,
      // What Lambda sets in every Node.js execution environment.
      AWS_REGION: REGION,
      AWS_DEFAULT_REGION: REGION,
      AWS_EXECUTION_ENV: `AWS_Lambda_${fn.runtime}`,
      AWS_LAMBDA_FUNCTION_NAME: fn.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
      AWS_LAMBDA_LOG_GROUP_NAME: fn.logGroupName,
      AWS_LAMBDA_LOG_STREAM_NAME: logStream,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_SESSION_TOKEN: credentials.sessionToken,
      LAMBDA_TASK_ROOT: fn.codeDir,
      LAMBDA_RUNTIME_DIR: __dirname,
      _HANDLER: fn.handler,
      TZ: ':UTC',
      LANG: 'en_US.UTF-8',
      PATH: '/usr/local/bin:/usr/bin:/bin',
      // The one variable the run adds: the SDK's standard endpoint setting, at the run's AWS endpoint.
      AWS_ENDPOINT_URL: this.options.awsEndpoint,
      ...(this.options.extraCaCerts ? { NODE_EXTRA_CA_CERTS: this.options.extraCaCerts } : {}),
    };
    // V8's heap limits as Lambda's Node.js bootstrap sets them from the memory size.
    const newSpace = Math.floor(fn.memoryMb / 10);
    const args = [
      '--expose-gc',
      '--max-http-header-size',
      '81920',
      `--max-semi-space-size=${Math.floor(newSpace / 2)}`,
      `--max-old-space-size=${fn.memoryMb - newSpace}`,
      join(__dirname, 'bootstrap.cjs'),
      ...(clockOffsetMs ? [`--clock-offset-ms=${clockOffsetMs}`] : []),
    ];
    const child = this.options.sandbox.spawn(this.options.node, args, {
      env,
      cwd: fn.codeDir,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      tmpMb: fn.ephemeralStorageMb,
    });
    for (const stream of [child.stdout!, child.stderr!]) {
      let pending = '';
      stream.on('data', (chunk: Buffer) => {
        const lines = (pending + chunk.toString('utf8')).split('\n');
        pending = lines.pop()!;
        for (const line of lines) this.options.onLog?.(fn, line);
      });
    }
    const environment: Environment = {
      child,
      busy: false,
      ended: false,
      ready: new Promise((resolve) => {
        child.on('message', (m: { ready?: boolean; initError?: InvocationError }) => {
          if (m.ready) resolve(undefined);
          if (m.initError)
            resolve({
              ...m.initError,
              errorType: m.initError.errorType.startsWith('Runtime.')
                ? m.initError.errorType
                : `Runtime.ImportModuleError: ${m.initError.errorType}`,
            });
        });
        child.once('exit', (code, signal) =>
          resolve({
            errorType: 'Runtime.ExitError',
            errorMessage: `the environment exited during init (${signal ?? `exit ${code}`})`,
          }),
        );
      }),
    };
    child.once('exit', () => {
      environment.ended = true;
      this.options.onEnvironment?.(fn, 'ended');
    });
    this.environments.set(fn.logicalId, [...(this.environments.get(fn.logicalId) ?? []), environment]);
    this.coldStarts.set(fn.logicalId, (this.coldStarts.get(fn.logicalId) ?? 0) + 1);
    this.options.onEnvironment?.(fn, 'started');
    return environment;
  }

  private end(fn: AssemblyFunction, environment: Environment): void {
    environment.child.kill('SIGKILL');
    this.environments.set(
      fn.logicalId,
      (this.environments.get(fn.logicalId) ?? []).filter((e) => e !== environment),
    );
  }

  private send(fn: AssemblyFunction, environment: Environment, event: unknown): Promise<InvocationResult> {
    const id = randomUUID();
    const timeoutMs = fn.timeoutSeconds * 1000;
    return new Promise<InvocationResult>((resolve) => {
      const done = (result: InvocationResult) => {
        clearTimeout(timer);
        environment.child.off('message', onMessage);
        environment.child.off('exit', onExit);
        resolve(result);
      };
      const onMessage = (m: { id?: string; result?: unknown; error?: InvocationError; fatal?: InvocationError }) => {
        if (m.fatal) return done({ ok: false, error: m.fatal });
        if (m.id !== id) return;
        done(m.error ? { ok: false, error: m.error } : { ok: true, result: m.result });
      };
      const onExit = (code: number | null, signal: string | null) => {
        this.end(fn, environment);
        done({
          ok: false,
          error: {
            errorType: 'Runtime.ExitError',
            errorMessage: `RequestId: ${id} Error: Runtime exited (${signal ?? `exit status ${code}`})`,
          },
        });
      };
      const timer = setTimeout(() => {
        environment.child.off('exit', onExit);
        this.end(fn, environment);
        done({
          ok: false,
          error: {
            errorType: 'Sandbox.Timedout',
            errorMessage: `${id} Task timed out after ${fn.timeoutSeconds.toFixed(2)} seconds`,
          },
        });
      }, timeoutMs);
      environment.child.on('message', onMessage);
      environment.child.once('exit', onExit);
      environment.child.send({
        id,
        event,
        deadline: Date.now() + timeoutMs,
        traceId: `Root=1-${randomBytes(4).toString('hex')}-${randomBytes(12).toString('hex')};Sampled=1`,
        functionArn: fn.arn,
      });
    });
  }
}
