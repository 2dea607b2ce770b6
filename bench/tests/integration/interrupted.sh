#!/usr/bin/env bash
# A sweep stopped by SIGTERM or SIGINT sent to the launcher (as a batch system,
# a timeout or Ctrl-C does) must not look like a good run: the launcher exits
# 128 + signal, the records measured so far stay in the CSV and the JSON, the
# JSON says "complete": false and "stopped_by", and no rank is left behind.
# Also without a launcher (one rank, the signal to ccscope itself).
#
# usage: interrupted.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

# Open MPI's mpirun, once signalled, exits 1 whatever the ranks return, turns
# SIGINT into SIGTERM for the ranks, and may drop their last lines of stdout
# (measured with Open MPI 4.1.4; README, "Stopping a run").
openmpi=0
"$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE" && openmpi=1

# Starts a long sweep, waits until it has written RECORDS records, sends SIGNAL
# to the launcher (or to ccscope itself with RANKS=0), and checks the outcome.
# usage: stop_run NAME RANKS SIGNAL EXPECTED_EXIT
stop_run() {
  local name=$1 ranks=$2 sig=$3 expected=$4 dir="$WORK/$1" pid rows records deadline
  mkdir -p "$dir"
  local args=(bench allreduce --backend mpi -b 1K -e 256M -f 2 -n 200 -w 2 --no-progress
              --timeout 60 --csv "$dir/run.csv" --json "$dir/run.json")
  if [ "$ranks" -eq 0 ]; then
    "$CCSCOPE" "${args[@]}" >"$dir/out" 2>"$dir/err" </dev/null &
  else
    "$MPIEXEC" -n "$ranks" "$CCSCOPE" "${args[@]}" >"$dir/out" 2>"$dir/err" </dev/null &
  fi
  pid=$!
  deadline=$(($(date +%s) + 60))
  # Whole records only (a field may hold a new line); none while a row is half written.
  while [ ! -f "$dir/run.csv" ] || [ "$(csv_select "$dir/run.csv" size_bytes 2>/dev/null | grep -c '')" -lt 3 ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { fail "$name: no records within 60 s"; kill -9 "$pid"; return; }
    kill -0 "$pid" 2>/dev/null || { fail "$name: the run ended before the signal"; return; }
    # Each look starts ci/read-records (python): every 0.5 s keeps the ranks' cores free.
    sleep 0.5
  done
  kill -s "$sig" "$pid"
  wait_pid_with_deadline "$pid" 60
  [ "$WAIT_STATUS" = timeout ] && { fail "$name: still running 60 s after SIG$sig"; kill_leftovers "$dir/run.csv"; return; }
  local seen=$sig
  if [ "$openmpi" = 1 ] && [ "$ranks" -gt 0 ]; then
    assert_ne 0 "$WAIT_STATUS" "$name: exit status after SIG$sig (Open MPI)"
    seen=TERM expected=143
  else
    assert_eq "$expected" "$WAIT_STATUS" "$name: exit status after SIG$sig"
  fi
  rows=$(csv_select "$dir/run.csv" size_bytes | grep -c '')
  # "complete" and "stopped_by" are the document's, repeated on each record read.
  records=$(read_records "$dir/run.json" --fields complete,stopped_by 2>&1 |
            awk -F'\t' 'NF { n++; last = $1 " " $2 } END { print n + 0, last }')
  assert_eq "$rows 0 SIG$seen" "$records" "$name: JSON records, complete (0: false), stopped_by (CSV has $rows rows)"
  [ "$rows" -ge 3 ] || { fail "$name: only $rows CSV rows kept"; show_file csv "$dir/run.csv"; show_file stderr "$dir/err"; }
  grep -q "stopped by SIG$seen after $rows record(s); exit $expected" "$dir/err" ||
    { fail "$name: no 'stopped by' line naming SIG$seen and $rows records"; show_file stderr "$dir/err"; }
  if [ "$openmpi" = 0 ] || [ "$ranks" -eq 0 ]; then
    grep -q "^# Stopped by SIG$seen" "$dir/out" || fail "$name: the console table does not say it stopped"
  fi
  if grep -q " died " "$dir/err"; then
    fail "$name: a rank stopped on purpose was reported as dead"
  fi
  assert_no_crash_text "$dir/err" "$name"
  assert_no_leftovers "$dir/run.csv" 10
}

stop_run term-2-ranks 2 TERM 143
stop_run int-2-ranks 2 INT 130
stop_run term-3-ranks 3 TERM 143
stop_run term-no-launcher 0 TERM 143
stop_run int-no-launcher 0 INT 130
finish
