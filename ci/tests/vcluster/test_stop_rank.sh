#!/usr/bin/env bash
# A rank stopped (SIGSTOP) mid-run: `ccscope bench --timeout 10` exits non-zero
# within 30 s and its stderr names the stopped rank; afterwards no process of the
# job is left, and after `down` no namespace of ours either.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

job_procs() { # processes of any job of this cluster still alive, anywhere
  grep -lsaz "^VCLUSTER_JOB=$VC_NAME\." /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

vc up --nodes 2 --ranks-per-node 1 --rate 1gbit
vc run --timeout 60 -- "$CCSCOPE" bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 --timeout 10 \
  >"$WORK/out" 2>"$WORK/err" &
run_pid=$!
sleep 2   # let the ranks start and the timing loop get going
vc fault --wait 20 stop-rank 1
t0=$SECONDS
rc=0
wait "$run_pid" || rc=$?
elapsed=$((SECONDS - t0))
note "bench exited $rc after ${elapsed}s; stderr:"
sed 's/^/  | /' "$WORK/err" | head -20
[[ $rc != 0 ]] || fail "ccscope bench exited 0 although rank 1 was stopped"
[[ $rc != 124 ]] || fail "ccscope bench did not end by itself (vcluster run --timeout fired)"
((elapsed <= 30)) || fail "took ${elapsed}s to exit (want <= 30 s)"
grep -qiE "rank[^0-9]{0,3}1([^0-9]|$)" "$WORK/err" || fail "stderr does not name the stopped rank 1"
left=$(job_procs)
[[ -z $left ]] || fail "processes of the job still alive: $left"
vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
[[ -z $(job_procs) ]] || fail "processes of the job alive after down"
note PASS
