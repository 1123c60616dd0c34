// @ts-check
/**
 * The inside of the assembly run's network namespace (test/assembly/sandbox.ts starts it with
 * `unshare`): brings up loopback, adds the addresses of the run's hosts (the git host and GitHub,
 * which on AWS are not on loopback, so the functions' guard against local addresses dials them),
 * gives them names in a private /etc/hosts, and forwards every listed address and port to a unix
 * socket whose other end, outside, leads to the real server on the host's loopback. Nothing inside
 * can reach any other address: the namespace has no route out.
 *
 * Usage: node sandbox-network.cjs '<{ hostsFile, addresses: [..], forwards: [{ host, port, socket }] } as JSON>'
 * Prints "ready" once every forward listens; runs until killed.
 */
'use strict';
const { execFileSync } = require('node:child_process');
const net = require('node:net');

const config = JSON.parse(process.argv[2] ?? '{}');
execFileSync('ip', ['link', 'set', 'lo', 'up']);
for (const address of config.addresses) execFileSync('ip', ['addr', 'add', `${address}/32`, 'dev', 'lo']);
execFileSync('mount', ['--bind', config.hostsFile, '/etc/hosts']);

let listening = 0;
for (const { host, port, socket } of config.forwards) {
  const server = net.createServer((inside) => {
    const outside = net.connect(socket);
    inside.pipe(outside).pipe(inside);
    inside.on('error', () => outside.destroy());
    outside.on('error', () => inside.destroy());
  });
  server.listen(port, host, () => {
    if (++listening === config.forwards.length) process.stdout.write('ready\n');
  });
}
