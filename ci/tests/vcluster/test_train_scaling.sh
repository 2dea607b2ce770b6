#!/usr/bin/env bash
# ccscope train --scaling 1,2 across 2 nodes over a 1 Gbit/s link: the 2-rank
# runs span both nodes, match one rank's loss, move the formula's bytes, and
# their communication takes at least what those bytes need at the link's rate,
# less what the shaper's token bucket lets through at once after each idle gap
# (the traffic really crossed the shaped link). ZeRO-3 moves each layer in three
# collectives (gather forward, gather backward, reduce-scatter), each after compute
# that refills the bucket: its layers are made wide enough (512: 0.5 MB sent per
# collective) that the bucket's share stays small.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

vc up --nodes 2 --ranks-per-node 1 --rate 1gbit
burst=125000  # bytes: ci/vcluster's tbf burst at 1 Gbit/s (1 ms worth, at least 64 KiB)
depth=4
for strategy in ddp zero3; do
  width=256
  [ "$strategy" = zero3 ] && width=512
  vc run --timeout 150 -- "$CCSCOPE" train --strategy "$strategy" --scaling 1,2 --steps 20 \
    --width "$width" --depth "$depth" --global-batch 64 --check-loss --print-every 0 \
    --runs-csv "$WORK/$strategy.csv" >"$WORK/$strategy.out" 2>"$WORK/$strategy.err" ||
    fail "$strategy: ccscope train exited $?: $(tail -5 "$WORK/$strategy.out") $(cat "$WORK/$strategy.err")"
  python3 - "$WORK/$strategy.csv" "$strategy" "$burst" "$depth" <<'PY' || fail "$strategy: scaling records (above)"
import csv, sys
runs = {int(r["ranks"]): r for r in csv.DictReader(open(sys.argv[1]))}
assert sorted(runs) == [1, 2], runs.keys()
one, two = runs[1], runs[2]
assert int(one["nodes"]) == 1 and int(two["nodes"]) == 2, (one["nodes"], two["nodes"])
for r in (one, two):
    assert r["loss_equivalent"] == "1" and r["scaling"] == "strong", r
measured, expected = float(two["bytes_per_step"]), float(two["bytes_per_step_expected"])
assert abs(measured - expected) <= 0.01 * expected, (measured, expected)
link = 1e9 / 8  # bytes/s
# Transfers that can each start with a full bucket: at most one per layer (DDP's
# buckets) or three per layer (ZeRO-3).
burst, depth = float(sys.argv[3]), int(sys.argv[4])
transfers = depth * (3 if sys.argv[2] == "zero3" else 1)
floor = max(measured - transfers * burst, 0) / link
assert floor > 0.5 * measured / link, "the bucket would hide half the bytes: a weak check"
comm = float(two["comm_median_s"])
assert comm >= 0.9 * floor, f"communication {comm*1e3:.2f} ms is faster than 1 Gbit/s allows ({floor*1e3:.2f} ms)"
print(f"{sys.argv[2]}: 2 ranks on 2 nodes: step {float(two['step_median_s'])*1e3:.1f} ms vs 1 rank "
      f"{float(one['step_median_s'])*1e3:.1f} ms, speed-up {float(two['speedup']):.2f}, "
      f"efficiency {float(two['efficiency']):.2f}; communication {comm*1e3:.1f} ms for "
      f"{measured/1e6:.2f} MB ({measured/comm/link*100:.0f}% of the link), exposed share "
      f"{float(two['exposed_comm_share'])*100:.0f}%")
PY
done
note PASS
