/** The scripts' build of scripts/lua-build.mjs, typed: every script of a directory laid out as lua/, by name. */
// @ts-expect-error: a plain .mjs build script, without declarations
import { buildLuaSources as build } from '../../scripts/lua-build.mjs';

export const buildLuaSources = build as (luaDir: string) => Record<string, string>;
