/**
 * With `TEST_LUA_DIR=<dir>`: every library script is built from that
 * directory (laid out as lua/) instead of lua/, before any driver hashes
 * one. The mutation tests (test/model/mutate.ts) run the script suites so
 * on a mutated copy of lua/, never touching the real files. Imported by the
 * root hooks before the declared-keys guard, which then guards these.
 */

import { LUA_SOURCES } from '../../src/lua/scripts.generated.js';
import { buildLuaSources } from '../support/lua-build.js';

const dir = process.env.TEST_LUA_DIR;
if (dir) Object.assign(LUA_SOURCES as Record<string, string>, buildLuaSources(dir));
