/** The command table: the one list from which dispatch and every help text are generated. */
import type { CommandSpec } from '../command';
import type { CliContext } from '../context';
import { consoleCommand } from './console';
import { dlqDismiss, dlqList, dlqPeek, dlqRedrive, dlqShow } from './dlq';
import { doctor } from './doctor';
import { enqueue } from './enqueue';
import { cancel, jobs, status, wait } from './jobs';
import { logs } from './logs';
import { mcpCommand } from './mcp';
import { demo, localUp, repoImport } from './local';
import { unfinished } from './unfinished';
import { workspaces, workspaceShow, workspaceUnblock } from './workspace';

export const COMMANDS: readonly CommandSpec<CliContext>[] = [
  localUp,
  demo,
  repoImport,
  enqueue,
  status,
  logs,
  wait,
  jobs,
  workspaces,
  workspaceShow,
  workspaceUnblock,
  dlqList,
  dlqShow,
  dlqRedrive,
  dlqDismiss,
  dlqPeek,
  cancel,
  unfinished,
  consoleCommand,
  mcpCommand,
  doctor,
];
