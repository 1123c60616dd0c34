/**
 * Jest setup (every test file): switches off the AWS SDK's NodeVersionSupportWarning, the notice
 * that SDK releases published after January 2027 will need Node.js 22. It says nothing about the
 * code under test: the lockfile pins this SDK, and the project's development toolchain supports
 * Node.js 20 (README). The SDK's own documented variable turns off that one notice and nothing
 * else, so every other warning, from the SDK or from Node, still prints.
 */
process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] = 'true';
