'use strict';
/**
 * Preloaded (`node --require`) into a child process that talks to the SQS emulator through queue
 * URLs as an agent's code would: the emulator's queue URLs name `sqs.<region>.localhost`, which
 * the system resolver does not know, and the SDK sends to a queue URL's host. Names under
 * `.localhost` resolve to 127.0.0.1 here, as RFC 6761 reserves them for (fauxqs' tests do the same
 * with its interceptLocalhostDns, which is ESM-only).
 */
const dns = require('node:dns');

const lookup = dns.lookup;
dns.lookup = function lookupLocalhostNames(hostname, options, callback) {
  if (typeof hostname !== 'string' || !hostname.endsWith('.localhost')) return lookup.apply(this, arguments);
  const done = typeof options === 'function' ? options : callback;
  if (typeof options === 'object' && options !== null && options.all)
    return process.nextTick(done, null, [{ address: '127.0.0.1', family: 4 }]);
  return process.nextTick(done, null, '127.0.0.1', 4);
};
