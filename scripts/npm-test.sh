#!/usr/bin/env bash
# npm test: the suite's files in four mocha workers (a test process mostly waits on its servers and
# its bounds); then the files whose bounds need CPU, in one process, beside the script suites run
# with every key a script touches checked against its KEYS (npm run test:declared-keys), which
# take about one core for a minute of the serial files' two and a half.
set -euo pipefail
cd "$(dirname "$0")/.."
mocha --config .mocharc.npm-test.json
source scripts/beside.sh
beside npm run --silent test:declared-keys
mocha --config .mocharc.npm-test-serial.json
joined "the script suites, every key checked against the script's KEYS (npm run test:declared-keys)"
