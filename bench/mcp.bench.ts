/**
 * The MCP server as an agent's runtime meets it, against a running local platform: how long
 * `agent-jobs mcp` takes from spawn until it has answered `initialize` and `tools/list` (what a
 * runtime waits for before the agent sees a tool), next to `--version` in the same run; and a
 * call on a server already running (`job_status`) next to the same read by a fresh CLI process
 * (`agent-jobs status`). Driven by the MCP SDK's own client over stdio; CPU read by the same
 * probe as the CLI latency benchmark (cli-latency.bench.ts).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
  BIN,
  Cli,
  describe,
  PROBE,
  repositoryAndPatch,
  startLocalPlatform,
  wall,
  type CallTime,
} from './cli-latency.bench';
import { fmt, loadDuring, loadLine, median, quick, type Benchmark, type BenchRow } from './harness';

/** Spawn to `tools/list` answered; the CPU the server used from its start to its exit (stdin closed right after). */
async function serverStart(stateDir: string, probe: string, cpuFile: string): Promise<CallTime> {
  await writeFile(cpuFile, '');
  const started = performance.now();
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--require', probe, BIN, 'mcp', '--state-dir', stateDir],
    env: { ...(process.env as Record<string, string>), CPU_PROBE_FILE: cpuFile },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(transport);
  await client.listTools();
  const wallMs = performance.now() - started;
  await client.close();
  return { wallMs, cpuMs: Number((await readFile(cpuFile, 'utf8')).trim()) };
}

export const bench: Benchmark = {
  name: 'mcp',
  async run() {
    const runs = quick() ? 3 : 10;
    const calls = quick() ? 5 : 20;
    const dir = await mkdtemp(join(tmpdir(), 'bench-mcp-'));
    const stateDir = join(dir, 'state');
    const probe = join(dir, 'cpu-probe.js');
    const cpuFile = join(dir, 'cpu.txt');
    await writeFile(probe, PROBE);
    const cli = new Cli(stateDir, probe, cpuFile);
    const rows: BenchRow[] = [];
    const loadBefore = loadLine();
    const platform = await startLocalPlatform(stateDir);
    try {
      const { repo, diff } = await repositoryAndPatch(dir);
      const url = (
        JSON.parse((await cli.call(['repo', 'import', repo, '--name', 'bench', '--json'], 0)).stdout) as { url: string }
      ).url;
      await cli.call(
        [
          'enqueue',
          '--type',
          'apply_patch',
          '--workspace',
          'ws-bench',
          '--job-id',
          'bench-1',
          '--repo',
          url,
          '--branch',
          'bench',
          '--diff-file',
          diff,
          '--message',
          'Bench',
        ],
        0,
      );
      await cli.call(['wait', 'bench-1', '--timeout', '120'], 0);
      // First runs write the code caches (bin/cli-bundle.js), as a user's first calls do.
      await serverStart(stateDir, probe, cpuFile);
      await cli.call(['status', 'bench-1'], 0);

      const starts: CallTime[] = [];
      const versions: CallTime[] = [];
      for (let i = 0; i < runs; i++) {
        starts.push(await serverStart(stateDir, probe, cpuFile));
        versions.push(await cli.call(['--version'], 0));
      }
      const client = new Client({ name: 'bench', version: '1' });
      await client.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [BIN, 'mcp', '--state-dir', stateDir],
          stderr: 'ignore',
        }),
      );
      const toolCalls: number[] = [];
      const statusCalls: CallTime[] = [];
      try {
        await client.callTool({ name: 'job_status', arguments: { jobId: 'bench-1' } });
        for (let i = 0; i < calls; i++) {
          const started = performance.now();
          await client.callTool({ name: 'job_status', arguments: { jobId: 'bench-1' } });
          toolCalls.push(performance.now() - started);
          statusCalls.push(await cli.call(['status', 'bench-1'], 0));
        }
      } finally {
        await client.close();
      }
      rows.push(
        {
          label: '`agent-jobs mcp`: spawn to `initialize` and `tools/list` answered; CPU to its exit',
          value: describe(starts),
        },
        { label: '`agent-jobs --version` in the same run', value: describe(versions) },
        {
          label: 'server start vs --version, median wall',
          value: fmt.ratio(median(wall(starts)) / median(wall(versions))),
        },
        { label: '`job_status` on a running server (one tool call)', value: fmt.msSpread(toolCalls) },
        { label: '`agent-jobs status <jobId>` (a fresh process), interleaved', value: describe(statusCalls) },
        {
          label: 'tool call vs CLI call, median wall',
          value: fmt.ratio(median(toolCalls) / median(wall(statusCalls))),
        },
      );
    } finally {
      await platform.stop();
      await rm(dir, { recursive: true, force: true });
    }
    return {
      title: 'MCP server: start and a call',
      description: [
        `\`agent-jobs mcp\` driven by the MCP SDK's client over stdio against a running local platform: ${runs} server starts, each followed by a \`--version\` call, then ${calls} \`job_status\` calls on one running server, each followed by an \`agent-jobs status\` call. Median (min-max).`,
        loadDuring(loadBefore),
        "The server loads the MCP SDK (from node_modules, for this command only) and builds every tool's input schema from the catalog before it answers; a running server answers a read without a process start.",
        '',
        'Command: `npm run bench -- mcp`',
      ].join('\n'),
      rows,
    };
  },
};
