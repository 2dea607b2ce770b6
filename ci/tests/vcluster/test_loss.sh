#!/usr/bin/env bash
# 1% packet loss on every link: TCP retransmits, results stay correct, and the
# loss really happened (the switch ports dropped packets).
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 2 --ranks-per-node 1 --rate 1gbit --loss 1%
for coll in allreduce alltoall; do
  bench "$coll" "$WORK/$coll.csv" -b 64K -e 4M -f 4 -n 3 -w 1 || fail "$coll: ccscope bench exited $?"
  check_correct "$WORK/$coll.csv"
done
dropped=0
for port in p0 p1; do
  d=$(tc -n "ccvc-$VC_NAME-head" -s qdisc show dev "$port" |
      awk '/^qdisc pfifo 20:/ {f = 1} f && /dropped/ {sub(/,/, "", $7); print $7; exit}')
  dropped=$((dropped + ${d:-0}))
done
note "packets dropped by the lossy links: $dropped"
[[ $dropped -gt 0 ]] || fail "no packet was dropped: loss emulation is not working"
note PASS
