#!/usr/bin/env bash
# Makes sure the servers the tests, the demo and the bench start are on PATH:
# redis-server and redis-cli (>= 7.0) always, and valkey-server and valkey-cli
# (8.x, from Debian's bookworm-backports suite) for TEST_SERVER=valkey and CI.
# As root it installs Debian's packages; otherwise it says how to.
set -euo pipefail
has() { command -v "$1" >/dev/null 2>&1 && command -v "$2" >/dev/null 2>&1; }
root_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

if ! has redis-server redis-cli; then
  if root_apt; then
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

# Valkey: installed where we may (CI runs the suites on it too), needed only for TEST_SERVER=valkey.
if ! has valkey-server valkey-cli; then
  if root_apt && grep -qs bookworm /etc/os-release; then
    echo "redis-rwlock: installing valkey-server 8 from Debian's bookworm-backports suite..." >&2
    export DEBIAN_FRONTEND=noninteractive
    sources=/etc/apt/sources.list.d/debian-backports.sources
    if ! grep -qrs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
      # The same mirror as the system's own sources (no host is named here).
      # shellcheck source=scripts/debian-mirror.sh
      source "$(dirname "$0")/debian-mirror.sh"
      mirror=$(debian_mirror) || exit 1
      printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" >"$sources"
    fi
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends -t bookworm-backports valkey-server valkey-tools >/dev/null
    (service valkey-server stop || true) >/dev/null 2>&1
  elif [ "${TEST_SERVER:-}" = valkey ]; then
    echo "redis-rwlock: TEST_SERVER=valkey, but valkey-server and valkey-cli (8.x) are not installed." >&2
    echo "  Debian bookworm: add the bookworm-backports suite, then apt-get install -t bookworm-backports valkey-server valkey-tools" >&2
    echo "  Or set REDIS_SERVER_BIN and REDIS_CLI_BIN to the binaries." >&2
    exit 1
  fi
fi

# Redis 8 and Valkey 9: built from Debian's source packages into a cache outside
# the work tree, once per machine (scripts/build-servers.sh), when TEST_SERVER names one.
# (The npm package ships this script without build-servers.sh: there TEST_SERVER means nothing.)
case ${TEST_SERVER:-} in
  redis8 | valkey9) [ ! -f "$(dirname "$0")/build-servers.sh" ] || bash "$(dirname "$0")/build-servers.sh" "$TEST_SERVER" ;;
esac
