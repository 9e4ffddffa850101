/**
 * The testing helper hands out ioredis clients (`client()`) and talks to
 * its servers through ioredis; ioredis is an optional peer of the package,
 * so a project without it is told in one line what to install, instead of
 * a stack from deep inside a `require`. Imported first by `index.ts`; runs
 * in the CommonJS build, which both of the package's entries load (in
 * development, as ES modules, there is no `require` and nothing to check).
 *
 * @internal
 * @module
 */
// A bundler's stand-in for `require` in an ES module (esbuild's) has no `resolve`: nothing to check there either.
if (typeof require === 'function' && typeof require.resolve === 'function') {
  try {
    require.resolve('ioredis');
  } catch {
    throw new Error('redis-rwlock/testing needs ioredis (its servers hand out ioredis clients): npm install --save-dev ioredis');
  }
}
