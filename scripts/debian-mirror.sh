#!/usr/bin/env bash
# Prints the Debian mirror the system's own apt sources use (the first URI
# ending in /debian in /etc/apt/sources.list.d/*.sources, else in the one-line
# sources.list files), or $DEBIAN_MIRROR when set. No mirror's host is named
# in the project's files: with none found it fails, saying so.
#   source scripts/debian-mirror.sh; m=$(debian_mirror) || exit 1
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    echo "${DEBIAN_MIRROR%/}"
    return
  fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -nE 's/^URIs:[[:space:]]*//p' | tr ' \t' '\n\n' |
    grep -E '^[a-z+]+://[^[:space:]]+/debian/?$' | head -n 1 || true)
  if [ -z "$m" ]; then
    m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -nE 's/^deb(-src)?[[:space:]]+(\[[^]]*\][[:space:]]+)?([a-z+]+:\/\/[^[:space:]]+\/debian)\/?[[:space:]].*/\3/p' | head -n 1 || true)
  fi
  if [ -z "$m" ]; then
    echo "redis-rwlock: no Debian mirror found in the system's apt sources (/etc/apt/sources.list or /etc/apt/sources.list.d/: a URI ending in /debian); set DEBIAN_MIRROR to the mirror to use." >&2
    return 1
  fi
  echo "${m%/}"
}
