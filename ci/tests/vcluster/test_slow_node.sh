#!/usr/bin/env bash
# 3 nodes x 1 rank: with one node's link at 1/5 of the rate, all-reduce busbw
# drops at least 3x compared with the uniform cluster (ring/pipelined algorithms
# run at the pace of the slowest link). Also exercises `up --node` and `fault link`.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 3 --ranks-per-node 1 --rate 1gbit --node 1:rate=200mbit
bench allreduce "$WORK/slow.csv" -b 8M -e 8M -n 3 -w 1 || fail "ccscope bench (slow node) exited $?"
check_correct "$WORK/slow.csv"
vc fault link 1 rate=1gbit
bench allreduce "$WORK/uniform.csv" -b 8M -e 8M -n 3 -w 1 || fail "ccscope bench (uniform) exited $?"
check_correct "$WORK/uniform.csv"
slow=$(csv_col "$WORK/slow.csv" busbw_GBps | sort -g | tail -1)
uniform=$(csv_col "$WORK/uniform.csv" busbw_GBps | sort -g | head -1)
note "busbw uniform $uniform GB/s, one node at 200mbit $slow GB/s"
awk -v s="$slow" -v u="$uniform" 'BEGIN {exit !(s > 0 && u / s >= 3)}' ||
  fail "busbw dropped only $(awk -v s="$slow" -v u="$uniform" 'BEGIN {printf "%.2f", (s > 0 ? u / s : 0)}')x (want >= 3x)"
note PASS
