#!/usr/bin/env bash
# 2 nodes x 1 rank over a 1 Gbit/s link: all-reduce of 16 MiB is correct and its
# busbw is the link rate (0.125 GB/s) within [0.80, 1.05].
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 2 --ranks-per-node 1 --rate 1gbit
bench allreduce "$WORK/ar.csv" -b 16M -e 16M -n 5 -w 1 || fail "ccscope bench exited $?"
check_correct "$WORK/ar.csv"
link=0.125
while read -r busbw; do
  note "busbw $busbw GB/s over a $link GB/s link"
  awk -v b="$busbw" -v l="$link" 'BEGIN {exit !(b >= 0.80 * l && b <= 1.05 * l)}' ||
    fail "busbw $busbw GB/s is outside [0.80, 1.05] x $link GB/s"
done < <(csv_col "$WORK/ar.csv" busbw_GBps)
note PASS
