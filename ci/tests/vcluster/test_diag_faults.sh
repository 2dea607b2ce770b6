#!/usr/bin/env bash
# ccscope diag when a rank or a node stops answering mid-run (3 x 2, 100 Mbit/s,
# --timeout 5, the fault injected while stage 4 trains):
#  - a rank stopped with SIGSTOP: exit 3 (a hang cut short) within the timeout
#    plus 20 s, stderr names the rank and its node;
#  - a rank killed: the job ends within 10 s, stderr names the dead rank and node;
#  - node2's link unplugged: the job ends, stderr names node2 as cut off;
#  - every time: no process of the job is left, and the checks judged before the
#    fault are in the CSV (a run that fails keeps its results);
#  - --test-corrupt-rank 3 (wrong results, no fault of the links): stage 2 FAILs on
#    node1 (rank 3's node) and the checklist stops there (exit 1, no stage 3).
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

# diag_with_fault NAME FAULT...: rc, elapsed (from the fault to the end)
diag_with_fault() {
  local name=$1
  shift
  vc run --timeout 120 -- "$CCSCOPE" diag --stages 2,4 --timeout 5 --train-steps 100000 \
    --csv "$WORK/$name.csv" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local run_pid=$!
  # Wait for stage 4 (the checks of stage 2 are written by then).
  for ((i = 0; i < 120; i++)); do
    grep -q "^stage 4" "$WORK/$name.out" 2>/dev/null && break
    sleep 0.5
  done
  sleep 2
  if ! kill -0 "$run_pid" 2>/dev/null; then
    wait "$run_pid" || rc=$?
    sed 's/^/  | /' "$WORK/$name.out" | grep -E "WARN|FAIL|verdict|->|^  \| stage" | head -20
    sed 's/^/  ! /' "$WORK/$name.err" | head -10
    fail "$name: diag ended (exit ${rc:-0}) before the fault was injected"
  fi
  vc fault --wait 20 "$@"
  local t0=$SECONDS
  rc=0
  wait "$run_pid" || rc=$?
  elapsed=$((SECONDS - t0))
  note "$name: diag exited $rc ${elapsed}s after the fault; stderr:"
  sed 's/^/  | /' "$WORK/$name.err" | head -10
  grep -E "^stage|verdict" "$WORK/$name.out" | sed 's/^/  > /' | head -8
  [[ $rc != 0 ]] || fail "$name: ccscope diag exited 0"
  [[ $rc != 124 ]] || fail "$name: the job did not end by itself (vcluster run --timeout fired)"
  local left
  left=$(job_procs)
  [[ -z $left ]] || fail "$name: processes of the job still alive: $left"
  local kept
  kept=$(python3 "$READ_RECORDS" "$WORK/$name.csv" --fields check | grep -c '^node\.' || true)
  ((kept >= 6)) || fail "$name: the CSV kept $kept stage-2 checks (want >= 6: every collective)"
}

vc up --nodes 3 --ranks-per-node 2 --rate 100mbit
diag_with_fault stop stop-rank 3
[[ $rc == 3 ]] || fail "stop: exit $rc, want 3 (a hang cut short)"
((elapsed <= 30)) || fail "stop: took ${elapsed}s after the fault (want <= timeout 5 s + 20 s)"
grep -qE "rank 3 \(node1\)" "$WORK/stop.err" || fail "stop: stderr does not name rank 3 (node1)"

diag_with_fault kill kill-rank 4
((elapsed <= 10)) || fail "kill: took ${elapsed}s after the kill (want <= 10 s)"
grep -qE "^ccscope: rank 4 \(node2, pid [0-9]+\) died" "$WORK/kill.err" ||
  fail "kill: stderr does not name rank 4 (node2) as dead"

diag_with_fault unplug link-down 2
((elapsed <= 30)) || fail "unplug: took ${elapsed}s after the fault (want <= 30 s)"
grep -q "node node2 is cut off" "$WORK/unplug.err" || fail "unplug: stderr does not name node2"

# Wrong results on one rank: stage 2 fails on its node and the run stops there.
vc fault link-up 2   # the unplug case left it down
rc=0
vc run --timeout 120 -- "$CCSCOPE" diag --timeout 30 --stages 2-3 --bytes 1M --test-corrupt-rank 3 \
  --csv "$WORK/corrupt.csv" >"$WORK/corrupt.out" 2>"$WORK/corrupt.err" || rc=$?
note "corrupt: exit $rc; $(grep '^# verdict' "$WORK/corrupt.out" || echo 'no verdict')"
[[ $rc == 1 ]] || fail "corrupt rank: exit $rc, want 1"
hosts=$(python3 "$READ_RECORDS" "$WORK/corrupt.csv" --fields check,host --where status=FAIL |
  awk '$1 ~ /^node\./ {print $2}' | sort -u | xargs)
[[ $hosts == node1 ]] || fail "corrupt rank: stage 2 FAILs on '$hosts', want node1"
grep -q "^stage 3" "$WORK/corrupt.out" && fail "corrupt rank: stage 3 ran after stage 2 FAILed"
vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
note PASS
