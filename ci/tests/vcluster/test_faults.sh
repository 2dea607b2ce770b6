#!/usr/bin/env bash
# The other fault actions while a job runs:
#  - link-down node2 (3 nodes x 1 rank): `ccscope bench --timeout 5` exits
#    non-zero within 30 s and its report names rank 2 as unreachable and node2
#    as cut off (not "gone");
#  - kill-rank (SIGKILL) of rank 1 and of rank 0 (3 x 1), and of rank 1 on
#    rank 0's node (2 x 2, where the deputy on node1 reports): before the job
#    ends, stderr has exactly one line naming the dead rank, its node and pid
#    ("ccscope: rank 1 (node1, pid PID) died during ..."), the job ends within
#    5 s with ccscope's exit code for it, 1 (Hydra across nodes lets ccscope's
#    MPI_Abort end the job), and no process of the job is left.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 3 --ranks-per-node 1 --rate 1gbit
run_with_fault link_down link-down node2
grep -q "rank 2 (node2) cannot be reached" "$WORK/link_down.err" ||
  fail "link-down: stderr does not say rank 2 (node2) cannot be reached"
grep -q "node node2 is cut off" "$WORK/link_down.err" || fail "link-down: stderr does not name node2"
grep -q "is gone" "$WORK/link_down.err" && fail "link-down: a rank behind a dead link was called gone"
grep -q "died during" "$WORK/link_down.err" && fail "link-down: a rank behind a dead link was called dead"
vc down

# check_named_death NAME RANK NODE: the line, once, with a pid; exit code 1; quick
check_named_death() {
  local name=$1 rank=$2 node=$3 lines
  lines=$(grep -cE "^ccscope: rank $rank \($node, pid [0-9]+\) died during " "$WORK/$name.err" || true)
  [[ $lines == 1 ]] ||
    fail "$name: stderr has $lines lines naming rank $rank ($node) as dead (want exactly 1)"
  if grep -E "ccscope: rank [0-9]+ .*died" "$WORK/$name.err" | grep -vqE "^ccscope: rank $rank \($node,"; then
    fail "$name: stderr calls another rank than rank $rank dead"
  fi
  [[ $rc == 1 ]] || fail "$name: exit code $rc, want 1 (ccscope's for a failure while measuring)"
  ((elapsed <= 5)) || fail "$name: the job took ${elapsed}s to end after the kill (want <= 5 s)"
}

vc up --nodes 3 --ranks-per-node 1 --rate 1gbit
run_with_fault kill_rank kill-rank 1
check_named_death kill_rank 1 node1
run_with_fault kill_rank0 kill-rank 0   # rank 0 itself: the deputy (rank 1) reports
check_named_death kill_rank0 0 node0
vc down

vc up --nodes 2 --ranks-per-node 2 --rate 1gbit
run_with_fault kill_rank_2x2 kill-rank 1   # on rank 0's node: node1's deputy reports
check_named_death kill_rank_2x2 1 node0
vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
note PASS
