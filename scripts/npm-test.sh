#!/usr/bin/env bash
# npm test, in three parts:
# 1. the suite's files in four mocha workers (a test process mostly waits on its servers and its bounds);
# 2. the files whose bounds need CPU, in one process, beside the script suites run with every key a
#    script touches checked against its KEYS (as npm run test:declared-keys), about one core for a
#    minute of the other's two and a half;
# 3. alone, the files that judge the server time of the library's calls by SLOWLOG beside a control.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
SLOWLOG_FILES=(test/integration/renewal-batches.test.ts test/integration/inspect-pages.test.ts test/integration/clock-stands-still.test.ts)
mocha --config .mocharc.npm-test.json
source scripts/beside.sh
beside env TEST_DECLARED_KEYS=1 mocha --config .mocharc.declared-keys.json "${SLOWLOG_FILES[@]/#/--ignore=}"
serial=0
mocha --config .mocharc.npm-test-serial.json || serial=$?
joined "the script suites, every key checked against the script's KEYS"
[ "$serial" -eq 0 ] || exit "$serial"
TEST_DECLARED_KEYS=1 mocha "${SLOWLOG_FILES[@]}"
