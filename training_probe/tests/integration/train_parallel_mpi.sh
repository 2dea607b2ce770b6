#!/usr/bin/env bash
# The model-parallel strategies under the real mpiexec at RANKS ranks: every
# layout's loss matches one rank's (--check-loss) over 100 steps and data
# replicas agree (--check-consistency); the per-rank records hold the
# pipeline's activations in flight (GPipe M, 1F1B at most N - s) and the
# bytes each group moved. At 2 ranks each deliberate mistake (a micro-batch's
# gradient dropped, a tensor-parallel all-reduce skipped, tokens sent to the
# wrong expert) exits 1 with NOT equivalent; bad layouts exit 2 with one line.
# usage: train_parallel_mpi.sh CCSCOPE MPIEXEC RANKS (2, 3, 4 or 8)
set -uo pipefail
ccscope=$1 mpiexec=$2 ranks=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Small enough for 4 oversubscribed ranks on 2 cores; depth 6 gives 6 layers
# (3 stages of 2) or 3 tensor-parallel pairs; a batch of 48 divides over 1-4
# replicas and into 1, 4 or 8 micro-batches.
shape=(--width 32 --depth 6 --global-batch 48 --steps 100 --lr 0.05 --activation tanh
       --print-every 0 --timeout 60)
run() { timeout 300 "$mpiexec" -n "$ranks" "$ccscope" train "${shape[@]}" "$@"; }

