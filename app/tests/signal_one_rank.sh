#!/usr/bin/env bash
# SIGTERM or SIGINT to one rank of `train` or `diag` (a batch system stopping
# one process, a user's kill) is a stop, not a crash: the job exits 128 +
# signal, the signalled rank says "stopped by SIGTERM", and no rank is
# reported as dead.
# usage: signal_one_rank.sh CCSCOPE MPIEXEC
set -u
ccscope=$1
mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# usage: stop_one NAME SIGNAL RANK EXPECTED_EXIT VERB ARGS...
stop_one() {
  local name=$1 sig=$2 rank=$3 expected=$4 dir="$work/$1"
  shift 4
  mkdir -p "$dir"
  # Each rank writes its pid where the test finds it (PMI_RANK: MPICH; Open MPI's own).
  "$mpiexec" -n 2 sh -c 'echo $$ >"$0/pid.${PMI_RANK:-$OMPI_COMM_WORLD_RANK}"; exec "$@"' \
    "$dir" "$ccscope" "$@" >"$dir/out" 2>"$dir/err" </dev/null &
  local launcher=$! deadline=$(($(date +%s) + 30))
  until [ -s "$dir/pid.$rank" ] && grep -q "$READY" "$dir/out" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ] || ! kill -0 "$launcher" 2>/dev/null; then
      fail "$name: not running its long phase within 30 s"
      sed 's/^/    /' "$dir/err"
      kill -9 "$launcher" 2>/dev/null
      wait "$launcher" 2>/dev/null
      return
    fi
    sleep 0.2
  done
  kill -s "${sig#SIG}" "$(cat "$dir/pid.$rank")"
  local status waited=0
  while kill -0 "$launcher" 2>/dev/null && [ "$waited" -lt 300 ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$launcher" 2>/dev/null; then
    fail "$name: still running 30 s after $sig"
    kill -9 "$launcher"
  fi
  wait "$launcher"
  status=$?
  [ "$status" = "$expected" ] || fail "$name: exit $status, want $expected"
  grep -q "rank $rank (.*): stopped by $sig; exit $expected" "$dir/err" ||
    fail "$name: no 'stopped by $sig' line from rank $rank"
  if grep -q " died " "$dir/err"; then fail "$name: a rank stopped on purpose was reported as dead"; fi
  [ "$failures" = 0 ] || sed 's/^/    /' "$dir/err"
}

READY="^ *[0-9]* *[0-9.]* "  # a step row
stop_one train-term SIGTERM 1 143 train --strategy ddp --steps 1000000 --print-every 1
stop_one train-int SIGINT 0 130 train --strategy ddp --steps 1000000 --print-every 1
READY="# ccscope diag"
stop_one diag-term SIGTERM 1 143 diag --stages 4 --train-steps 100000 --timeout 60
[ "$failures" = 0 ] && echo "PASS"
exit "$failures"
