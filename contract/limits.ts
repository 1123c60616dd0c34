/**
 * Limits of the services the platform leans on that shape its settings, with their sources. Plain
 * numbers and pure functions: the stack derives settings from them and the adapters keep to them.
 */

/**
 * GitHub's content-creation limits (secondary rate limits: "no more than 80 content-generating
 * requests per minute and no more than 500 content-generating requests per hour", docs.github.com,
 * "Rate limits for the REST API").
 */
export const GITHUB_CONTENT_LIMITS = { perMinute: 80, perHour: 500 } as const;

/** One container's share of GitHub's content-creation limits: creates in any minute and in any hour. */
export interface ContentShare {
  readonly perMinute: number;
  readonly perHour: number;
}

/**
 * Each container's share of the content-creation limits, so that `containers` of them together
 * stay within `perHour` and GitHub's 80 a minute in every minute and every hour, however their
 * creates fall: the event source mapping's MaximumConcurrency bounds how many containers make
 * requests at once, so no state is shared between them. A share is a window, not a spacing: an
 * idle fleet's one busy container may open its minute's share back to back. At least one of each:
 * more containers than the limit has requests cannot keep to it (the synth warns).
 */
export function contentShare(containers: number, perHour: number = GITHUB_CONTENT_LIMITS.perHour): ContentShare {
  const perMinute = Math.min(perHour, GITHUB_CONTENT_LIMITS.perMinute);
  return { perMinute: Math.max(1, Math.floor(perMinute / containers)), perHour: Math.max(1, Math.floor(perHour / containers)) };
}

/**
 * The lowest concurrent-build quota CodeBuild documents for a new account ("For a new account, the
 * quota can be 1-5", docs.aws.amazon.com, CodeBuild User Guide, "Quotas for AWS CodeBuild").
 */
export const LOWEST_NEW_ACCOUNT_BUILD_QUOTA = 1;

/**
 * CodeBuild's concurrently running builds per account, region and compute type, when nobody says:
 * "for some platforms and compute types, the default is 20. For a new account, the quota can be as
 * low as 5" (docs.aws.amazon.com, "Quotas for AWS CodeBuild"). The `buildConcurrencyQuota`
 * setting names the account's real one.
 */
export const DEFAULT_BUILD_CONCURRENCY_QUOTA = 20;
