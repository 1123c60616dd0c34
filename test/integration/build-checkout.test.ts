/**
 * A test build's checkout credential: what the command stage writes to the repository's checkout
 * secret and names in the StartBuild overrides, against the loopback Secrets Manager stand-in of
 * the assembly run (its versions and names; emulated, not AWS) and the loopback GitHub (its App
 * endpoints check the JWT and record what a mint asked for). What a build would read is resolved
 * from the references as CodeBuild resolves them.
 */
import { generateKeyPairSync } from 'node:crypto';
import { DeleteSecretCommand, DescribeSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CHECKOUT_ENV } from '../../contract/runtime-env';
import { checkoutSecretName, SecretsManagerBuildCheckout } from '../../src/adapters/build-checkout';
import type { GitHubAppKey } from '../../src/adapters/github-api';
import { appTokensAt, CHECKOUT_MARGIN_MS, INSTALLATION_TOKEN_USER } from '../../src/adapters/github-app';
import type { GitCredentials } from '../../src/adapters/secrets';
import { REGION } from '../assembly/cloud-assembly';
import { startSecretsManager } from '../assembly/stand-ins';
import { startFakeGitHub, type FakeGitHub } from '../support/fake-github';

const { privateKey, publicKey } = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
});
const APP: GitHubAppKey = { appId: '4242', privateKey, installationId: 77 };
const PREFIX = 'agent-jobs/AgentJobs-test/checkout/';
const REPO = 'https://github.example/acme/widgets.git';

