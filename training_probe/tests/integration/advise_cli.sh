#!/usr/bin/env bash
# ccscope advise from the command line: bad input is one line and exit 2; the
# fixtures (nccl-tests output of one NVLink node and of two nodes over 100
# Gbit/s, synthetic) give a recommendation, exit 0; nothing fitting is exit 1;
# --json is JSON; records this machine's `ccscope bench` wrote are read (when
# MPIEXEC is given), and so is a `ccscope topo --measure` CSV.
# usage: advise_cli.sh CCSCOPE DATA_DIR [MPIEXEC]
set -uo pipefail
ccscope=$1 data=$2 mpiexec=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
intra=$data/h100-1node-nvlink.txt
inter=$data/h100-2node-100gbe.txt
model=(--params 7e9 --layers 32 --hidden 4096 --gpu-memory 80G)

expect_usage() {  # expect_usage WHAT ARGS...
  local what=$1
  shift
  timeout 60 "$ccscope" advise "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [[ $rc == 2 ]] || fail "$*: exit $rc, not 2: $(cat "$work/err")"
  [[ $(wc -l <"$work/err") == 1 ]] || fail "$*: not one line: $(cat "$work/err")"
  grep -q -- "$what" "$work/err" || fail "$*: the line does not say '$what': $(cat "$work/err")"
  grep -qi "terminate\|abort\|backtrace" "$work/err" && fail "$*: a crash: $(cat "$work/err")"
  [[ -s $work/out ]] && fail "$*: printed on stdout: $(cat "$work/out")"
  echo "ok: $* -> $(cat "$work/err")"
}
expect_usage "gpu-memory is required" --params 7e9 --layers 32 --hidden 4096 --ranks 8
expect_usage "ranks is required" "${model[@]}"
expect_usage "params 'seven'" --params seven --layers 32 --hidden 4096 --gpu-memory 80G --ranks 8
expect_usage "gpu-memory '80Q'" --params 7e9 --layers 32 --hidden 4096 --gpu-memory 80Q --ranks 8
expect_usage "ranks '0'" "${model[@]}" --ranks 0
expect_usage "ranks '2.5'" "${model[@]}" --ranks 2.5
expect_usage "use transformer or probe" "${model[@]}" --ranks 8 --kind cnn
expect_usage "use fp32, bf16 or fp16" "${model[@]}" --ranks 8 --precision fp8 "$intra"
expect_usage "for --kind probe" "${model[@]}" --ranks 8 --width 64 "$intra"
expect_usage "top-k 3" "${model[@]}" --ranks 8 --experts 2 --top-k 3 "$intra"
expect_usage "not both" "${model[@]}" --ranks 8 --flops 1e15 --compute-seconds 3 "$intra"
expect_usage "missing.csv" "${model[@]}" --ranks 8 "$work/missing.csv"
printf 'hello, this is not a results file\n' >"$work/junk.txt"
expect_usage "junk.txt" "${model[@]}" --ranks 8 "$work/junk.txt"
expect_usage "no-such-flag" "${model[@]}" --ranks 8 --no-such-flag
expect_usage "params is required" --kind transformer
expect_usage "gpu-memory is required" --kind probe --ranks 4

# No flags at all: ccscope train's model on this host, one rank per core, each
# note saying what was taken; exit 0 with a recommendation.
timeout 60 "$ccscope" advise >"$work/out" 2>&1 || fail "advise without flags: exit $?: $(cat "$work/out")"
grep -q "^note: no model given: ccscope train's" "$work/out" || fail "no model note: $(cat "$work/out")"
grep -q "^note: no --gpu-memory or --ranks: this host, one rank per core ($(nproc) ranks" \
  "$work/out" || fail "no host note: $(cat "$work/out")"
grep -q "^recommended: " "$work/out" || fail "no recommendation: $(cat "$work/out")"
echo "ok: advise without flags -> $(grep '^recommended' "$work/out" | cut -c1-80)"

