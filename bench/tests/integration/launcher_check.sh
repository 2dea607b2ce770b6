#!/usr/bin/env bash
# Started without mpiexec but with OMPI_COMM_WORLD_SIZE=4 in the environment (as
# if Open MPI's launcher had started 4 ranks), ccscope must see that MPI reports
# a single rank and stop with exit status 2 and a message about the launcher,
# instead of silently benchmarking one rank.
#
# usage: launcher_check.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

status=0
OMPI_COMM_WORLD_SIZE=4 timeout -k 5 60 "$CCSCOPE" bench allreduce -b 8 -e 8 -n 1 -w 0 --no-progress \
  --csv "$WORK/out.csv" >"$WORK/stdout" 2>"$WORK/stderr" </dev/null || status=$?
assert_eq 2 "$status" "exit status with OMPI_COMM_WORLD_SIZE=4 and no launcher"
if ! grep -qi 'launcher' "$WORK/stderr"; then
  fail "stderr does not mention the launcher"
  show_file stderr "$WORK/stderr"
fi
# Word-bounded and worded as ccscope says it: the MPI library's version in the same
# line ("MPICH Version: 4.0.2", "Open MPI v4.1.4") must not satisfy it.
grep -qE '\<launcher started 4 ranks\>' "$WORK/stderr" ||
  fail "stderr does not say the launcher started 4 ranks: $(cat "$WORK/stderr")"
lines=$(grep -c '' "$WORK/stderr" || true)
assert_eq 1 "$lines" "lines on stderr"
assert_no_crash_text "$WORK/stderr" "launcher check"
# Records, or anything read-records cannot read as a header alone.
if [ -s "$WORK/out.csv" ] && [ -n "$(csv_select "$WORK/out.csv" size_bytes 2>&1)" ]; then
  fail "a CSV with measurements was written although the launch was wrong"
fi

# Control: the same run without the variable succeeds (so the failure above is the check).
status=0
timeout -k 5 60 "$CCSCOPE" bench allreduce -b 8 -e 8 -n 1 -w 0 --no-progress \
  >"$WORK/control.stdout" 2>"$WORK/control.stderr" </dev/null || status=$?
assert_eq 0 "$status" "control run without OMPI_COMM_WORLD_SIZE: exit status"
finish
