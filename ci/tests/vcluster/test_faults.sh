#!/usr/bin/env bash
# The other fault actions while a job runs, 3 nodes x 1 rank:
#  - link-down node2: `ccscope bench --timeout 10` exits non-zero within 30 s and
#    its report names rank 2 as unreachable and node2 as cut off (not "gone");
#  - kill-rank 1: the job ends non-zero within 30 s (MPICH's launcher notices the
#    dead rank) and no process of the job is left.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 3 --ranks-per-node 1 --rate 1gbit
run_with_fault link_down link-down node2
grep -q "rank 2 (node2) cannot be reached" "$WORK/link_down.err" ||
  fail "link-down: stderr does not say rank 2 (node2) cannot be reached"
grep -q "node node2 is cut off" "$WORK/link_down.err" || fail "link-down: stderr does not name node2"
grep -q "is gone" "$WORK/link_down.err" && fail "link-down: a rank behind a dead link was called gone"
vc down

vc up --nodes 3 --ranks-per-node 1 --rate 1gbit
run_with_fault kill_rank kill-rank 1
vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
note PASS
