import { join } from 'node:path';
import { confinedCommand, hiddenPaths } from '../../src/local/confinement';

describe('hiddenPaths', () => {
  it('hides the given directories and the whole HOME when no tool in PATH lives there', () => {
    expect(hiddenPaths(['/state'], { PATH: '/usr/local/bin:/usr/bin' }, '/home/dev')).toEqual(['/state', '/home/dev']);
  });

  it('hides only the credentials in HOME when a toolchain in PATH lives there, so it keeps working', () => {
    const hidden = hiddenPaths(['/state'], { PATH: '/home/dev/.nvm/versions/node/v22/bin:/usr/bin' }, '/home/dev');

    expect(hidden).not.toContain('/home/dev');
    expect(hidden).toEqual(expect.arrayContaining(['/state', join('/home/dev', '.aws'), join('/home/dev', '.ssh'), join('/home/dev', '.npmrc'), join('/home/dev', '.git-credentials')]));
    expect(hidden.filter((p) => p.startsWith('/home/dev/.nvm'))).toEqual([]);
  });

  it('never hides / (a HOME of /) and ignores relative PATH entries', () => {
    expect(hiddenPaths(['/state'], { PATH: '/usr/bin' }, '/')).toEqual(['/state']);
    expect(hiddenPaths([], { PATH: 'bin:/usr/bin' }, '/home/dev')).toEqual(['/home/dev']);
  });
});

describe('confinedCommand', () => {
  it('runs the command with plain sh where the machine cannot confine it', () => {
    expect(confinedCommand({ kind: 'none', reason: 'no namespaces' }, { runDir: '/r', cwd: '/r/w', hidden: ['/s'], command: 'npm test' })).toEqual({ file: 'sh', args: ['-c', 'npm test'] });
  });

  it('covers deeper hidden paths first, so one inside another is covered before its parent hides it', () => {
    const { file, args } = confinedCommand({ kind: 'namespaces' }, { runDir: '/tmp/runs/r', cwd: '/tmp/runs/r/w', hidden: ['/home/dev', '/home/dev/state', '/tmp/runs', '/home/dev'], command: 'npm test' });

    expect(file).toBe('unshare');
    expect(args.slice(args.indexOf('npm test') + 1)).toEqual(['/home/dev/state', '/home/dev', '/tmp/runs']);
    expect(args.slice(args.indexOf('agent-jobs-confine') + 1, args.indexOf('npm test'))).toEqual(['/tmp/runs/r', '/tmp/runs/r/w']);
  });
});