# No records: topo's expected figures (this host's GPUs and ports, or the
# stated H100 default where it has none), exit 0, and one line says so.
timeout 60 "$ccscope" advise "${model[@]}" --ranks 16 >"$work/out" 2>"$work/err"
rc=$?
[[ $rc == 0 ]] || fail "no records: exit $rc, not 0: $(cat "$work/out" "$work/err")"
[[ -s $work/err ]] && fail "no records: wrote on stderr: $(cat "$work/err")"
[[ $(grep -c "^# bandwidth: topo's expected figures for .* (no records given; pass bench records" "$work/out") == 1 ]] ||
  fail "no records: no line naming the bandwidth's source: $(head -8 "$work/out")"
grep -q "^# bandwidth: intra-node: every collective at [0-9.]* GB/s busbw, .*(nominal), 5 us per algorithm step" "$work/out" ||
  fail "no records: no intra-node figure: $(head -8 "$work/out")"
grep -q "^# bandwidth: inter-node: every collective at [0-9.]* GB/s busbw" "$work/out" ||
  fail "no records: no inter-node figure: $(head -8 "$work/out")"
grep -q "^recommended: " "$work/out" || fail "no records: no recommendation: $(tail -5 "$work/out")"
echo "ok: no records -> $(grep "^# bandwidth: topo's" "$work/out")"
timeout 60 "$ccscope" advise "${model[@]}" --ranks 16 --json >"$work/advice.json" ||
  fail "no records --json exited $?"
python3 - "$work/advice.json" <<'PY' || fail "no records --json: no note of the bandwidth's source"
import json, sys
doc = json.load(open(sys.argv[1]))
assert any(n.startswith("bandwidth: topo's expected figures") for n in doc["notes"]), doc["notes"]
PY
expect_usage "use flash or standard" "${model[@]}" --ranks 8 --attention sparse
expect_usage "use auto, none, selective or full" "${model[@]}" --ranks 8 --recompute some
expect_usage "not both" "${model[@]}" --ranks 8 --flops 4e14 --mfu 0.5

# The example: 7B on 2 nodes of 8 over 100 Gbit/s.
timeout 60 "$ccscope" advise "${model[@]}" --ranks 16 "$intra" "$inter" >"$work/out" 2>"$work/err"
rc=$?
cat "$work/out"
[[ $rc == 0 ]] || fail "the example exited $rc: $(cat "$work/err")"
[[ -s $work/err ]] && fail "the example wrote on stderr: $(cat "$work/err")"
grep -q "^layout .*micro .*memory .*step" "$work/out" || fail "no table header"
grep -q "^recommended: .*the fastest of [0-9]* layouts that fit" "$work/out" || fail "no recommendation"
grep -q "runner-up" "$work/out" || fail "no runner-up"
grep -q "^rule of thumb: " "$work/out" || fail "no rule of thumb"
grep -q "bandwidth: intra-node all_reduce: 11 sizes 1 KiB..1 GiB, peak busbw 3[0-9][0-9] GB/s, 8 ranks" \
  "$work/out" || fail "the intra-node curve is not the fixture's"
grep -q "bandwidth: inter-node all_reduce: .* peak busbw 1[01].* GB/s, 16 ranks" "$work/out" ||
  fail "the inter-node curve is not the fixture's"
grep -q "^note: inter-node reduce_scatter: no curve, used inter-node all_reduce's" "$work/out" ||
  fail "no note of the fallback curve"
grep -q "ranks_per_node\|8 per node (2 node(s))" "$work/out" || fail "ranks per node not from the records"

# --json: a document python parses, the same recommendation.
timeout 60 "$ccscope" advise "${model[@]}" --ranks 16 "$intra" "$inter" --json >"$work/advice.json" ||
  fail "--json exited $?"
python3 -m json.tool "$work/advice.json" >/dev/null || fail "--json is not JSON: $(head -5 "$work/advice.json")"
want=$(sed -n 's/^recommended: \([^:]*\): .*/\1/p' "$work/out")
python3 - "$work/advice.json" "$want" <<'PY' || fail "--json's content (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["schema"] == "ccscope.advice/1", doc["schema"]
assert doc["recommended"]["label"] == sys.argv[2], (doc["recommended"], sys.argv[2])
best = doc["candidates"][doc["recommended_index"]]
assert best["fits"] and best["step_s"] > 0, best
assert all(c["step_s"] >= best["step_s"] for c in doc["candidates"] if c["fits"])
assert doc["cluster"]["ranks_per_node"] == 8, doc["cluster"]
print("ok: --json recommends", sys.argv[2], "step", best["step_s"], "s")
PY

