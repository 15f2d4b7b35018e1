import { UsageError } from './args.js';

import type { Command } from './command.js';

export type { Command };

// Each command is loaded only when called: `tollgate keys create` must not pay for the server.
const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  serve: () => import('./commands/serve.js'),
  simulate: () => import('./commands/simulate.js'),
  keys: () => import('./commands/keys.js'),
  credits: () => import('./commands/credits.js'),
  crds: () => import('./commands/crds.js'),
  operator: () => import('./commands/operator.js'),
};

const SUMMARIES: Record<string, string> = {
  serve: 'run the gateway (API and admin ports)',
  simulate: 'run the offline upstream simulator',
  keys: 'create API keys (prints the key once and its ApiKey manifest)',
  credits: 'grant credits, read an account, list usage (through the admin API)',
  crds: 'print or write the CustomResourceDefinitions',
  operator: 'run the Kubernetes operator (CRDs -> config snapshots over gRPC)',
};

function help(): string {
  const lines = Object.entries(SUMMARIES).map(([n, s]) => `  ${n.padEnd(10)} ${s}`);
  return `Usage: tollgate <command> [flags]\n\nCommands:\n${lines.join('\n')}\n\nRun "tollgate <command> --help" for its flags.`;
}

export async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(help());
    return name ? 0 : 2;
  }
  const load = COMMANDS[name];
  if (!load) {
    console.error(`tollgate: unknown command "${name}" (see tollgate --help)`);
    return 2;
  }
  const { command } = await load();
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(`${command.summary}\n\n${command.usage}`);
    return 0;
  }
  try {
    return (await command.run(rest)) ?? 0;
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`tollgate ${name}: ${err.message}`);
      return 2;
    }
    throw err;
  }
}

const code = await main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(`tollgate: ${err instanceof Error ? err.message : String(err)}`);
  return 1;
});
// Long-running commands (serve, operator, simulate) resolve only when they shut down.
process.exitCode = code;
