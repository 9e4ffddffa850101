#!/usr/bin/env bash
# Builds the newer servers the tests can pick with TEST_SERVER (test/setup/server.ts)
# from Debian's own source packages, once per machine:
#
#   redis8   Redis 8.0   (source package redis  5:8.0.6-3, Debian trixie/sid)
#   valkey9  Valkey 9.1  (source package valkey 9.1.2-1,   Debian trixie/sid)
#
#   bash scripts/build-servers.sh [redis8] [valkey9]     (no argument: both)
#
# Each build lands in the cache, $REDIS_RWLOCK_SERVERS or else
# ${XDG_CACHE_HOME:-~/.cache}/redis-rwlock/servers, as NAME-VERSION/bin/ with a
# NAME symlink to it; a server already there is not built again. The cache lives
# outside the work tree on purpose: `npm ci` deletes node_modules/ (so
# node_modules/.cache would not survive CI's own install step), and CI runs in a
# fresh clone each time, so a project-local folder would rebuild on every run.
#
# Sources come through a private apt configuration under the cache (deb-src
# lines only, for trixie and sid): the system's apt sources, lists and
# preferences are not touched, so no binary package from those suites can be
# installed or upgraded by it. The mirror is the one the system's apt sources
# use (or $DEBIAN_MIRROR); with none found it stops and says so.
#
# The build is upstream's `make` on the sources as Debian patched them, with
# their bundled dependencies (jemalloc, Lua, hiredis/libvalkey): nothing else is
# downloaded. BUILD_TLS=no: the suites run on these servers do not use TLS (the
# TLS suite runs on the default server only), so OpenSSL headers are not needed.
# Redis 8's modules (search, JSON, time series...) are off by default
# (BUILD_WITH_MODULES) and stay off: they need a Rust toolchain and downloads,
# and the library uses none of them. OPTIMIZATION=-O2 leaves out upstream's
# -O3 -flto, whose link-time pass was most of the build's time here (the
# tests' servers need no last percent of speed; the bench's published figures
# are Redis 7.0's), and only the server and the CLI are built.
set -euo pipefail

REDIS8_VERSION=${REDIS8_VERSION:-5:8.0.6-3}
VALKEY9_VERSION=${VALKEY9_VERSION:-9.1.2-1}
root=${REDIS_RWLOCK_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/redis-rwlock/servers}
jobs=${BUILD_JOBS:-2}

# shellcheck source=scripts/debian-mirror.sh
source "$(dirname "$0")/debian-mirror.sh"

say() { echo "redis-rwlock: $*" >&2; }
die() { say "$*"; exit 1; }

# apt-get and apt-cache on the private configuration: only our deb-src lines,
# our own lists and caches.
apt_private() {
  local tool=$1; shift
  "$tool" -q -o Dir::Etc::SourceList="$root/apt/none.list" -o Dir::Etc::SourceParts="$root/apt/sources" \
    -o Dir::State::Lists="$root/apt/lists" -o Dir::Cache="$root/apt/cache" \
    -o APT::Sandbox::User=root "$@"
}

apt_ready=
prepare_apt() {
  [ -n "$apt_ready" ] && return
  command -v apt-get >/dev/null 2>&1 || die "apt-get is needed to fetch Debian's source packages (or put the binaries in $root/NAME/bin yourself)."
  local m; m=$(debian_mirror) || exit 1
  mkdir -p "$root/apt/sources" "$root/apt/lists/partial" "$root/apt/cache/archives/partial"
  : >"$root/apt/none.list"
  printf 'Types: deb-src\nURIs: %s\nSuites: trixie sid\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$m" >"$root/apt/sources/debian-src.sources"
  say "fetching the trixie and sid source indexes from $m (deb-src only, private to $root/apt)..."
  apt_private apt-get update >"$root/apt/update.log" 2>&1 || { cat "$root/apt/update.log" >&2; die "apt-get update of the deb-src indexes failed"; }
  # apt-get update exits 0 when an index cannot be fetched (a warning, the old
  # lists kept): without this, the next step's failure blamed a replaced version.
  if grep -qE '^[WE]: (Failed to fetch|Some index files failed to download)' "$root/apt/update.log"; then
    cat "$root/apt/update.log" >&2
    die "could not fetch the trixie and sid source indexes from $m (no network, or the mirror is unreachable: log above); set DEBIAN_MIRROR to one that answers"
  fi
  apt_ready=1
}

