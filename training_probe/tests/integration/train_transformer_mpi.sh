#!/usr/bin/env bash
# ccscope train --model transformer under the real mpiexec at 2 ranks: ddp,
# zero3 with full recomputation, tp, and tp with sequence parallelism and
# selective recomputation (and at 4 ranks with full recomputation) each match one rank's loss (--check-loss) with the
# parameters agreeing (--check-consistency); tp's tensor bytes per step are
# Megatron's 4 all-reduces of s x b x h per block; skipping the tensor
# group's backward reductions exits 1 with NOT equivalent; pp with the
# transformer exits 2 with one line.
# usage: train_transformer_mpi.sh CCSCOPE MPIEXEC
set -uo pipefail
ccscope=$1 mpiexec=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# 2 blocks of hidden 32, 4 heads, 16 tokens of 32 words, 16 sequences a step.
shape=(--model transformer --width 32 --depth 2 --heads 4 --seq-len 16 --vocab 32
       --global-batch 16 --steps 30 --optimizer adam --lr 0.003 --print-every 0 --timeout 60)
ranks=2
run() { timeout 300 "$mpiexec" -n "$ranks" "$ccscope" train "${shape[@]}" "$@"; }

check() {  # label, then the train flags
  local label=$1
  shift
  run "$@" --check-loss --check-consistency >"$work/out" 2>"$work/err" ||
    fail "$label exited $?: $(tail -5 "$work/out") $(cat "$work/err")"
  grep -q "loss vs single over 30 steps: .*: equivalent" "$work/out" ||
    fail "$label: no equivalence line: $(cat "$work/out")"
  grep -q "parameters agree across ranks after every step" "$work/out" ||
    fail "$label: no consistency line: $(cat "$work/out")"
  echo "ok: $label: $(grep 'loss vs single' "$work/out")"
}

check ddp --strategy ddp
check "zero3, full recomputation" --strategy zero3 --recompute full
check tp --strategy tp
# 4 all-reduces of s b h = 16 x 16 x 32 floats per block, 2 blocks, ring bytes 2 N (n-1)/n.
grep -q "tensor 0.262 MB" "$work/out" || fail "tp: tensor bytes not 0.262 MB: $(cat "$work/out")"
check "tp, sequence parallel, selective recomputation" --strategy tp --sequence-parallel \
  --recompute selective
ranks=4
check "4 ranks: tp, sequence parallel, full recomputation" --strategy tp --sequence-parallel \
  --recompute full
ranks=2

run --strategy tp --check-loss --fault tp-allreduce >"$work/out" 2>"$work/err"
code=$?
[ "$code" = 1 ] || fail "tp-allreduce fault exited $code, not 1: $(tail -3 "$work/out")"
grep -q "NOT equivalent" "$work/out" || fail "tp-allreduce fault: no NOT equivalent line"
echo "ok: the skipped tensor-parallel reduction fails the check"

run --strategy pp >"$work/out" 2>"$work/err"
code=$?
[ "$code" = 2 ] || fail "pp with the transformer exited $code, not 2"
[ "$(wc -l <"$work/err")" = 1 ] && grep -q "pp, ep and 3d are built for the MLP only" "$work/err" ||
  fail "pp with the transformer: not one line: $(cat "$work/err")"
echo "ok: pp with the transformer refused"
