#!/usr/bin/env bash
# NCCL backend over real GPUs: every collective x float/half/bfloat16/int32 x
# sum/max/avg, then a few runs of what nccl-tests 2.19 also covers (mulsum through
# ncclRedOpCreatePreMulSum, 64-bit and unsigned integers, fp8 on GPUs of compute
# capability >= 9.0, -G 2 CUDA-graph launches), RANKS ranks with --isolate-ranks
# (so several ranks may share one GPU through NCCL's network transport),
# #wrong == 0 in every row. Exits 77 (CTest: skipped) when
# there is no GPU or ccscope was built without NCCL: never reported as passed.
# usage: nccl_bench.sh CCSCOPE MPIEXEC RANKS
set -euo pipefail
ccscope=$1 mpiexec=$2 ranks=$3
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIPPED: no NVIDIA GPU visible (nvidia-smi -L lists none)"; exit 77
fi
probe=$("$ccscope" bench allreduce --backend nccl -b 8 -e 8 -n 1 -w 0 --no-progress 2>&1 || true)
if grep -q "built without NCCL" <<<"$probe"; then echo "SKIPPED: $probe"; exit 77; fi
launcher=("$mpiexec" -n "$ranks")
if "$mpiexec" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then  # 4.1 prints "(OpenRTE)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  launcher=("$mpiexec" --bind-to none --oversubscribe -n "$ranks")
fi
read_records="$(cd "$(dirname "$0")/../../../ci" && pwd)/read-records"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# One launch per (type, op) runs every collective (NCCL start-up costs about a
# second per launch); the data-movement ones ignore -o.
collectives=allreduce,reducescatter,allgather,broadcast,alltoall,sendrecv
run() {  # collectives type op [extra bench args...]
  local collectives=$1 type=$2 op=$3
  shift 3
  local what="$type $op${*:+ $*}"
  local csv="$work/run-$((++runs)).csv"
  if ! timeout 300 "${launcher[@]}" "$ccscope" bench "$collectives" --backend nccl --isolate-ranks -d "$type" -o "$op" \
      -b 8 -e 4M -f 8 -n 3 -w 1 --timeout 60 --no-progress --csv "$csv" "$@" >"$work/out" 2>&1; then
    echo "FAIL: $collectives $what on $ranks ranks exited non-zero:"; tail -5 "$work/out"; failures=$((failures + 1)); return
  fi
  local records bad rows
  if ! records=$(python3 "$read_records" "$csv" --fields checked,wrong,backend 2>&1); then
    echo "FAIL: $collectives $what on $ranks ranks: $records"; failures=$((failures + 1)); return
  fi
  bad=$(awk -F'\t' 'NF && ($1 != 1 || $2 != 0 || $3 != "nccl") {n++} END {print n+0}' <<<"$records")
  rows=$(grep -c . <<<"$records" || true)
  # 7 sizes (8 B .. 2 MiB, x8) x (4 collectives x 2 placements + alltoall, sendrecv) = 70
  if [ "$bad" -ne 0 ] || [ "$rows" -lt 70 ]; then
    echo "FAIL: $collectives $what on $ranks ranks: $bad bad rows of $rows"; failures=$((failures + 1))
  else
    echo "ok: $what on $ranks ranks ($rows rows, #wrong 0)"
  fi
}
runs=0
for type in float half bfloat16 int32; do
  for op in sum max avg; do run "$collectives" "$type" "$op"; done
done
# What nccl-tests 2.19 also covers: mulsum (ncclRedOpCreatePreMulSum, the rank's
# scalar 1 + rank % 2), 64-bit and unsigned integers, CUDA-graph launches.
run "$collectives" float mulsum
run "$collectives" int64 sum
run "$collectives" uint32 min
run "$collectives" float sum -G 2
# fp8 needs compute capability >= 9.0 (NCCL refuses fp8 reductions below sm_90;
# nccl-tests drops fp8 there): run it only where every visible GPU has it.
min_cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -n | head -n 1)
if awk -v cc="${min_cc:-0}" 'BEGIN {exit !(cc + 0 >= 9.0)}'; then
  run "$collectives" f8e4m3 sum
  run "$collectives" f8e5m2 max
else
  echo "skipped: fp8 runs (oldest GPU has compute capability ${min_cc:-unknown}, fp8 needs >= 9.0)"
fi
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
