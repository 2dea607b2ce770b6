#!/usr/bin/env bash
# A rank killed with SIGKILL in the middle of a long run must make the job fail
# (non-zero exit) within 30 s instead of hanging, with --timeout 10, and leave no
# ccscope process behind.
#
# usage: killed_rank.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary
MARKER="$WORK/run.csv"   # in every rank's command line: finds this test's processes only
JOB=
on_exit 'kill_leftovers "$MARKER" "$JOB"'

# setsid: the job gets its own process group, so cleanup can reach all of it.
setsid "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 --timeout 10 \
  --no-progress --csv "$MARKER" >"$WORK/stdout" 2>"$WORK/stderr" </dev/null &
JOB=$!
wait_for_rank_pids "$JOB" 2 30
sleep 2  # well inside the timed loop of the 1 MiB size
kill -0 "$JOB" 2>/dev/null || { show_file stderr "$WORK/stderr"; die "the job ended before a rank was killed"; }
victim=$(find_rank_pid "$JOB" 1) || die "rank 1's process disappeared before it was killed"
log "killing rank 1 (pid $victim) with SIGKILL"
kill -KILL "$victim"

wait_pid_with_deadline "$JOB" 30
if [ "$WAIT_STATUS" = timeout ]; then
  fail "the job still runs 30 s after rank 1 was killed (hang)"
  show_file stderr "$WORK/stderr"
else
  log "mpiexec exited with status $WAIT_STATUS after ${WAIT_ELAPSED} s"
  assert_ne 0 "$WAIT_STATUS" "exit status of a job whose rank 1 was killed"
  assert_no_crash_text "$WORK/stderr" "killed rank"
fi
assert_no_leftovers "$MARKER" 10
finish
