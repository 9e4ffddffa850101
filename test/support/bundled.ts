/**
 * The TypeScript entries that tests run as separate node processes (the CLI, the demo, the workers),
 * bundled with esbuild once per test process. Started with `node --import tsx`, each process compiled
 * every module again: about 1 s of start-up per process on the test machines, against about 0.35 s for
 * a bundle, and the CLI, demo and multi-process suites start hundreds of processes.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Inside the project, so that the bundle's imports of packages resolve to its node_modules.
const CACHE = path.join(ROOT, 'node_modules', '.cache');
let dir: string | undefined;
const built = new Map<string, string>();

/** The path of a bundle of `entry` (a .ts file of this project), to run as `node <path>`. */
export function bundled(entry: string): string {
  let out = built.get(entry);
  if (out !== undefined) return out;
  if (dir === undefined) {
    mkdirSync(CACHE, { recursive: true });
    const made = mkdtempSync(path.join(CACHE, 'redis-rwlock-tests-'));
    dir = made;
    process.once('exit', () => rmSync(made, { recursive: true, force: true }));
  }
  out = path.join(dir, `${path.relative(ROOT, entry).replaceAll(path.sep, '-')}.mjs`);
  buildSync({
    entryPoints: [entry],
    outfile: out,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: `node${process.versions.node}`,
    logLevel: 'warning',
  });
  built.set(entry, out);
  return out;
}
