#!/usr/bin/env bash
# The other fault actions while a job runs, 3 nodes x 1 rank:
#  - link-down node2: `ccscope bench --timeout 10` exits non-zero within 30 s and
#    its report names rank 2 as unreachable and node2 as cut off (not "gone");
#  - kill-rank 1: the job ends non-zero within 30 s (MPICH's launcher notices the
#    dead rank) and no process of the job is left.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

job_procs() { # processes of any job of this cluster still alive, anywhere
  grep -lsaz "^VCLUSTER_JOB=$VC_NAME\." /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

# run_with_fault NAME FAULT...: bench forever, inject FAULT after 3 s; sets rc, elapsed
run_with_fault() {
  local name=$1
  shift
  vc run --timeout 60 -- "$CCSCOPE" bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 \
    --timeout 10 >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local run_pid=$!
  sleep 3
  vc fault --wait 20 "$@"
  local t0=$SECONDS
  rc=0
  wait "$run_pid" || rc=$?
  elapsed=$((SECONDS - t0))
  note "$name: bench exited $rc after ${elapsed}s; stderr:"
  sed 's/^/  | /' "$WORK/$name.err" | head -12
  [[ $rc != 0 ]] || fail "$name: ccscope bench exited 0"
  [[ $rc != 124 ]] || fail "$name: the job did not end by itself (vcluster run --timeout fired)"
  ((elapsed <= 30)) || fail "$name: took ${elapsed}s to exit (want <= 30 s)"
  local left
  left=$(job_procs)
  [[ -z $left ]] || fail "$name: processes of the job still alive: $left"
}

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
