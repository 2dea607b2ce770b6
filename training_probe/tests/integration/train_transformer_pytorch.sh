#!/usr/bin/env bash
# The transformer against PyTorch: `ccscope train --model transformer --export`
# and pytorch_transformer.py train the same weights on the same batches for
# 100 steps with AdamW (weight decay 0.1), 2 micro-batches and clipping active
# every step, and with SGD and momentum; the loss curves agree within 1e-4
# (float32 rounding measured 2e-7). Where the CUDA/NCCL stand-in was built, the
# GPU path's runs of the first case too (tp 2 with sequence parallelism and
# selective recomputation, ZeRO-3 at 2 ranks, over nccl) against the same
# PyTorch run. Skipped (77) without a python with torch
# ($CCSCOPE_TORCH_VENV, default /work/venv-torch, then python3).
# usage: train_transformer_pytorch.sh CCSCOPE SCRIPTS_DIR [MPIEXEC STANDIN_LIB_DIR]
set -uo pipefail
ccscope=$1 scripts=$2 mpiexec=${3:-} standin=${4:-}
venv=${CCSCOPE_TORCH_VENV:-/work/venv-torch}
python=
for candidate in "$venv/bin/python" python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch, numpy' 2>/dev/null; then
    python=$candidate
    break
  fi
done
[ -n "$python" ] || { echo "skipped: no python with torch and numpy"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
shape=(--model transformer --width 32 --depth 2 --heads 4 --seq-len 16
       --vocab 32 --global-batch 16 --steps 100 --print-every 0)
compare() {  # label, then the optimizer flags
  local label=$1
  shift
  rm -rf "$work/export"
  "$ccscope" train "${shape[@]}" --strategy single "$@" --export "$work/export" --csv "$work/steps.csv" \
    >"$work/out" 2>&1 || fail "$label: ccscope exited $?: $(tail -3 "$work/out")"
  OMP_NUM_THREADS=1 "$python" "$scripts/pytorch_transformer.py" "$work/export" \
    --ccscope-csv "$work/steps.csv" --tolerance 1e-4 >"$work/cmp" 2>&1 ||
    fail "$label: $(cat "$work/cmp")"
  grep -q "over 100 steps: .*: equivalent" "$work/cmp" || fail "$label: $(cat "$work/cmp")"
  echo "ok: $label: $(tail -1 "$work/cmp")"
}
adamw=(--optimizer adamw --weight-decay 0.1 --lr 0.003 --micro-batches 2 --grad-clip 0.1)
compare "adamw, 2 micro-batches, clipping" "${adamw[@]}"
# The GPU path on the same export (same weights and batches), under the stand-in.
if [ -n "$standin" ] && [ -e "$standin/libnccl.so.2" ] &&
    [ -e "$standin/libtraining_probe_kernels_emulation.so" ]; then
  for run in "tp --tp 2 --sequence-parallel --recompute selective" "zero3"; do
    rm -f "$work/gpu.csv"
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH="$standin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CCSCOPE_STANDIN_GPUS=2 \
      timeout 240 "$mpiexec" -n 2 "$ccscope" train "${shape[@]}" --backend nccl \
      "${adamw[@]}" --strategy $run --csv "$work/gpu.csv" >"$work/gpu.out" 2>&1 ||
      fail "nccl $run: ccscope exited $?: $(tail -3 "$work/gpu.out")"
    OMP_NUM_THREADS=1 "$python" "$scripts/pytorch_transformer.py" "$work/export" \
      --ccscope-csv "$work/gpu.csv" --tolerance 1e-4 >"$work/cmp" 2>&1 ||
      fail "nccl $run: $(cat "$work/cmp")"
    grep -q "over 100 steps: .*: equivalent" "$work/cmp" || fail "nccl $run: $(cat "$work/cmp")"
    echo "ok: the GPU path, $run: $(tail -1 "$work/cmp")"
  done
else
  echo "note: the GPU path's comparison not run (no CUDA/NCCL stand-in in '$standin')"
fi
# Clipping was active: every step's gradient norm above 0.1.
python3 - "$work/steps.csv" <<'PY' || fail "clipping was not active on every step"
import csv, sys
norms = [float(r["grad_norm"]) for r in csv.DictReader(open(sys.argv[1]))]
assert len(norms) == 100 and min(norms) > 0.1, (min(norms), len(norms))
PY
compare "sgd with momentum" --optimizer sgd --lr 0.1 --momentum 0.9
