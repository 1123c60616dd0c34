/**
 * The records of the ledger and the small interfaces the handlers use to reach the outside world.
 * Adapters (lambda/adapters) implement them for AWS and for the local platform; tests hand in
 * emulator-backed adapters or, for fault injection only, mocks.
 */
import type { EventType } from '../../contract/runtime-env';
import type { JobType } from '../../contract/job-types';
import type { JobEnvelope, Pin, StageMessage } from './envelope';

export type JobStatus = 'IN_FLIGHT' | 'SUCCEEDED' | 'FAILED' | 'FORWARDED' | 'SKIPPED' | 'CANCELLED';
/** Statuses after which a job never runs again on an ordinary redelivery. */
export const TERMINAL_STATUSES: readonly JobStatus[] = ['SUCCEEDED', 'FAILED', 'SKIPPED', 'CANCELLED'];

export interface JobFailure {
  /** PermanentReason code, or SKIPPED / CANCELLED causes. */
  readonly reason: string;
  readonly message: string;
}

/** `pk = job#<jobId>` */
export interface JobRecord {
  readonly jobId: string;
  readonly workspaceId: string;
  readonly tenantId: string;
  readonly type: JobType;
  readonly status: JobStatus;
  /** sha256 of the canonical request (see jobDigest). */
  readonly digest: string;
  readonly leaseOwner?: string;
  /** Epoch milliseconds. */
  readonly leaseUntil?: number;
  /** How many times a worker claimed the job. */
  readonly attempt: number;
  readonly result?: Record<string, unknown>;
  readonly error?: JobFailure;
  /** Staged jobs: the commit the sequencer pinned them to. */
  readonly pin?: Pin;
  /** Position in the workspace's order (the sequencer's cursor when it took the job). */
  readonly wsSeq?: number;
  /** SKIPPED jobs: the job that blocked the workspace. */
  readonly blockedBy?: string;
  /** Progress a long job records before waiting (e.g. run_tests' build id), so a redelivery resumes it. */
  readonly progress?: Record<string, string>;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Epoch seconds (DynamoDB TTL). */
  readonly ttl: number;
}

export type WorkspaceState = 'ACTIVE' | 'BLOCKED';

/** `pk = ws#<workspaceId>` */
export interface WorkspaceRecord {
  readonly workspaceId: string;
  readonly repo?: { readonly url: string; readonly branch: string };
  /** Commit sha after the last applied patch. */
  readonly head?: string;
  readonly state: WorkspaceState;
  readonly blockedBy?: string;
  readonly blockedReason?: string;
  /** The job the sequencer took last for this workspace, and whether it finished. */
  readonly currentJobId?: string;
  readonly currentDone?: boolean;
  /** Sequence number of the last job taken (the cursor). */
  readonly seq: number;
  readonly updatedAt: string;
}

/** Publishes AgentJobSucceeded / AgentJobFailed / AgentJobSkipped / WorkspaceBlocked. */
export interface EventPublisher {
  publish(type: EventType, detail: Record<string, unknown>): Promise<void>;
}

/** Claim-checked diffs (S3 on AWS, fauxqs' S3 locally). */
export interface DiffStore {
  put(key: string, body: string): Promise<{ bucket: string; key: string; sha256: string; bytes: number }>;
  get(ref: { bucket: string; key: string; sha256: string; bytes: number }): Promise<string>;
}

/** Runs a workspace's tests at a pinned commit (CodeBuild on AWS, a child process locally). */
export interface TestRunner {
  /** Starts the build for a job; the same jobId must never start a second build. */
  start(job: StageMessage<'run_tests'>): Promise<{ buildId: string }>;
  /** Current state of a build. */
  poll(buildId: string): Promise<TestRunStatus>;
}

export type TestRunStatus =
  | { readonly state: 'RUNNING' }
  | { readonly state: 'PASSED' | 'FAILED'; readonly exitCode: number | null; readonly logTail: string; readonly durationMs?: number }
  /** Infrastructure errors (FAULT, TIMED_OUT, STOPPED): not a test verdict. */
  | { readonly state: 'ERROR'; readonly status: string; readonly message: string };

/** Pull-request host (GitHub through Octokit on AWS, a local store locally). */
export interface PullRequestHost {
  /** Finds the open PR whose head is `branch`, or creates it. Idempotent by head branch. */
  findOrCreate(input: {
    repoUrl: string;
    head: string;
    base: string;
    title: string;
    body?: string;
  }): Promise<{ number: number; url: string; created: boolean }>;
}

export type { JobEnvelope, StageMessage, Pin };
