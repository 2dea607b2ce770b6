#!/usr/bin/env bash
# `mpiexec -n 2 ccscope topo ...` with bad input: every process reads the same
# flags and files before MPI is up, but the error is printed once in total
# (by the launcher's rank 0), and the launch exits 2.
# usage: topo_errors_once.sh CCSCOPE MPIEXEC
set -u
ccscope=$1
mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'not a topology\n' >"$work/garbage.xml"
failures=0
check() {  # NAME ARGS...
  local name=$1
  shift
  "$mpiexec" -n 2 "$ccscope" topo "$@" >"$work/out" 2>"$work/err" </dev/null
  local status=$? lines
  lines=$(grep -c "ccscope topo: error" "$work/err")
  if [ "$status" != 2 ] || [ "$lines" != 1 ]; then
    echo "FAIL: $name: exit $status (want 2), $lines error line(s) (want 1):"
    sed 's/^/    /' "$work/err"
    failures=$((failures + 1))
  fi
}
check missing-from --from "$work/MISSING"
check garbage-from --from "$work/garbage.xml"
check missing-nccl-topo --nccl-topo "$work/MISSING"
check zero-bytes -b 0
check measure-from --from "$work/garbage.xml" --measure
check bad-flag --threshold 2
[ "$failures" = 0 ] && echo "PASS"
exit "$failures"
