/**
 * Synth-time rules for the job-type catalog (contract/job-types.ts): a fork that declares a job
 * type wrongly learns it from `cdk synth`, with the setting named, instead of from a function that
 * fails at run time. Worker and queue numbers (timeouts, memory, batch size, ...) are checked again
 * by their constructs after config/<env>.json overrides them.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BUILD_EVENTS, SEQUENCER, type JobTypeDeclaration } from '../contract/job-types';
import { stageQueueUrlEnv } from '../contract/runtime-env';
import { queueUrlOutputKey } from '../contract/stack-outputs';
import { SettingsProblems } from './constructs/settings-problems';

/** Lambda's longest timeout (seconds). */
const MAX_FUNCTION_TIMEOUT_SECONDS = 900;
/** A type name becomes part of environment variable names, metric dimensions and CLI flags. */
const TYPE_NAME = /^[a-z][a-z0-9_]{0,39}$/;
/** A queue name becomes a construct id, an output key and (locally) an SQS queue name. */
const QUEUE_NAME = /^[a-z][a-z0-9-]{0,39}$/;
/** Workers that are not job types: a job type may not take their names. */
const RESERVED_NAMES = ['sequencer', 'build_events'];

/**
 * Every problem of the catalog, each naming its setting (`JOB_TYPES.<type>.<setting>`).
 * `projectRoot` is where processor and handler paths are looked up.
 */
export function catalogProblems(types: Readonly<Record<string, JobTypeDeclaration>>, projectRoot: string): string[] {
  const problems = new SettingsProblems();
  // Queue names and the names derived from them and from type names must not collide.
  const queues = new Map<string, string>([
    [SEQUENCER.queue, 'the sequencer'],
    [BUILD_EVENTS.queue, 'the build-events consumer'],
  ]);
  const outputKeys = new Map<string, string>([...queues].map(([queue, owner]) => [queueUrlOutputKey(queue), owner]));
  const envNames = new Map<string, string>();
  const fileExists = (relative: string) => existsSync(join(projectRoot, relative));

  for (const [type, declaration] of Object.entries(types)) {
    const at = (setting: string) => `JOB_TYPES.${type}${setting ? `.${setting}` : ''}`;
    if (!TYPE_NAME.test(type))
      problems.add(
        at(''),
        `the type name must match ${TYPE_NAME.source} (it names environment variables and CLI values)`,
      );
    if (RESERVED_NAMES.includes(type))
      problems.add(at(''), `"${type}" is the name of a platform worker; choose another`);
    const env = stageQueueUrlEnv(type);
    const envOwner = envNames.get(env);
    if (envOwner)
      problems.add(
        at(''),
        `its queue URL variable ${env} is already ${envOwner}'s: choose a name that differs in more than case`,
      );
    envNames.set(env, type);

    if (declaration.processor === undefined) {
      if (declaration.lane === 'ordered')
        problems.add(
          at('processor'),
          'an ordered job type needs the mutation processor the sequencer runs (src/core/jobs/<type>.ts)',
        );
      else if (declaration.command === undefined)
        problems.add(at('processor'), 'a stage needs a processor, or a `commandStage` declaration to run a command');
    } else if (!fileExists(declaration.processor)) {
      problems.add(at('processor'), `${declaration.processor} does not exist`);
    }

    for (const required of declaration.requires ?? []) {
      if (types[required]?.command === undefined)
        problems.add(
          at('requires'),
          `"${required}" is not a command stage of the catalog: a stage requires the verdicts of command stages`,
        );
      if (required === type) problems.add(at('requires'), 'a stage cannot require itself');
    }
    if (declaration.lane === 'ordered') {
      if (declaration.requires?.length)
        problems.add(
          at('requires'),
          'only a stage can require verdicts: an ordered job type runs in the sequencer, before any stage at its commit',
        );
      if (declaration.stage)
        problems.add(at('stage'), 'an ordered job type runs inside the sequencer: it has no stage queue or function');
      if (declaration.command) problems.add(at('command'), 'only a stage can be a command stage (lane "staged")');
      continue;
    }
    const { stage } = declaration;
    if (!stage) {
      problems.add(at('stage'), 'a staged job type needs its stage settings (queue, function, alarms)');
      continue;
    }
    if (!QUEUE_NAME.test(stage.queue))
      problems.add(at('stage.queue'), `"${stage.queue}" must match ${QUEUE_NAME.source}`);
    const owner = queues.get(stage.queue) ?? outputKeys.get(queueUrlOutputKey(stage.queue));
    if (owner) problems.add(at('stage.queue'), `"${stage.queue}" is already the queue of ${owner}`);
    queues.set(stage.queue, type);
    outputKeys.set(queueUrlOutputKey(stage.queue), type);
    if (!fileExists(stage.handlerEntry)) problems.add(at('stage.handlerEntry'), `${stage.handlerEntry} does not exist`);
    // The queue's visibility timeout is VISIBILITY_TIMEOUT_FACTOR times this: at 900 s it stays well
    // under SQS's 12 hours, so the function's limit is the one that binds.
    problems.check(
      at('stage.timeoutSeconds'),
      stage.timeoutSeconds,
      (v) => v < 1 || v > MAX_FUNCTION_TIMEOUT_SECONDS,
      `must be 1..${MAX_FUNCTION_TIMEOUT_SECONDS} seconds (the Lambda maximum). A command stage's build is not bound by it: ` +
        'its function starts the build and returns, and the build may run up to testRunnerTimeoutMinutes',
    );
    if (declaration.command && !declaration.command.defaultCommand.trim())
      problems.add(at('command.defaultCommand'), 'must be a shell command');
    if (declaration.command && !declaration.command.subject.trim())
      problems.add(at('command.subject'), 'must name what the command checks ("tests", "lint")');
    for (const [limit, value] of Object.entries(declaration.command?.limits ?? {})) {
      problems.check(
        at(`command.limits.${limit}`),
        value,
        (v) => !Number.isInteger(v) || v < 1,
        'must be a whole number of at least 1 (the local runner ends a run that reaches it)',
      );
    }
  }
  return problems.list();
}
