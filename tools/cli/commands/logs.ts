/**
 * `logs <jobId>`: what the platform logged about a job and, for a command stage (run_tests, ...),
 * the command's whole output, locally; links to them on AWS (tools/operator/job-logs.ts reads them).
 */
import type { JobRecord } from '../../../src/core/ports';
import { PLATFORM_LOG_FILE } from '../../local/state-dir';
import type { CommandOutput, CommandSpec } from '../command';
import type { CliContext } from '../context';
import { EXIT } from '../errors';
import { followRunOutput, OUTPUT_KEEP_BYTES, readJobLogs, type LogsLine } from '../../operator/job-logs';
import { requireJob } from '../../operator/jobs';
import { statusLabel } from '../../operator/views';

function logsText(job: JobRecord, lines: readonly LogsLine[], source: string): string {
  const text = [`${job.jobId} (${job.type}, ${statusLabel(job)}): ${source}`];
  for (const line of lines) {
    if (line.kind === 'log') {
      const fields = Object.entries(line.fields).map(
        ([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`,
      );
      text.push(
        [
          line.timestamp ?? '-',
          (line.level ?? '-').padEnd(5),
          line.function ?? '-',
          line.message ?? '',
          ...fields,
        ].join(' '),
      );
    } else if (line.kind === 'output') {
      const state = line.running ? ', still running: its output so far' : '';
      text.push(
        '',
        `--- output of ${line.buildId} (run ${line.run}${state}) ---`,
        line.text.replace(/\n$/, ''),
        `--- end of ${line.buildId}${line.running ? ' so far' : ''} ---`,
      );
    } else {
      text.push(`${line.what}:`, `  ${line.url}`);
    }
  }
  return text.join('\n');
}

export const logs: CommandSpec<CliContext> = {
  path: ['logs'],
  summary: "show a job's log lines and, for run_tests or another command stage, the command's whole output",
  positionals: [{ name: 'jobId', description: 'the job id' }],
  options: {
    follow: {
      type: 'boolean',
      description:
        "print a command stage's output as it is printed, until the job has finished (locally, or from the build's CloudWatch log on a stack)",
    },
  },
  notes: [
    `Locally: the lines of the platform log (<state-dir>/${PLATFORM_LOG_FILE}) that name the job, then the output`,
    `of each run of a command stage (the last ${OUTPUT_KEEP_BYTES / 2 ** 20} MiB of it). On AWS: links to the job's lines in each`,
    "function's CloudWatch log group (filtered by the job id) and to its build's log in CodeBuild.",
    '--follow prints only the output: what the run printed so far, then each new line, and at the end the',
    'job in its words on stderr (run `wait` for an exit code by the verdict). Ctrl-C stops following.',
    `Exit codes: 0 shown (also when nothing was logged yet); ${EXIT.notFound} the ledger does not know the job id.`,
  ],
  async run(ctx, { positionals, values }): Promise<CommandOutput> {
    if (values['follow'] === true) return follow(ctx, positionals[0] ?? '');
    const job = await requireJob(ctx, positionals[0] ?? '');
    const { lines, source } = await readJobLogs(await ctx.target(), job);
    return { data: lines, text: logsText(job, lines, source) };
  },
};

/**
 * `logs --follow`: the output straight to stdout as it is read (with --json, one `{"output"}` line
 * a piece, then the job's end as the last line); the job's end in words on stderr.
 */
async function follow(ctx: CliContext, jobId: string): Promise<CommandOutput> {
  const stop = new AbortController();
  const onInterrupt = () => stop.abort();
  process.once('SIGINT', onInterrupt);
  try {
    const onOutput = (text: string) => ctx.io.stdout(ctx.json ? `${JSON.stringify({ output: text })}\n` : text);
    const job = await followRunOutput(ctx, jobId, { onOutput, signal: stop.signal });
    ctx.note(`--- ${jobId}: ${statusLabel(job)} ---`);
    return { data: { jobId, status: job.status, label: statusLabel(job) }, text: '' };
  } finally {
    process.off('SIGINT', onInterrupt);
  }
}
