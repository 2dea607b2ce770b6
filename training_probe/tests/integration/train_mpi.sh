#!/usr/bin/env bash
# ccscope train under the real mpiexec at RANKS ranks: every strategy's loss
# matches one rank's (--check-loss) for 100 steps, parameters agree across
# ranks after every step (--check-consistency), bytes and memory match their
# formulas (exit 0 and the run records say so). At 2 ranks the deliberately
# broken variants (--fault) must each fail with exit 1.
# usage: train_mpi.sh CCSCOPE MPIEXEC RANKS
set -uo pipefail
ccscope=$1 mpiexec=$2 ranks=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Small enough for 4 oversubscribed ranks on 2 cores; 24 samples divide over 1-4
# ranks; 8 steps per epoch, so 100 steps cross 12 reshuffles; tiny buckets put
# boundaries inside layers.
shape=(--width 24 --depth 3 --global-batch 24 --steps 100 --bucket-mb 0.002
       --print-every 0 --timeout 60)
run() { timeout 300 "$mpiexec" -n "$ranks" "$ccscope" train "${shape[@]}" "$@"; }

# Plain SGD, and gradient accumulation with clipping and AdamW.
variants=("--lr 0.05" "--micro-batches 2 --grad-clip 0.05 --optimizer adamw --lr 0.003")
for strategy in ddp zero1 zero2 zero3; do
  for extra in "${variants[@]}"; do
    # shellcheck disable=SC2086
    run --strategy "$strategy" $extra --check-loss --check-consistency \
      --runs-csv "$work/runs.csv" --csv "$work/steps.csv" >"$work/out" 2>"$work/err" ||
      fail "$strategy $extra at $ranks ranks exited $?: $(tail -5 "$work/out") $(cat "$work/err")"
    grep -q "loss vs single over 100 steps: .*: equivalent" "$work/out" ||
      fail "$strategy $extra: no equivalence line: $(cat "$work/out")"
    grep -q "parameters agree across ranks after every step" "$work/out" ||
      fail "$strategy $extra: no consistency line"
    python3 - "$work/runs.csv" "$work/steps.csv" "$strategy" "$ranks" <<'PY' || fail "$strategy $extra: records (above)"
import csv, sys
runs = list(csv.DictReader(open(sys.argv[1])))
steps = list(csv.DictReader(open(sys.argv[2])))
strategy, ranks = sys.argv[3], int(sys.argv[4])
assert len(runs) == 1 and runs[0]["strategy"] == strategy and int(runs[0]["ranks"]) == ranks, runs
assert runs[0]["loss_equivalent"] == "1", runs[0]
assert len(steps) == 100 and [int(s["step"]) for s in steps] == list(range(100)), len(steps)
if ranks > 1:
    measured, expected = float(runs[0]["bytes_per_step"]), float(runs[0]["bytes_per_step_expected"])
    assert abs(measured - expected) <= 0.01 * expected, (measured, expected)
print(f"{strategy} n{ranks}: loss max rel diff {runs[0]['loss_max_rel_diff']}, "
      f"bytes {runs[0]['bytes_per_step']} (formula {runs[0]['bytes_per_step_expected']})")
PY
  done
done

if [[ $ranks == 3 ]]; then
  # Defaults run at any rank count: 128 does not divide over 3 ranks, so without
  # --global-batch the default rounds up to 129 and says so; given, 128 is refused.
  timeout 300 "$mpiexec" -n 3 "$ccscope" train --steps 2 --width 16 --print-every 0 \
    >"$work/out" 2>"$work/err" || fail "train with the default batch at 3 ranks exited $?: $(cat "$work/err")"
  grep -q "^# global batch 129: the default 128 rounded up to a multiple of 3" "$work/out" ||
    fail "the default batch at 3 ranks: no note of the rounding: $(head -5 "$work/out")"
  timeout 300 "$mpiexec" -n 3 "$ccscope" train --steps 2 --width 16 --global-batch 128 \
    >"$work/out" 2>"$work/err"
  rc=$?
  [[ $rc == 2 ]] && grep -q "global batch 128 does not divide over 3 ranks" "$work/err" ||
    fail "--global-batch 128 at 3 ranks: exit $rc, want 2 and the reason: $(cat "$work/err")"
fi

if [[ $ranks == 2 ]]; then
  for fault in "ddp sum" "ddp sampler" "ddp bucket" "zero2 bucket" "zero2 clip --grad-clip 0.05" \
               "zero3 clip --grad-clip 0.05"; do
    read -r strategy name rest <<<"$fault"
    # shellcheck disable=SC2086
    run --strategy "$strategy" --lr 0.05 --fault "$name" $rest --check-loss >"$work/out" 2>"$work/err"
    rc=$?
    [[ $rc == 1 ]] || fail "broken variant $fault exited $rc, not 1: $(tail -3 "$work/out")"
    grep -q "NOT equivalent" "$work/out" || fail "broken variant $fault: no NOT equivalent line"
    echo "broken variant $fault: $(grep -o 'max relative difference [^,]*' "$work/out"), exit 1"
  done
  # Weak scaling: the same per-rank batch at 1 and 2 ranks (global 24, 48),
  # each against one rank with its own global batch.
  run --strategy ddp --lr 0.05 --scaling 1,2 --weak --check-loss --runs-csv "$work/weak.csv" \
    >"$work/out" 2>"$work/err" || fail "weak scaling exited $?: $(cat "$work/err")"
  python3 - "$work/weak.csv" <<'PY' || fail "weak scaling records (above)"
import csv, sys
runs = {int(r["ranks"]): r for r in csv.DictReader(open(sys.argv[1]))}
assert sorted(runs) == [1, 2], runs.keys()
assert [int(runs[n]["global_batch"]) for n in (1, 2)] == [24, 48], runs
for n in (1, 2):
    assert runs[n]["scaling"] == "weak" and runs[n]["loss_equivalent"] == "1", runs[n]
    assert runs[n]["run_id"] == f"ddp-n{n}-weak", runs[n]["run_id"]
eff, speedup = float(runs[2]["efficiency"]), float(runs[2]["speedup"])
assert abs(speedup - 2 * eff) < 1e-9, (speedup, eff)
print(f"weak scaling 1 -> 2 ranks: efficiency {eff:.2f}, speed-up in samples/s {speedup:.2f}")
PY
  # An unreduced DDP bucket also leaves the ranks' parameters apart.
  run --strategy ddp --lr 0.05 --fault bucket --check-consistency >"$work/out" 2>&1
  grep -q "parameters DIFFER across ranks after step 0" "$work/out" ||
    fail "unreduced bucket: the consistency check did not fire: $(tail -3 "$work/out")"
fi
echo "PASS: ccscope train at $ranks ranks"