# Build tools: a C compiler, make, pkg-config, and dpkg-source to unpack.
need_tools() {
  local missing=()
  command -v cc >/dev/null 2>&1 || missing+=(gcc)
  command -v make >/dev/null 2>&1 || missing+=(make)
  command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
  command -v dpkg-source >/dev/null 2>&1 || missing+=(dpkg-dev)
  [ ${#missing[@]} = 0 ] && return
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing build tools from the system's own suites: ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    die "missing build tools: ${missing[*]} (install them, then run this again)"
  fi
}

# usable DEST PREFIX: a server built there runs (its build is not needed again).
usable() { [ -x "$1/bin/$2-server" ] && "$1/bin/$2-server" --version >/dev/null 2>&1; }

# build NAME SOURCE-PACKAGE DEBIAN-VERSION BINARY-PREFIX
build() {
  local name=$1 pkg=$2 version=$3 prefix=$4
  local upstream=${version#*:}
  local dest="$root/$name-$upstream"
  if usable "$dest" "$prefix"; then
    ln -sfn "$name-$upstream" "$root/$name"
    say "$name: cached, $("$dest/bin/$prefix-server" --version | sed -E 's/.* v=([^ ]+).*/\1/') in $dest"
    return
  fi
  need_tools
  prepare_apt
  local work="$root/build/$name"
  rm -rf "$work" && mkdir -p "$work"
  say "$name: fetching Debian's source package $pkg=$version..."
  (cd "$work" && apt_private apt-get source --download-only "$pkg=$version") >"$work/fetch.log" 2>&1 || {
    cat "$work/fetch.log" >&2
    die "$name: could not fetch $pkg=$version from trixie or sid (a newer upload may have replaced it: see apt-cache showsrc $pkg; set ${name^^}_VERSION to one it lists)."
  }
  (cd "$work" && dpkg-source -q -x --no-check ./*.dsc src) >>"$work/fetch.log" 2>&1 || { cat "$work/fetch.log" >&2; die "$name: dpkg-source could not unpack the source"; }
  local started=$SECONDS
  local flags=(BUILD_TLS=no USE_SYSTEMD=no OPTIMIZATION=-O2 "$prefix-server" "$prefix-cli")
  say "$name: building $pkg $upstream (nice -n 10 make -C src -j$jobs ${flags[*]}; log in $work/make.log)..."
  (cd "$work/src" && nice -n 10 make -C src -j"$jobs" "${flags[@]}") >"$work/make.log" 2>&1 || {
    tail -n 40 "$work/make.log" >&2
    die "$name: make failed (whole log: $work/make.log)"
  }
  rm -rf "$dest.tmp" && mkdir -p "$dest.tmp/bin"
  cp "$work/src/src/$prefix-server" "$work/src/src/$prefix-cli" "$dest.tmp/bin/"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  ln -sfn "$name-$upstream" "$root/$name"
  rm -rf "$work"
  say "$name: built $("$dest/bin/$prefix-server" --version | sed -E 's/.* v=([^ ]+).*/\1/') in $((SECONDS - started))s, in $dest"
}

names=("$@")
[ ${#names[@]} = 0 ] && names=(redis8 valkey9)
mkdir -p "$root"
locked=
for name in "${names[@]}"; do
  case $name in
    redis8) args=(redis8 redis "$REDIS8_VERSION" redis) ;;
    valkey9) args=(valkey9 valkey "$VALKEY9_VERSION" valkey) ;;
    *) die "unknown server '$name': this script builds redis8 and valkey9" ;;
  esac
  # One build at a time on this machine (CI starts this in the background and
  # calls it again to wait): a server already built needs no lock; one that does not run is built
  # again, so under the lock (the same check as build's).
  if [ -z "$locked" ] && ! usable "$root/${args[0]}-${args[2]#*:}" "${args[3]}"; then
    exec 9>"$root/.lock"
    command -v flock >/dev/null 2>&1 && flock 9
    locked=1
  fi
  build "${args[@]}"
done
