# Sourced by .ci/run and scripts/npm-test.sh: `beside CMD...` starts a command in the background, its output kept, while the
# next lines run; `joined LABEL` waits for it, prints its output, and fails if it failed. Used for
# `TEST_SERVER=valkey npm test` beside `npm test`: each run mostly waits on its servers and its
# bounds (about a third of one core), so together they take little longer than one.
#
# The command runs as a process group of its own (job control), stopped as a whole if the script
# ends before `joined` (a failing step, a signal): npm passes a signal to its script's shell alone,
# so the mocha under that shell, its test process and its redis-server processes would run on,
# beside whatever CI runs next.
beside_pid=''
beside_log=''

beside() {
  beside_log=$(mktemp)
  set -m
  "$@" >"$beside_log" 2>&1 &
  beside_pid=$!
  set +m
  trap beside_stop EXIT
  # bash runs no EXIT trap on a signal it does not trap.
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# The script ends with the command still running: stop its group, and show what it printed so far.
beside_stop() {
  [ -n "$beside_pid" ] || return 0
  kill -TERM -- "-$beside_pid" 2>/dev/null || true
  echo "--- stopped: what the run beside printed ---"
  cat "$beside_log"
  rm -f "$beside_log"
}

joined() {
  local status=0
  wait "$beside_pid" || status=$?
  beside_pid=''
  trap - EXIT
  echo "--- $1 ---"
  cat "$beside_log"
  rm -f "$beside_log"
  [ "$status" -eq 0 ] || { echo "redis-rwlock: $1 failed" >&2; exit 1; }
}
