/** The `agent-jobs` CLI. Everything lives in src/cli; this file only connects the terminal. */
import { COMMANDS } from '../src/cli/commands';
import { processIo, runCli } from '../src/cli/main';

void runCli(process.argv.slice(2), processIo(), COMMANDS).then((code) => {
  process.exitCode = code;
});
