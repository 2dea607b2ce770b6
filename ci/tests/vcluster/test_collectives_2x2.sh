#!/usr/bin/env bash
# 2 nodes x 2 ranks: every collective gives correct results over the virtual
# cluster, and the records say nodes=2, ranks_per_node=2, ranks=4.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 2 --ranks-per-node 2 --rate 1gbit
# One launch for the six collectives (each launch costs the job's start and MPI_Finalize).
collectives=(allreduce allgather reducescatter broadcast alltoall sendrecv)
csv="$WORK/all.csv"
bench "$(IFS=,; echo "${collectives[*]}")" "$csv" -b 4K -e 1M -f 16 -n 2 -w 1 ||
  fail "ccscope bench exited $?"
check_correct "$csv"
for coll in "${collectives[@]}"; do
  rows=$(csv_col "$csv" wrong collective "$coll" | wc -l)
  [[ $rows -ge 1 ]] || fail "$coll: no rows"
  for kv in nodes=2 ranks_per_node=2 ranks=4; do
    bad=$(csv_col "$csv" "${kv%=*}" collective "$coll" | awk -v v="${kv#*=}" '$1 != v' | wc -l)
    [[ $bad == 0 ]] || fail "$coll: column ${kv%=*} is not ${kv#*=} in $bad rows"
  done
  note "$coll: $rows rows, all correct, nodes=2 ranks_per_node=2"
done
note PASS
