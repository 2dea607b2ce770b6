#!/usr/bin/env bash
# ccscope train's bad input: one line naming what is wrong, exit 2, no trace;
# outputs already asked for are not left half-made in a directory.
# usage: train_bad_input.sh CCSCOPE MPIEXEC DEEPSPEED_CONFIG_DIR
set -uo pipefail
ccscope=$1 mpiexec=$2 configs=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_usage() {  # expect_usage RANKS WHAT ARGS...
  local ranks=$1 what=$2
  shift 2
  timeout 120 "$mpiexec" -n "$ranks" "$ccscope" train --steps 3 --width 8 --depth 2 \
    --print-every 0 "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [[ $rc == 2 ]] || fail "$*: exit $rc, not 2: $(cat "$work/err")"
  [[ $(wc -l <"$work/err") == 1 ]] || fail "$*: not one line: $(cat "$work/err")"
  grep -q -- "$what" "$work/err" || fail "$*: the line does not say '$what': $(cat "$work/err")"
  grep -qi "terminate\|abort\|backtrace" "$work/err" && fail "$*: a crash: $(cat "$work/err")"
  echo "ok: $* -> $(cat "$work/err")"
}
expect_usage 1 "use single, ddp" --strategy zero4
expect_usage 1 "use fp32, bf16" --precision fp8
expect_usage 2 "does not divide over 2 ranks" --global-batch 9
expect_usage 2 "the job has 2 rank" --scaling 1,2,4
expect_usage 1 "give rank counts" --scaling 1,x
# (a given batch: without one, the default rounds up to a multiple of the micro-batches)
expect_usage 1 "micro-batches" --micro-batches 3 --global-batch 128
expect_usage 1 "is a directory" --csv "$work"
printf '{"train_batch_size": 8, "zero_optimization": {"stage": 2,}' >"$work/bad.json"
expect_usage 1 "deepspeed" --deepspeed-config "$work/bad.json"
expect_usage 1 "no such file\|cannot" --deepspeed-config "$work/missing.json"
# A good DeepSpeed config runs, and says what it honoured and ignored.
cat >"$work/ds.json" <<'JSON'
{"train_batch_size": 8, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
 "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 500},
 "steps_per_print": 10}
JSON
timeout 120 "$mpiexec" -n 2 "$ccscope" train --steps 3 --width 8 --depth 2 --print-every 0 \
  --deepspeed-config "$work/ds.json" >"$work/out" 2>"$work/err" ||
  fail "a good DeepSpeed config exited $?: $(cat "$work/err")"
grep -q "honoured.*zero_optimization.stage" "$work/out" || fail "no honoured line: $(cat "$work/out")"
grep -q "ignored.*steps_per_print" "$work/out" || fail "no ignored line: $(cat "$work/out")"
grep -q "zero2, 2 rank" "$work/out" || fail "the config's stage did not run: $(cat "$work/out")"
grep -q "2 micro-batch" "$work/out" || fail "the config's accumulation did not run"
echo "PASS: bad input"
