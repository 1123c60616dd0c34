// @ts-check
/**
 * The runtime interface client of the assembly run: what Lambda's Node.js runtime does inside an
 * execution environment. It loads the handler the template names (`_HANDLER`, relative to
 * LAMBDA_TASK_ROOT) once, at init, then serves invocations one at a time for as long as the
 * environment lives, with the context Lambda passes. The Runtime API's next / response / error
 * exchange travels over Node's IPC channel instead of HTTP (test/assembly/lambda-service.ts holds
 * the other end). Lambda's own patching of `console` (request id prefixes) is not reproduced.
 *
 * `--clock-offset-ms=<n>` (the run's only departure from Lambda, for an invocation that must happen
 * later than the run can wait: lambda-service.ts) moves `Date` forward by n ms before the handler
 * loads: `Date.now()`, `new Date()` and `Date()` read the moved clock; a date built from a value is
 * that date. The deadline of `getRemainingTimeInMillis` stays on the real clock.
 */
'use strict';
const { join } = require('node:path');

const RealDate = Date;
const offsetArgument = process.argv.find((a) => a.startsWith('--clock-offset-ms='));
const clockOffsetMs = offsetArgument ? Number(offsetArgument.slice('--clock-offset-ms='.length)) : 0;
if (clockOffsetMs) {
  const now = () => RealDate.now() + clockOffsetMs;
  globalThis.Date = new Proxy(RealDate, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length > 0 ? args : [now()], newTarget),
    apply: () => new RealDate(now()).toString(),
    get: (target, property, receiver) => (property === 'now' ? now : Reflect.get(target, property, receiver)),
  });
}

/** @param {unknown} error */
const describe = (error) => ({
  errorType: error instanceof Error ? error.name : typeof error,
  errorMessage: error instanceof Error ? error.message : String(error),
  stack: error instanceof Error ? (error.stack ?? '').split('\n') : [],
});

const send = (/** @type {object} */ message) => /** @type {(m: object) => void} */ (process.send)(message);

/** @type {(event: unknown, context: object) => Promise<unknown>} */
let handler;
try {
  const spec = process.env['_HANDLER'] ?? '';
  const dot = spec.lastIndexOf('.');
  const module = require(join(process.env['LAMBDA_TASK_ROOT'] ?? '', spec.slice(0, dot)));
  handler = module[spec.slice(dot + 1)];
  if (typeof handler !== 'function')
    throw Object.assign(new Error(`${spec} is undefined or not exported`), { name: 'Runtime.HandlerNotFound' });
  send({ ready: true });
} catch (error) {
  send({ initError: describe(error) });
  process.exitCode = 1;
}

process.on('unhandledRejection', (reason) => {
  send({ fatal: describe(reason) });
  process.exit(128);
});

process.on(
  'message',
  (
    /** @type {{ id: string, event: unknown, deadline: number, traceId: string, functionArn: string }} */ invocation,
  ) => {
    process.env['_X_AMZN_TRACE_ID'] = invocation.traceId;
    const context = {
      awsRequestId: invocation.id,
      functionName: process.env['AWS_LAMBDA_FUNCTION_NAME'],
      functionVersion: process.env['AWS_LAMBDA_FUNCTION_VERSION'],
      invokedFunctionArn: invocation.functionArn,
      memoryLimitInMB: process.env['AWS_LAMBDA_FUNCTION_MEMORY_SIZE'],
      logGroupName: process.env['AWS_LAMBDA_LOG_GROUP_NAME'],
      logStreamName: process.env['AWS_LAMBDA_LOG_STREAM_NAME'],
      callbackWaitsForEmptyEventLoop: true,
      getRemainingTimeInMillis: () => Math.max(0, invocation.deadline - RealDate.now()),
    };
    Promise.resolve()
      .then(() => handler(invocation.event, context))
      .then(
        (result) => send({ id: invocation.id, result: result ?? null }),
        (error) => send({ id: invocation.id, error: describe(error) }),
      );
  },
);
