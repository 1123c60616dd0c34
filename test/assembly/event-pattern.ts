/**
 * EventBridge's event pattern matching, for the patterns a template of this project uses: every
 * field of the pattern must be in the event, a list matches when the event's value (or one of its
 * values) equals one of its entries, an object descends. A content filter (`prefix`, `anything-but`,
 * `numeric`, `exists`, ...) throws naming it rather than matching wrongly: no JavaScript package
 * implements EventBridge's matcher, and these two rules are all the run needs.
 */
export function matchesEventPattern(pattern: Record<string, unknown>, event: unknown): boolean {
  if (typeof event !== 'object' || event === null) return false;
  return Object.entries(pattern).every(([field, expected]) => {
    const value = (event as Record<string, unknown>)[field];
    if (Array.isArray(expected)) {
      const filter = expected.find((e) => typeof e === 'object' && e !== null);
      if (filter)
        throw new Error(
          `the assembly run does not match the content filter ${JSON.stringify(filter)} of an event pattern`,
        );
      const values = Array.isArray(value) ? value : [value];
      return values.some((v) => expected.includes(v));
    }
    return matchesEventPattern(expected as Record<string, unknown>, value);
  });
}
