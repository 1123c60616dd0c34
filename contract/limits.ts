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
  return {
    perMinute: Math.max(1, Math.floor(perMinute / containers)),
    perHour: Math.max(1, Math.floor(perHour / containers)),
  };
}

/**
 * The lowest concurrent-build quota CodeBuild documents for a new account ("For a new account, the
 * quota can be 1-5", docs.aws.amazon.com, CodeBuild User Guide, "Quotas for AWS CodeBuild").
 */
export const LOWEST_NEW_ACCOUNT_BUILD_QUOTA = 1;

/**
 * The Service Quotas codes of CodeBuild's "Concurrently running builds for <type> environment"
 * quotas (service code `codebuild`) for the command runner's small compute type, per architecture
 * (lib/regions.ts): `aws service-quotas get-service-quota --service-code codebuild --quota-code
 * L-5ED1D25B` answers the account's ARM/Small quota in the region. The codes are those
 * ListServiceQuotas returns (checked 2026-12-04); CodeBuild's user guide names the quotas only.
 */
export const BUILD_QUOTA_CODES = {
  arm: { code: 'L-5ED1D25B', name: 'Concurrently running builds for ARM/Small environment' },
  x86: { code: 'L-9D07B6EF', name: 'Concurrently running builds for Linux/Small environment' },
} as const;

/**
 * The project's concurrent build limit when the account's quota is not given (`buildConcurrencyQuota`):
 * a limit above the account's quota makes CreateProject fail, one below only makes builds wait, so
 * the default is the lowest a new account may have. Set the account's own value to run more.
 */
export const DEFAULT_BUILD_CONCURRENCY_QUOTA = LOWEST_NEW_ACCOUNT_BUILD_QUOTA;
