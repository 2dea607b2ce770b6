#!/usr/bin/env bash
# 3 nodes x 1 rank, 512 KiB (each size runs -n twice: the timed pass and the p50/p99 pass;
# 1 MiB took 26 s, 512 KiB 14 s, with the same 4.1-4.7x drop): with one node's link at 1/5 of the rate, all-reduce busbw
# drops at least 3x compared with the uniform cluster (the collective runs at the
# pace of the slowest link). Also exercises `up --node` and `fault link`.
# 100 Mbit/s, not 1 Gbit/s: 3 busy-polling ranks on 2 cores reach only about
# 0.03 GB/s busbw, so at 1 Gbit/s the CPU, not the link, would set the pace.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 3 --ranks-per-node 1 --rate 100mbit --node 1:rate=20mbit
bench allreduce "$WORK/slow.csv" -b 512K -e 512K -n 2 -w 1 || fail "ccscope bench (slow node) exited $?"
check_correct "$WORK/slow.csv"
vc fault link 1 rate=100mbit
bench allreduce "$WORK/uniform.csv" -b 512K -e 512K -n 2 -w 1 || fail "ccscope bench (uniform) exited $?"
check_correct "$WORK/uniform.csv"
slow=$(csv_col "$WORK/slow.csv" busbw_GBps | sort -g | tail -1)
uniform=$(csv_col "$WORK/uniform.csv" busbw_GBps | sort -g | head -1)
note "busbw uniform $uniform GB/s, one node at 20mbit $slow GB/s"
awk -v s="$slow" -v u="$uniform" 'BEGIN {exit !(s > 0 && u / s >= 3)}' ||
  fail "busbw dropped only $(awk -v s="$slow" -v u="$uniform" 'BEGIN {printf "%.2f", (s > 0 ? u / s : 0)}')x (want >= 3x)"
note PASS
