#!/usr/bin/env bash
# Started with Open MPI's launcher variables (as if Open MPI's mpirun had started
# 4 ranks) while ccscope is built with MPICH, ccscope must see that its MPI
# cannot join that launcher (job::decide_launch) and stop with exit status 2 and
# one line naming both, instead of silently benchmarking one rank of four.
#
# usage: launcher_check.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

status=0
launcher_env=(OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0
  OMPI_COMM_WORLD_LOCAL_SIZE=4)
if mpiexec --version 2>&1 | grep -q 'Open MPI'; then
  # An Open MPI build joins mpirun's PMIx: MPICH's variables are the foreign launcher.
  launcher_env=(PMI_SIZE=4 PMI_RANK=0 PMI_FD=99)
fi
env "${launcher_env[@]}" timeout -k 5 60 "$CCSCOPE" bench allreduce -b 8 -e 8 -n 1 -w 0 --no-progress \
  --csv "$WORK/out.csv" >"$WORK/stdout" 2>"$WORK/stderr" </dev/null || status=$?
assert_eq 2 "$status" "exit status with ${launcher_env[*]} and no launcher"
# Worded as ccscope says it: which launcher started the process, and which MPI
# ccscope has (not the library's version line).
grep -qE 'started this process|neither PMI_FD' "$WORK/stderr" ||
  fail "stderr does not say which launcher started the process: $(cat "$WORK/stderr")"
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
