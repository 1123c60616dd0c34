/**
 * Limits of the services the platform leans on that shape its settings, with their sources
 * (SCALE.md has the whole capacity model). Plain numbers and pure functions: the stack derives
 * settings from them and the adapters keep to them.
 */

/**
 * GitHub's content-creation limits (secondary rate limits: "no more than 80 content-generating
 * requests per minute and no more than 500 content-generating requests per hour", docs.github.com,
 * "Rate limits for the REST API").
 */
export const GITHUB_CONTENT_LIMITS = { perMinute: 80, perHour: 500 } as const;

/**
 * The spacing of content-creating requests in one container so that `containers` of them together
 * stay within `perHour` and GitHub's 80 a minute: the event source mapping's MaximumConcurrency
 * bounds how many containers make requests at once, so no state is shared between them.
 */
export function contentIntervalMs(containers: number, perHour: number = GITHUB_CONTENT_LIMITS.perHour): number {
  const fleetInterval = Math.max(3_600_000 / perHour, 60_000 / GITHUB_CONTENT_LIMITS.perMinute);
  return Math.ceil(fleetInterval * containers);
}

/**
 * CodeBuild's concurrently running builds per account, region and compute type, when nobody says:
 * "for some platforms and compute types, the default is 20. For a new account, the quota can be as
 * low as 5" (docs.aws.amazon.com, "Quotas for AWS CodeBuild"). The `buildConcurrencyQuota`
 * setting names the account's real one.
 */
export const DEFAULT_BUILD_CONCURRENCY_QUOTA = 20;
