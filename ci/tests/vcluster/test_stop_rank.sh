#!/usr/bin/env bash
# A rank stopped (SIGSTOP) mid-run: `ccscope bench --timeout 5` exits non-zero
# within 30 s and its stderr names the stopped rank; afterwards no process of the
# job is left, and after `down` no namespace of ours either.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 2 --ranks-per-node 1 --rate 1gbit
run_with_fault stop_rank stop-rank 1
grep -qiE "rank[^0-9]{0,3}1([^0-9]|$)" "$WORK/stop_rank.err" || fail "stderr does not name the stopped rank 1"
vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
[[ -z $(job_procs) ]] || fail "processes of the job alive after down"
note PASS
