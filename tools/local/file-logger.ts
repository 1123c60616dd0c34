/**
 * Powertools Logger whose JSON lines go to a stream (the local platform's `platform.log`) instead
 * of stdout, so the terminal keeps the ready line and the live view while handlers log as on AWS.
 */
import type { Writable } from 'node:stream';
import { Logger, type LogItem } from '@aws-lambda-powertools/logger';

type LoggerOptions = NonNullable<ConstructorParameters<typeof Logger>[0]>;

export class StreamLogger extends Logger {
  private readonly sink: Writable | undefined;

  constructor(sink: Writable, options?: LoggerOptions) {
    super(options);
    this.sink = sink;
  }

  protected override printLog(_logLevel: number, log: LogItem): void {
    log.prepareForPrint();
    // Logger flushes warnings about its own settings from inside its constructor, before the sink is set.
    (this.sink ?? process.stderr).write(`${JSON.stringify(log.getAttributes(), this.getJsonReplacer())}\n`);
  }

  /** Children (createChild) write to the same stream. */
  protected override createLogger(options?: LoggerOptions): StreamLogger {
    return new StreamLogger(this.sink ?? process.stderr, options);
  }
}
