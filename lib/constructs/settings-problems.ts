/**
 * Synth-time validation of construct settings: collect every problem, then throw once, so a bad
 * configuration is fixed in one round instead of one error per `cdk synth`.
 */
import { Token } from 'aws-cdk-lib';

/** Thrown at synth when settings are invalid; the message names every offending setting. */
export class InvalidSettingsError extends Error {
  constructor(
    readonly subject: string,
    readonly problems: readonly string[],
  ) {
    super(`${subject} has invalid settings:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'InvalidSettingsError';
  }
}

export class SettingsProblems {
  private readonly problems: string[] = [];

  /** Records `message` for `setting` when `bad(value)`; unresolved tokens are skipped (known only at deploy). */
  check(setting: string, value: number | undefined, bad: (value: number) => boolean, message: string): void {
    if (value === undefined || Token.isUnresolved(value) || !bad(value)) return;
    this.problems.push(`${setting} = ${value}: ${message}`);
  }

  /** Records a problem that is not about a single number. */
  add(setting: string, message: string): void {
    this.problems.push(`${setting}: ${message}`);
  }

  /** What was recorded so far. */
  list(): string[] {
    return [...this.problems];
  }

  throwIfAny(subject: string): void {
    if (this.problems.length > 0) throw new InvalidSettingsError(subject, this.problems);
  }
}
