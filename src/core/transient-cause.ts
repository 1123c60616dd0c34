/**
 * Whether a retry can cure an error that no rule classified: only when its cause lies outside the
 * job, in the network, a service's throttling, a server error (5xx), or a machine short of a
 * resource. Anything else (a TypeError on input the rules let through, an unsafe path or a parse
 * error from a library, an AWS 4xx) fails the same way on every delivery, so retrying it would only
 * hold the workspace's FIFO group until RETRIES_EXHAUSTED.
 *
 * Judged by shape, not by class: the core imports no SDK. The names and codes follow the AWS SDK's
 * own retry classification (@smithy/core, service-error-classification) and Node's system errors;
 * the cause chain is followed, since fetch reports a reset connection as `TypeError: fetch failed`
 * with the system error as its cause.
 */

/** Node system error codes of a connection that failed or was cut. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
/** A machine short of a resource: another container (or the same one later) can do the job. */
const RESOURCE_CODES = new Set(['ENOSPC', 'EMFILE', 'ENFILE', 'ENOMEM', 'EAGAIN', 'EBUSY']);
/** AWS error names that mean throttling or a timeout (the SDK's THROTTLING_ and TRANSIENT_ERROR_CODES). */
const TRANSIENT_NAMES = new Set([
  'BandwidthLimitExceeded',
  'EC2ThrottledException',
  'LimitExceededException',
  'PriorRequestNotComplete',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
  'RequestThrottled',
  'RequestThrottledException',
  'SlowDown',
  'ThrottledException',
  'Throttling',
  'ThrottlingException',
  'TooManyRequestsException',
  'TransactionInProgressException',
  'TimeoutError',
  'RequestTimeout',
  'RequestTimeoutException',
]);

interface ErrorShape {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly cause?: unknown;
  /** AWS SDK: set on errors the service marks retryable (throttling among them). */
  readonly $retryable?: unknown;
  readonly $metadata?: { readonly httpStatusCode?: unknown };
}

/** The transient cause of `error` (e.g. `ECONNRESET`, `HTTP 503`, `ThrottlingException`), or undefined. */
export function transientCause(error: unknown): string | undefined {
  // The chain is followed a bounded number of links: a cause may be cyclic.
  for (let depth = 0, at = error; depth < 10 && typeof at === 'object' && at !== null; depth++) {
    const shape = at as ErrorShape;
    if (typeof shape.code === 'string' && (NETWORK_CODES.has(shape.code) || RESOURCE_CODES.has(shape.code)))
      return shape.code;
    if (typeof shape.name === 'string' && TRANSIENT_NAMES.has(shape.name)) return shape.name;
    const status = shape.$metadata?.httpStatusCode;
    if (typeof status === 'number' && (status === 429 || (status >= 500 && status <= 599))) return `HTTP ${status}`;
    if (shape.$retryable !== undefined && shape.$retryable !== null) return `${String(shape.name)} (retryable)`;
    at = shape.cause;
  }
  return undefined;
}