describe('the build checkout credential', () => {
  let now: number;
  let github: FakeGitHub;
  let secretsManager: Awaited<ReturnType<typeof startSecretsManager>>;
  let client: SecretsManagerClient;
  const clock = { now: () => now };

  beforeEach(async () => {
    now = Date.parse('2026-12-02T10:00:00Z');
    github = await startFakeGitHub({
      app: {
        appId: APP.appId,
        publicKey,
        installations: {
          acme: { id: 77, permissions: { contents: 'write', pull_requests: 'write', metadata: 'read' } },
        },
        now: clock.now,
      },
    });
    secretsManager = await startSecretsManager({});
    client = new SecretsManagerClient({
      endpoint: secretsManager.url,
      region: REGION,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  });
  afterEach(async () => {
    client.destroy();
    await secretsManager.close();
    await github.close();
  });

  const checkoutWith = (secret: GitCredentials | GitHubAppKey) =>
    new SecretsManagerBuildCheckout({
      client,
      secretPrefix: PREFIX,
      readSecret: async () => secret,
      tokensOf: appTokensAt({ baseUrl: github.url, clock }),
      clock,
    });
  /** What the build reads, by variable name, as CodeBuild resolves the references at its start. */
  const buildReads = (refs: { name: string; value: string; type: string }[]) =>
    Object.fromEntries(
      refs.map((r) => [r.name, r.type === 'SECRETS_MANAGER' ? secretsManager.resolve(r.value) : 'PLAINTEXT!']),
    );

  it("with a GitHub App: the build reads a token for its one repository with contents: read, never the app's key", async () => {
    const refs = await checkoutWith(APP).environmentFor(REPO);

    expect(refs.map((r) => [r.name, r.type])).toEqual([
      [CHECKOUT_ENV.username, 'SECRETS_MANAGER'],
      [CHECKOUT_ENV.password, 'SECRETS_MANAGER'],
    ]);
    const [minted] = github.minted;
    expect(github.minted).toEqual([
      expect.objectContaining({ repositories: ['widgets'], permissions: { contents: 'read' } }),
    ]);
    expect(buildReads(refs)).toEqual({
      [CHECKOUT_ENV.username]: INSTALLATION_TOKEN_USER,
      [CHECKOUT_ENV.password]: minted!.token,
    });
    expect(secretsManager.arnOf(checkoutSecretName(PREFIX, REPO))).toMatch(
      new RegExp(`:secret:${PREFIX}[0-9a-f]{32}-`),
    );
    expect(JSON.stringify(refs)).not.toContain('PRIVATE KEY');
  });

  it('writes a version only when the credential changes, and each build names the version it was started with', async () => {
    const checkout = checkoutWith(APP);

    const first = await checkout.environmentFor(REPO);
    const again = await checkout.environmentFor('https://GITHUB.example/acme/widgets');
    now += 3_600_000 - CHECKOUT_MARGIN_MS + 1;
    const next = await checkout.environmentFor(REPO);

    expect(again).toEqual(first);
    expect(next).not.toEqual(first);
    expect(github.minted).toHaveLength(2);
    // The first build still reads the token it was started with; the next one the new token.
    expect(buildReads(first)[CHECKOUT_ENV.password]).toBe(github.minted[0]!.token);
    expect(buildReads(next)[CHECKOUT_ENV.password]).toBe(github.minted[1]!.token);
  });

  describe('many containers, one repository: the writes are bounded per repository, not per container', () => {
    const CONTAINERS = 8;
    /** How long one checkout version serves: GitHub's tokens (and the loopback GitHub's) last an hour. */
    const WINDOW_MS = 3_600_000 - CHECKOUT_MARGIN_MS;
    const name = checkoutSecretName(PREFIX, REPO);

    it('a build a minute for six hours, round-robin over the containers: one version (and one mint) per token window, each build reading a token with 20 minutes to live', async () => {
      const containers = Array.from({ length: CONTAINERS }, () => checkoutWith(APP));
      const start = now;
      for (let minute = 0; minute < 6 * 60; minute++) {
        now = start + minute * 60_000;
        const password = buildReads(await containers[minute % CONTAINERS]!.environmentFor(REPO))[CHECKOUT_ENV.password];
        const token = github.minted.find((t) => t.token === password);
        expect(token?.expiresAt).toBeGreaterThanOrEqual(now + CHECKOUT_MARGIN_MS);
      }

      const windows = Math.ceil((6 * 3_600_000) / WINDOW_MS);
      expect(secretsManager.versionCount(name)).toBeLessThanOrEqual(windows);
      expect(github.minted.length).toBeLessThanOrEqual(windows);
    });

    it('containers starting builds at the same instant, first and at the edge of a window, add one version each time', async () => {
      const containers = Array.from({ length: CONTAINERS }, () => checkoutWith(APP));
      const startAll = () => Promise.all(containers.map((c) => c.environmentFor(REPO)));

      const first = await startAll();
      expect(secretsManager.versionCount(name)).toBe(1);
      now += WINDOW_MS + 1;
      const edge = await startAll();

      expect(secretsManager.versionCount(name)).toBe(2);
      expect(new Set(first.map((refs) => JSON.stringify(refs))).size).toBe(1);
      expect(new Set(edge.map((refs) => JSON.stringify(refs))).size).toBe(1);
      expect(buildReads(edge[0]!)[CHECKOUT_ENV.password]).not.toBe(buildReads(first[0]!)[CHECKOUT_ENV.password]);
    });

    it('a user and token: one version for every container, and one more when the secret is rotated', async () => {
      const reader = { username: 'reader', password: 'read-only-token' };
      for (const container of Array.from({ length: CONTAINERS }, () => checkoutWith(reader)))
        await container.environmentFor(REPO);
      expect(secretsManager.versionCount(name)).toBe(1);

      for (const container of Array.from({ length: CONTAINERS }, () =>
        checkoutWith({ ...reader, password: 'rotated-token' }),
      ))
        await container.environmentFor(REPO);
      expect(secretsManager.versionCount(name)).toBe(2);
    });

    it('a start retried by another container after a crash names the version the first attempt named (its StartBuild parameters are the same)', async () => {
      const crashed = await checkoutWith(APP).environmentFor(REPO);
      now += 5 * 60_000;
      const retried = await checkoutWith(APP).environmentFor(REPO);

      expect(retried).toEqual(crashed);
      expect(github.minted).toHaveLength(1);
    });
  });

  describe("a repository's checkout secret scheduled for deletion (DeleteSecret with a recovery window)", () => {
    const reader = { username: 'reader', password: 'read-only-token' };
    const scheduleDeletion = async () => {
      await checkoutWith(reader).environmentFor(REPO);
      await client.send(
        new DeleteSecretCommand({ SecretId: checkoutSecretName(PREFIX, REPO), RecoveryWindowInDays: 7 }),
      );
    };

    it('is restored, and the build is started with it as for any checkout secret', async () => {
      await scheduleDeletion();

      const refs = await checkoutWith({ ...reader, password: 'rotated-token' }).environmentFor(REPO);

      expect(buildReads(refs)).toEqual({ [CHECKOUT_ENV.username]: 'reader', [CHECKOUT_ENV.password]: 'rotated-token' });
      const described = await client.send(new DescribeSecretCommand({ SecretId: checkoutSecretName(PREFIX, REPO) }));
      expect(described.DeletedDate).toBeUndefined();
    });

    it('that cannot be restored is refused with the reason and what to do, not as an unexplained InvalidRequestException', async () => {
      await scheduleDeletion();
      secretsManager.refuseNext('RestoreSecret', 1, 'AccessDeniedException');

      const refused = checkoutWith(reader).environmentFor(REPO);

      await expect(refused).rejects.toThrow(
        new RegExp(
          `checkout secret ${checkoutSecretName(PREFIX, REPO)} is scheduled for deletion .*could not be restored \\(AccessDeniedException.*restore-secret --secret-id`,
        ),
      );
    });
  });

  it("a user and token are copied as they are; another container finds the repository's secret made and adds its version", async () => {
    const reader = { username: 'reader', password: 'read-only-token' };

    const one = await checkoutWith(reader).environmentFor(REPO);
    const other = await checkoutWith({ ...reader, password: 'rotated-token' }).environmentFor(REPO);

    expect(buildReads(one)).toEqual({ [CHECKOUT_ENV.username]: 'reader', [CHECKOUT_ENV.password]: 'read-only-token' });
    expect(buildReads(other)).toEqual({ [CHECKOUT_ENV.username]: 'reader', [CHECKOUT_ENV.password]: 'rotated-token' });
    expect(github.minted).toEqual([]);
  });
});
