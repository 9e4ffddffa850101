#!/usr/bin/env bash
# The client-library runs that `npm test` leaves out to stay well under 10
# minutes on 2 cores (test/setup/topologies.ts): the slowest suites
# (declared with NODE_REDIS_IN_CI) on node-redis 5, and the suites that run on
# every client (ALL_CLIENTS) on node-redis 6 and on GLIDE (with the suites
# declared for GLIDE too: ONE_NODE_REDIS, NODE_REDIS_IN_CI_AND_GLIDE, or
# naming 'glide'). CI runs it after `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# In those files only the NODE_REDIS_IN_CI suites run on node-redis 5 (TEST_NODE_REDIS_IN_CI_ONLY):
# npm test ran their other suites on it already.
heavy=$(grep -l "NODE_REDIS_IN_CI" test/integration/*.test.ts)
light=$(grep -l "clients: ALL_CLIENTS\|selectedClients(ALL_CLIENTS)\|'node-redis6'\] }" test/integration/*.test.ts)
glide=$(grep -l "clients: ALL_CLIENTS\|selectedClients(ALL_CLIENTS)\|'glide'\]\|clients: ONE_NODE_REDIS\|_AND_GLIDE" test/integration/*.test.ts)
TEST_CLIENTS=node-redis TEST_NODE_REDIS_IN_CI_ONLY=1 npx mocha $heavy
TEST_CLIENTS=node-redis6 npx mocha $light
TEST_CLIENTS=glide npx mocha $glide
