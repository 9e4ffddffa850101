/** A server for the model checker, and connections to it, each on its own database (the checker's workers run side by side). */
import { Redis } from 'ioredis';
import { type RedisServerHandle, startRedisServer } from '../../src/testing/index.js';

export interface ModelServer {
  readonly server: RedisServerHandle;
  readonly redis: readonly Redis[];
  close(): Promise<void>;
}

/** Connections the checker uses by default: `MODEL_CONNECTIONS`, else 2 (one per core of a CI runner). */
export const CONNECTIONS = Number(process.env.MODEL_CONNECTIONS ?? 2);

export async function startModelServer(connections = CONNECTIONS): Promise<ModelServer> {
  const server = await startRedisServer();
  const redis = Array.from({ length: connections }, (_, db) => new Redis({ host: server.host, port: server.port, db }));
  return {
    server,
    redis,
    async close() {
      for (const r of redis) r.disconnect();
      await server.stop();
    },
  };
}

/** One line of the configuration table. */
export function describeResult(r: { config: string; states: number; transitions: number; depth: number; seconds: number }): string {
  return `${r.config}: ${r.states} states, ${r.transitions} transitions, depth ${r.depth}, ${r.seconds.toFixed(1)} s`;
}
