#!/usr/bin/env bash
# A rank stopped with SIGSTOP in the middle of a long run: with --timeout 5 the job
# must fail (non-zero exit) within 25 s, the watchdog must name the stopped rank
# ("did not finish: 1"), and no ccscope process may be left (stopped or running).
#
# usage: stopped_rank.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary
MARKER="$WORK/run.csv"
JOB=
VICTIM=
# Never leave a stopped process behind, also when an assertion fails.
on_exit '[ -n "$VICTIM" ] && { kill -CONT "$VICTIM"; kill -KILL "$VICTIM"; } 2>/dev/null; kill_leftovers "$MARKER" "$JOB"'

setsid "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 --timeout 5 \
  --no-progress --csv "$MARKER" >"$WORK/stdout" 2>"$WORK/stderr" </dev/null &
JOB=$!
wait_for_rank_pids "$JOB" 2 30
sleep 2
kill -0 "$JOB" 2>/dev/null || { show_file stderr "$WORK/stderr"; die "the job ended before a rank was stopped"; }
VICTIM=$(find_rank_pid "$JOB" 1) || die "rank 1's process disappeared before it was stopped"
log "stopping rank 1 (pid $VICTIM) with SIGSTOP"
kill -STOP "$VICTIM"

wait_pid_with_deadline "$JOB" 25
if [ "$WAIT_STATUS" = timeout ]; then
  fail "the job still runs 25 s after rank 1 was stopped, with --timeout 5 (hang)"
else
  log "mpiexec exited with status $WAIT_STATUS after ${WAIT_ELAPSED} s"
  assert_ne 0 "$WAIT_STATUS" "exit status of a job whose rank 1 was stopped"
fi
if ! grep -Eq 'ccscope: timeout: .*did not finish: 1([^0-9,]|$)' "$WORK/stderr"; then
  fail "stderr does not name the stopped rank ('ccscope: timeout: ... did not finish: 1')"
  show_file stderr "$WORK/stderr"
fi
assert_no_crash_text "$WORK/stderr" "stopped rank"
assert_no_leftovers "$MARKER" 10
finish
