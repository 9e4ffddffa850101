#!/usr/bin/env bash
# Makes sure redis-server and redis-cli (>= 7.0) are on PATH before tests, the
# demo or the bench start real servers. As root it installs Debian's packages;
# otherwise it says how to.
set -euo pipefail
need() { command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; }
if ! need; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis-rwlock: installing Debian's redis-server package (needed to start local test servers)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
    # The package starts a system service on port 6379; our servers use their own ports, so stop it.
    (service redis-server stop || true) >/dev/null 2>&1
  else
    echo "redis-rwlock: redis-server (>= 7.0) is not installed." >&2
    echo "  Debian/Ubuntu: sudo apt-get install redis-server   macOS: brew install redis" >&2
    echo "  Or set REDIS_SERVER_BIN and REDIS_CLI_BIN to the binaries." >&2
    exit 1
  fi
fi
major=$(redis-server --version | sed -E 's/.*v=([0-9]+).*/\1/')
if [ "${major:-0}" -lt 7 ]; then
  echo "redis-rwlock: redis-server $(redis-server --version | sed -E 's/.*v=([^ ]+).*/\1/') is too old; 7.0 or newer is needed (sharded pub/sub)." >&2
  exit 1
fi