# Nothing fits: 1T parameters on 8 GPUs of 16 GiB.
timeout 60 "$ccscope" advise --params 1T --layers 128 --hidden 25600 --gpu-memory 16G --ranks 8 \
  "$intra" >"$work/out" 2>"$work/err"
rc=$?
[[ $rc == 1 ]] || fail "nothing fits: exit $rc, not 1: $(cat "$work/out" "$work/err")"
grep -q "^no recommendation: nothing fits: the smallest" "$work/out" || fail "nothing fits: $(tail -3 "$work/out")"
echo "ok: nothing fits -> $(grep '^no recommendation' "$work/out")"

# A file without node counts (nccl-tests' own lines name no host): skipped
# with a note, used with intra:.
grep -v '^#  Rank' "$intra" >"$work/nohosts.txt"
timeout 60 "$ccscope" advise "${model[@]}" --ranks 8 "$work/nohosts.txt" >"$work/out" 2>"$work/err"
rc=$?
# Records given but none usable: no bandwidth, not the default (it would hide it).
[[ $rc == 2 ]] || fail "no node count: exit $rc, not 2 (no bandwidth): $(cat "$work/out" "$work/err")"
grep -q "no bandwidth" "$work/err" || fail "no node count: $(cat "$work/err")"
timeout 60 "$ccscope" advise "${model[@]}" --ranks 8 "intra:$work/nohosts.txt" >"$work/out" 2>"$work/err" ||
  fail "intra:FILE exited $?: $(cat "$work/err")"
grep -q "bandwidth: intra-node all_reduce" "$work/out" || fail "intra:FILE not used: $(cat "$work/out")"
echo "ok: intra:FILE"

# ccscope topo --measure's CSV: node pairs as inter-node sendrecv.
cat >"$work/paths.csv" <<'CSV'
schema,kind,host_a,host_b,endpoint_a,endpoint_b,path,basis,expected_GBps,measured_GBps,percent_of_expected,below_threshold,round
ccscope.topo_path/1,node_pair,node0,node1,eth0,eth0,socket,eth0 1 Gbit/s,0.125,0.117,93.6,0,0
ccscope.topo_path/1,node_pair,node0,node2,eth0,eth0,socket,eth0 1 Gbit/s,0.125,0.09,72,0,1
CSV
timeout 60 "$ccscope" advise --kind probe --width 1024 --depth 8 --gpu-memory 1G --ranks 2 \
  --ranks-per-node 1 "$work/paths.csv" >"$work/out" 2>"$work/err" || fail "topo CSV: exit $?: $(cat "$work/err")"
grep -q "bandwidth: inter-node sendrecv: 0.09 GB/s, the slowest of 2 measured pair" "$work/out" ||
  fail "topo CSV not read: $(cat "$work/out")"
echo "ok: topo --measure CSV"

# This machine's own records, from ccscope bench (one node: intra-node).
if [[ -n $mpiexec ]]; then
  timeout 300 "$mpiexec" -n 2 "$ccscope" bench allreduce,allgather,reducescatter,sendrecv \
    -b 1K -e 4M -f 4 -n 3 -w 1 --csv "$work/bench.csv" >"$work/bench.out" 2>&1 ||
    fail "ccscope bench exited $?: $(tail -5 "$work/bench.out")"
  timeout 60 "$ccscope" advise --kind probe --width 512 --depth 4 --gpu-memory 1G --ranks 2 \
    "$work/bench.csv" >"$work/out" 2>"$work/err" || fail "bench CSV: exit $?: $(cat "$work/err")"
  cat "$work/out"
  for c in all_reduce all_gather reduce_scatter sendrecv; do
    grep -q "bandwidth: intra-node $c: 7 sizes 1 KiB..4 MiB" "$work/out" ||
      fail "bench CSV: no intra-node $c curve"
  done
  grep -q "^recommended: " "$work/out" || fail "bench CSV: no recommendation"
  echo "ok: ccscope bench CSV"
fi
echo "PASS: advise CLI"
