#!/usr/bin/env bash
# ccscope advise on two record sets of the same 2 nodes x 1 rank: bench over a
# 1 Gbit/s link, then over 50 Mbit/s (both nodes reshaped). The model is the
# probe's MLP of 8 layers of 1024 (8.4 M parameters, 33.6 MB of float32
# gradients), a global batch of 256 rows taking 4 s per rank (--compute-seconds
# 8, one rank): DDP's all-reduce hides under backward at 1 Gbit/s (about 0.3 s
# of 2.7 s), while a 2-stage pipeline pays its bubble (8 micro-batches of 32
# rows, the probe's smallest: 0.5 s) and 2 x 256 x 1024 x 4 B = 2 MB of
# boundary tensors per step; at 50 Mbit/s DDP's 33.6 MB take about 5 s, far
# more than backward, and the pipeline's 2 MB about 0.35 s. So the advice
# must be DDP on the fast link and a pipeline across the nodes on the slow one
# (the rule of thumb, "fits one GPU -> DDP", is then wrong, and says so).
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope

BENCH_TIME_LIMIT=90
# Up to 1 MiB: DDP's buckets (--bucket-mb 1) and the pipeline's 128 KiB boundary tensors are
# the sizes the advice reads (a 4 MiB row took 10 s of the 50 Mbit/s sweep).
sweep=(-b 1K -e 1M -f 4 -n 3 -w 1)
vc up --nodes 2 --ranks-per-node 1 --rate 1gbit
bench allreduce,sendrecv "$WORK/fast.csv" "${sweep[@]}" || fail "ccscope bench (1 Gbit/s) exited $?"
check_correct "$WORK/fast.csv"
vc fault link 0 rate=50mbit
vc fault link 1 rate=50mbit
bench allreduce,sendrecv "$WORK/slow.csv" "${sweep[@]}" || fail "ccscope bench (50 Mbit/s) exited $?"
check_correct "$WORK/slow.csv"

model=(--kind probe --width 1024 --depth 8 --global-batch 256 --compute-seconds 8 --gpu-memory 4G
  --ranks 2 --bucket-mb 1)
for link in fast slow; do
  "$CCSCOPE" advise "${model[@]}" "$WORK/$link.csv" >"$WORK/$link.out" 2>"$WORK/$link.err" ||
    fail "$link: ccscope advise exited $?: $(cat "$WORK/$link.err")"
  "$CCSCOPE" advise "${model[@]}" "$WORK/$link.csv" --json >"$WORK/$link.json" ||
    fail "$link: ccscope advise --json exited $?"
  note "$link link:"
  grep -E '^# (bandwidth|cluster)|^(ddp|pp2|zero1) |^recommended|^rule of thumb' "$WORK/$link.out" |
    sed 's/^/  | /'
done
python3 - "$WORK/fast.json" "$WORK/slow.json" <<'PY' || fail "the advice (above)"
import json, sys
fast, slow = (json.load(open(p)) for p in sys.argv[1:3])
for name, doc in (("fast", fast), ("slow", slow)):
    assert doc["cluster"]["ranks_per_node"] == 1, (name, doc["cluster"])  # from the records
    assert doc["recommended"] is not None, name
def step(doc, label):
    return next(c["step_s"] for c in doc["candidates"] if c["layout"]["label"] == label)
f, s = fast["recommended"]["label"], slow["recommended"]["label"]
print(f"recommended: {f} at 1 Gbit/s (ddp {step(fast, 'ddp'):.3f} s, pp2 {step(fast, 'pp2'):.3f} s "
      f"per step), {s} at 50 Mbit/s (ddp {step(slow, 'ddp'):.3f} s, pp2 {step(slow, 'pp2'):.3f} s)")
assert f == "ddp", f"1 Gbit/s: {f}, not ddp"
assert slow["recommended"]["pp"] == 2, f"50 Mbit/s: {s}, not a pipeline across the nodes"
assert slow["rule_of_thumb"]["pick"]["label"] == "ddp", slow["rule_of_thumb"]
assert "faster" in slow["rule_of_thumb"]["verdict"], slow["rule_of_thumb"]["verdict"]
assert fast["rule_of_thumb"]["verdict"] == "the rule of thumb agrees: ddp", fast["rule_of_thumb"]
PY
note PASS
