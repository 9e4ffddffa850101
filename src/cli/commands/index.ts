/**
 * Every command of the `redis-rwlock` CLI, in the order `--help` lists them.
 * To add one: write src/cli/commands/<name>.ts exporting a CliCommand, and
 * list it here.
 */
import type { CliCommand } from '../command.js';
import { demo } from './demo.js';
import { inspect } from './inspect.js';
import { list } from './list.js';
import { migrateCheck } from './migrate-check.js';
import { release } from './release.js';
import { top } from './top.js';

export const COMMANDS: readonly CliCommand[] = [inspect, list, top, release, migrateCheck, demo];