check() {  # label, then the train flags
  local label=$1
  shift
  run "$@" --check-loss --check-consistency --runs-csv "$work/runs.csv" \
    --ranks-csv "$work/ranks.csv" >"$work/out" 2>"$work/err" ||
    fail "$label at $ranks ranks exited $?: $(tail -5 "$work/out") $(cat "$work/err")"
  grep -q "loss vs single over 100 steps: .*: equivalent" "$work/out" ||
    fail "$label: no equivalence line: $(cat "$work/out")"
  grep -q "parameters agree across ranks after every step" "$work/out" ||
    fail "$label: no consistency line"
  python3 - "$work/runs.csv" "$work/ranks.csv" "$ranks" "$label" "$@" <<'PY' || fail "$label: records (above)"
import csv, sys
runs = list(csv.DictReader(open(sys.argv[1])))
rows = list(csv.DictReader(open(sys.argv[2])))
ranks, label, flags = int(sys.argv[3]), sys.argv[4], sys.argv[5:]
def flag(name, default):
    return flags[flags.index(name) + 1] if name in flags else default
assert len(runs) == 1 and runs[0]["loss_equivalent"] == "1", runs
assert len(rows) == ranks and sorted(int(r["rank"]) for r in rows) == list(range(ranks)), rows
m = int(flag("--micro-batches", "1"))
for r in rows:
    pp, stage = int(r["pp"]), int(r["stage"])
    inflight = int(r["peak_in_flight"])
    if r["strategy"] == "ep":
        assert float(r["ep_bytes"]) > 0 and float(r["all_to_all_s"]) > 0, r
        continue
    if r["schedule"] == "gpipe":
        assert inflight == m * int(r["chunks"]), (label, r)
    elif r["schedule"] == "1f1b":
        assert inflight == min(pp - stage, m), (label, r)
    if pp > 1:
        # Each chunk sends its activation on (but the last virtual stage's)
        # and its input gradient back (but the first's), per micro-batch.
        v = int(r["chunks"])
        sends = (v * m - (m if stage == pp - 1 else 0)) + (v * m - (m if stage == 0 else 0))
        batch = int(flag("--global-batch", "48")) // int(r["dp"])
        want = sends * (batch // m) * 32 * 4
        assert float(r["pp_bytes"]) == want, (label, r["pp_bytes"], want)
        assert 0 < float(r["bubble"]) < 1, r
    if int(r["tp"]) > 1:
        assert float(r["tp_bytes"]) > 0, r
    if int(r["dp"]) > 1:
        assert float(r["dp_bytes"]) > 0, r
print(f"{label} n{ranks}: loss max rel diff {runs[0]['loss_max_rel_diff']}; bubbles "
      + ", ".join(f"{float(r['bubble']):.3f}" for r in rows)
      + f" (textbook {float(rows[0]['bubble_textbook']):.3f})")
PY
}

case $ranks in
  2)
    check "tp2" --strategy tp
    for m in 1 4 8; do
      check "pp2 1f1b m$m" --strategy pp --micro-batches "$m"
    done
    check "pp2 gpipe m4" --strategy pp --schedule gpipe --micro-batches 4
    check "pp2 interleaved m4 v3" --strategy pp --schedule interleaved --chunks 3 --micro-batches 4
    check "ep2 top-2" --strategy ep --experts 4 --top-k 2 --capacity-factor 0 --micro-batches 2
    for fault in "microbatch --strategy pp --micro-batches 4" "tp-allreduce --strategy tp" \
                 "expert --strategy ep --experts 4 --top-k 2 --capacity-factor 0"; do
      read -r name rest <<<"$fault"
      # shellcheck disable=SC2086
      run --fault "$name" $rest --check-loss >"$work/out" 2>"$work/err"
      rc=$?
      [[ $rc == 1 ]] || fail "mistake $name exited $rc, not 1: $(tail -3 "$work/out") $(cat "$work/err")"
      grep -q "NOT equivalent" "$work/out" || fail "mistake $name: no NOT equivalent line"
      echo "mistake $name: $(grep -o 'max relative difference [^,]*' "$work/out"), exit 1"
    done
    # Bad layouts: one line, exit 2.
    for bad in "--strategy tp --tp 3" "--strategy pp --schedule zigzag" \
               "--strategy pp --chunks 2" "--strategy ep --experts 1" \
               "--strategy pp --stage-layers 4,4" "--strategy tp --scaling 1,2" \
               "--strategy ddp --tp 2" "--strategy 3d --zero-stage 2" \
               "--strategy 3d --tp 9223372036854775808 --pp 2" \
               "--strategy pp --stage-layers 18446744073709551615,2" \
               "--strategy ep --experts 4 --pp 2" "--strategy tp --experts 4" \
               "--strategy ep --experts 4 --check-loss" "--strategy tp --zero-stage 1" \
               "--strategy 3d --dp 2 --schedule interleaved --chunks 2"; do
      # shellcheck disable=SC2086
      run $bad >"$work/out" 2>"$work/err"
      rc=$?
      [[ $rc == 2 ]] || fail "bad input '$bad' exited $rc, not 2: $(cat "$work/err")"
      lines=$(grep -c . "$work/err")
      [[ $lines == 1 ]] || fail "bad input '$bad': $lines lines on stderr: $(cat "$work/err")"
      echo "bad input '$bad': $(cat "$work/err")"
    done
    ;;
  3)
    for m in 1 4 8; do
      check "pp3 1f1b m$m" --strategy pp --micro-batches "$m"
    done
    check "pp3 gpipe m8" --strategy pp --schedule gpipe --micro-batches 8
    check "pp3 uneven stages 3,2,1" --strategy pp --stage-layers 3,2,1 --micro-batches 4
    ;;
  4)
    check "tp4" --strategy tp
    check "ep4 top-1" --strategy ep --experts 8 --top-k 1 --capacity-factor 0
    check "tp2 x dp2" --strategy 3d --tp 2 --dp 2
    check "pp2 x dp2 m4" --strategy 3d --pp 2 --dp 2 --micro-batches 4
    check "tp2 x dp2 zero1 adam" --strategy 3d --tp 2 --dp 2 --zero-stage 1 --optimizer adam
    check "tp2 x pp2 m4" --strategy 3d --tp 2 --pp 2 --micro-batches 4
    ;;
  8)
    # The layout of deepspeed --tensor_model_parallel_size 2 --pipeline_model_parallel_size 2
    # --zero_stage 1 on 8 GPUs (2 data-parallel replicas), oversubscribed here.
    check "tp2 x pp2 x dp2 zero1 m4" --strategy 3d --tp 2 --pp 2 --dp 2 --zero-stage 1 \
      --micro-batches 4
    ;;
  *) fail "no cases for $ranks ranks" ;;
esac
echo "PASS: model-parallel strategies at $ranks ranks"
