/** The `agent-jobs` CLI. Everything lives in lambda/client/cli; this file only connects the terminal. */
import { COMMANDS } from '../lambda/client/cli/commands';
import { processIo, runCli } from '../lambda/client/cli/main';

void runCli(process.argv.slice(2), processIo(), COMMANDS).then((code) => {
  process.exitCode = code;
});
