#!/usr/bin/env bash
# The rows CI runs on the newer servers, Redis 8.0 and Valkey 9.1 (built once
# per machine from Debian's source packages by scripts/build-servers.sh), on
# both topologies: the scripts, renewal, inspect, resharding and server-check
# suites (on ioredis and node-redis 5, as `npm test`), the network fault rows
# (on ioredis: node-redis 6 and GLIDE run them on Redis 7.0 and Valkey 8.0,
# and the three clients took 3.5 minutes a server here, which .ci/run's
# 45 minutes cannot spare; TEST_CLIENTS=ioredis,node-redis6,glide runs them
# all), and on Valkey 9 the atomic slot migration row (CLUSTER MIGRATESLOTS).
# Every suite runs on Redis 7.0 and Valkey 8.0 (`npm test`,
# `TEST_SERVER=valkey npm test`).
#   bash scripts/test-servers.sh [redis8] [valkey9]     (no argument: both)
set -euo pipefail
cd "$(dirname "$0")/.."
servers=("$@")
[ ${#servers[@]} = 0 ] && servers=(redis8 valkey9)
files=()
for suite in scripts renewal-batches inspect-pages resharding server-check; do files+=("test/integration/$suite.test.ts"); done
for server in "${servers[@]}"; do
  bash scripts/build-servers.sh "$server"
  echo "redis-rwlock: TEST_SERVER=$server: the scripts, renewal, inspect, resharding and server-check suites" >&2
  TEST_SERVER=$server npx mocha "${files[@]}"
  rows='network faults between clients and Redis'
  [ "$server" = valkey9 ] && rows="$rows|atomic slot migration"
  echo "redis-rwlock: TEST_SERVER=$server: the fault rows /$rows/" >&2
  TEST_SERVER=$server TEST_CLIENTS=${TEST_CLIENTS:-ioredis} npx mocha --config .mocharc.faults.json --grep "$rows"
done
