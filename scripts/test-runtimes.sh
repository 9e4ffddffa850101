#!/usr/bin/env bash
# The black-box runtime check (test/runtimes/run.ts) on Bun and on Deno, both
# from the npm registry (devDependencies `bun` and `deno`, so `npm ci` installs
# them), against the built package in dist/: ioredis, node-redis 5 and 6 and
# GLIDE, one server and a Cluster each, servers started by redis-rwlock/testing
# from that runtime. Builds dist/ first when it is missing or older than src/ or lua/
# (not counting src/lua/scripts.generated.ts, which gen-lua rewrites each run).
# The runtimes run side by side (each mostly waits: about 30 s, 1 s of CPU).
# Prints each runtime's failures and summary line (the full output:
# node_modules/.cache/runtimes/<runtime>.log); exits 1 if any failed.
# RUNTIMES="bun" narrows it; RUNTIME_CLIENTS, RUNTIME_TOPOLOGIES and
# TEST_SERVER pass through (test/runtimes/run.ts).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f dist/cjs/index.js ] || [ -n "$(find src lua -newer dist/cjs/index.js ! -name scripts.generated.ts -print -quit)" ]; then
  npm run build --silent
fi
# The runner's own failure path: a run that names no client it knows fails, not passes on no check.
if RUNTIME_CLIENTS=node-redis RUNTIME_TOPOLOGIES=server node_modules/.bin/bun test/runtimes/run.ts >/dev/null 2>&1; then
  echo "test:runtimes: the runner passed a run whose RUNTIME_CLIENTS named no client it knows" >&2
  exit 1
fi
logs=node_modules/.cache/runtimes
mkdir -p "$logs"
runtimes=(${RUNTIMES:-bun deno})
pids=()
for runtime in "${runtimes[@]}"; do
  bin=node_modules/.bin/$runtime
  case "$runtime" in
    bun) command=("$bin" test/runtimes/run.ts) ;;
    deno) command=(env DENO_NO_UPDATE_CHECK=1 "$bin" run -A test/runtimes/run.ts) ;; # no call home: CI reaches npm only
    *) echo "test:runtimes: unknown runtime $runtime (bun or deno)" >&2; exit 1 ;;
  esac
  if [ ! -x "$bin" ]; then
    echo "test:runtimes: $bin is missing; npm ci installs it (devDependency $runtime)" >&2
    exit 1
  fi
  timeout --kill-after=10 300 "${command[@]}" >"$logs/$runtime.log" 2>&1 & # a hung runtime fails, not CI
  pids+=($!)
done
failed=0
for i in "${!runtimes[@]}"; do
  log="$logs/${runtimes[$i]}.log"
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ "$rc" = 0 ]; then
    tail -n 1 "$log"
  else
    failed=1
    grep -v '^  ok ' "$log" || true
    echo "test:runtimes: ${runtimes[$i]} FAILED (exit $rc; full output in $log)"
  fi
done
exit "$failed"
