#!/usr/bin/env bash
# Everything `npm test` and `npm run demo` need on a fresh clone: the
# redis-server binary, the npm packages, and the generated Lua module.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-redis.sh
if [ ! -x node_modules/.bin/mocha ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "redis-rwlock: installing npm packages (npm ci)..." >&2
  npm ci --no-audit --no-fund --loglevel=error
fi
node scripts/gen-lua.mjs
