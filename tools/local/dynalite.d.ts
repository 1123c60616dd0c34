// dynalite ships no types; this is the part of its API the local platform uses.
declare module 'dynalite' {
  import type { Server } from 'node:http';

  interface DynaliteOptions {
    /** LevelDB directory; in memory when absent. */
    path?: string;
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
  }

  function dynalite(options?: DynaliteOptions): Server;
  export = dynalite;
}
