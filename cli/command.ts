/** One `tollgate <command>`: cli/main.ts loads it only when called. */
export interface Command {
  summary: string;
  usage: string;
  run(argv: string[]): number | void | Promise<number | void>;
}
