/**
 * The git hosts rule (contract/git-remotes.ts): which repository URLs the sequencer may dial under
 * the configured allow-list, on AWS (loopback, link-local and metadata addresses never) and locally
 * (the platform's own loopback git server). Pure: hosts are compared as the URL parser reads them.
 */
import {
  awsGitHostPolicy,
  gitHostEntryProblem,
  gitHostList,
  gitHostProblem,
  normalizeRepoUrl,
  type GitHostPolicy,
} from '../../contract/git-remotes';

const problem = (url: string, policy: GitHostPolicy) => gitHostProblem(normalizeRepoUrl(url), policy);

describe('on AWS', () => {
  const none = awsGitHostPolicy(undefined);
  const configured = awsGitHostPolicy('github.com, git.example.com:8443');

  it('refuses every host while none is configured, saying how to configure one', () => {
    expect(none.hosts).toEqual([]);
    expect(awsGitHostPolicy('').hosts).toEqual([]);
    expect(problem('https://github.com/org/repo.git', none)).toBe(
      'host github.com is not allowed: no git hosts are configured (set gitHosts in the deployment configuration)',
    );
  });

  it.each([
    ['https://github.com/org/repo.git'],
    ['HTTPS://GitHub.COM/org/repo.git'],
    ['https://github.com:443/org/repo.git'],
    ['http://github.com/org/repo.git'],
    ['https://git.example.com:8443/repo.git'],
  ])('allows %s', (url) => {
    expect(problem(url, configured)).toBeUndefined();
  });

  it.each([
    [
      'https://gitlab.com/org/repo.git',
      'host gitlab.com is not in the configured git hosts (github.com, git.example.com:8443)',
    ],
    ['https://github.com.evil.example/repo.git', 'host github.com.evil.example is not in the configured git hosts'],
    ['https://evilgithub.com/repo.git', 'host evilgithub.com is not in the configured git hosts'],
    ['https://git.example.com/repo.git', 'host git.example.com is not in the configured git hosts'],
    ['https://git.example.com:9443/repo.git', 'host git.example.com:9443 is not in the configured git hosts'],
  ])('refuses %s', (url, reason) => {
    expect(problem(url, configured)).toContain(reason);
  });

  it.each([
    ['http://127.0.0.1:9418/repo.git', '127.0.0.1 is a loopback, link-local or metadata address'],
    ['http://2130706433/repo.git', '127.0.0.1 is a loopback'],
    ['http://0x7f.1/repo.git', '127.0.0.1 is a loopback'],
    ['http://0.0.0.0/repo.git', '0.0.0.0 is a loopback'],
    ['http://169.254.169.254/latest/meta-data', '169.254.169.254 is a loopback, link-local or metadata address'],
    ['http://169.254.170.2/v2/credentials', '169.254.170.2 is a loopback'],
    ['http://[::1]/repo.git', '[::1] is a loopback'],
    ['http://[::ffff:169.254.169.254]/repo.git', '[::ffff:a9fe:a9fe] is a loopback'],
    ['http://[fe80::1]/repo.git', '[fe80::1] is a loopback'],
    ['http://[fd00:ec2::254]/repo.git', '[fd00:ec2::254] is a loopback'],
    ['http://localhost/repo.git', 'localhost names loopback or a metadata service'],
    ['http://git.localhost/repo.git', 'git.localhost names loopback'],
    ['http://metadata.google.internal/repo.git', 'metadata.google.internal names loopback or a metadata service'],
    ['http://instance-data.ec2.internal/repo.git', 'instance-data.ec2.internal names loopback'],
  ])('never dials %s, even when it is listed', (url, reason) => {
    const listed = awsGitHostPolicy(new URL(url).host);
    expect(problem(url, listed)).toContain(reason);
    expect(problem(url, listed)).toMatch(/: the platform never dials one$/);
  });
});

describe('locally', () => {
  const own: GitHostPolicy = { hosts: ['127.0.0.1:43123'], localAddresses: true };

  it("allows the platform's own git server and nothing else, not even another loopback port", () => {
    expect(problem('http://127.0.0.1:43123/repo.git', own)).toBeUndefined();
    expect(problem('http://127.0.0.1:43124/repo.git', own)).toBe(
      'host 127.0.0.1:43124 is not in the configured git hosts (127.0.0.1:43123)',
    );
    expect(problem('http://localhost:43123/repo.git', own)).toContain(
      'host localhost:43123 is not in the configured git hosts',
    );
    expect(problem('https://github.com/org/repo.git', own)).toContain(
      'host github.com is not in the configured git hosts',
    );
  });
});

describe('allow-list entries', () => {
  it('reads the environment form: comma-separated, blanks ignored', () => {
    expect(gitHostList(' github.com ,, git.example.com:8443 ')).toEqual(['github.com', 'git.example.com:8443']);
    expect(gitHostList(undefined)).toEqual([]);
  });

  it.each([
    ['github.com', undefined],
    ['git.example.com:8443', undefined],
    ['https://github.com', 'is not a host name or name:port'],
    ['github.com/org', 'is not a host name or name:port'],
    ['user@github.com', 'is not a host name or name:port'],
    ['git hub.com', 'is not a host name or name:port'],
    ['', 'is not a host name or name:port'],
    ['169.254.169.254', 'is a loopback, link-local or metadata address, never dialled on AWS'],
    ['LOCALHOST:80', 'names loopback or a metadata service, never dialled on AWS'],
  ])('%j on AWS: %s', (entry, reason) => {
    const found = gitHostEntryProblem(entry, false);
    if (reason === undefined) expect(found).toBeUndefined();
    else expect(found).toContain(reason);
  });

  it('accepts a loopback entry where local addresses are allowed (the local platform)', () => {
    expect(gitHostEntryProblem('127.0.0.1:43123', true)).toBeUndefined();
  });
});
