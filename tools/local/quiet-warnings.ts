/**
 * Two process warnings are known and not actionable on the local platform, so they are kept off
 * stderr: the AWS SDK's notice that future SDK releases need Node 22 (the lockfile pins this
 * one), and the experimental-loader notice for how fauxqs (ESM only) is loaded (emulators.ts).
 * Every other warning still prints.
 */
const KNOWN = [/^NodeVersionSupportWarning/, /USE_MAIN_CONTEXT_DEFAULT_LOADER/];

export function quietKnownWarnings(): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning) => {
    if (KNOWN.some((pattern) => pattern.test(warning.message))) return;
    process.stderr.write(`${warning.name}: ${warning.message}\n`);
  });
}
