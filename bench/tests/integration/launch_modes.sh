#!/usr/bin/env bash
# Launches without mpiexec (issue 24): torchrun's/Kubernetes' variables set by
# hand on this host (2 processes meeting at the TCP rendezvous, gloo's
# collectives), a rank that never comes (named after the rendezvous timeout),
# inconsistent environments (refused in one line), and nccl-tests' -g N (ranks as
# threads of one process: the same sizes, counts and #wrong 0 as N mpiexec
# ranks; a sweep that cannot fit refused before it starts).
#
# usage: launch_modes.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

if ! "$CCSCOPE" bench --help 2>&1 | grep -q 'gloo'; then
  log "SKIP: this ccscope was built without gloo (libgloo-dev), the CPU backend of launches without MPI"
  finish
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# torchrun_env RANK WORLD_SIZE PORT: the variables torchrun sets for a worker
# (torch/distributed/elastic/agent/server/local_elastic_agent.py), by hand.
torchrun_env() {
  echo "RANK=$1 WORLD_SIZE=$2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=$2 GROUP_RANK=0 ROLE_RANK=$1"
  echo "MASTER_ADDR=127.0.0.1 MASTER_PORT=$3 TORCHELASTIC_RUN_ID=ccscope-test"
}

# 1. Two workers, every row exact, the records say how the job was launched.
port=$(free_port)
pids=()
for rank in 0 1; do
  # shellcheck disable=SC2046
  env $(torchrun_env $rank 2 "$port") timeout -k 5 60 "$CCSCOPE" bench allreduce \
    -b 8 -e 64K -f 8 -n 3 -w 1 --no-progress --csv "$WORK/torchrun$rank.csv" \
    >"$WORK/torchrun$rank.stdout" 2>"$WORK/torchrun$rank.stderr" </dev/null &
  pids+=($!)
done
for rank in 0 1; do
  status=0
  wait "${pids[$rank]}" || status=$?
  assert_eq 0 "$status" "torchrun-style rank $rank: exit status"
  [ "$status" = 0 ] || show_file "rank $rank stderr" "$WORK/torchrun$rank.stderr"
done
rows=$(csv_select "$WORK/torchrun0.csv" launch backend ranks size_bytes wrong | sort -u)
expected=$(for size in 8 64 512 4096 32768; do printf 'torchrun\tgloo\t2\t%s\t0\n' "$size"; done | sort -u)
assert_eq "$expected" "$rows" "torchrun-style run: launch, backend, ranks, sizes, #wrong"
grep -q '^# Launch: torchrun (torchrun environment)' "$WORK/torchrun0.stdout" ||
  fail "the header does not say the launch: $(grep '^#' "$WORK/torchrun0.stdout" | head -8)"
assert_eq "" "$(cat "$WORK/torchrun1.csv" 2>/dev/null)" "rank 1 writes no CSV"

# 1b. torchrun itself, where torch is installed (CCSCOPE_TORCHRUN names one; the test does
# not install torch: its wheels are gigabytes).
torchrun=${CCSCOPE_TORCHRUN:-$(command -v torchrun || true)}
if [ -n "$torchrun" ]; then
  status=0
  timeout -k 5 120 "$torchrun" --nproc_per_node 2 --master_port "$(free_port)" --no-python \
    "$CCSCOPE" bench allreduce -b 8 -e 64K -f 8 -n 3 -w 1 --no-progress \
    --csv "$WORK/real_torchrun.csv" >"$WORK/real_torchrun.out" 2>&1 </dev/null || status=$?
  assert_eq 0 "$status" "torchrun --nproc_per_node 2: exit status"
  assert_eq "$(printf 'torchrun\t0')" "$(csv_select "$WORK/real_torchrun.csv" launch wrong | sort -u)" \
    "torchrun --nproc_per_node 2: launch and #wrong"
else
  log "torchrun not found (pip install torch; or CCSCOPE_TORCHRUN=PATH): its case is skipped"
fi

# 2. A rank that never comes: named after the rendezvous timeout, exit 3, one line.
port=$(free_port)
start=$(date +%s)
status=0
# shellcheck disable=SC2046
env $(torchrun_env 0 3 "$port") CCSCOPE_RENDEZVOUS_TIMEOUT=2 timeout -k 5 30 "$CCSCOPE" bench \
  allreduce -b 8 -e 8 -n 1 >"$WORK/missing.stdout" 2>"$WORK/missing.stderr" </dev/null ||
  status=$?
elapsed=$(($(date +%s) - start))
assert_eq 3 "$status" "a missing rank: exit status"
grep -q 'ranks 1, 2 of 3 did not arrive within 2 s (rendezvous at 127.0.0.1:' "$WORK/missing.stderr" ||
  fail "the missing ranks are not named: $(cat "$WORK/missing.stderr")"
assert_eq 1 "$(grep -c '' "$WORK/missing.stderr")" "a missing rank: lines on stderr"
[ "$elapsed" -le 10 ] || fail "a missing rank took ${elapsed} s to be named (timeout 2 s)"
assert_no_crash_text "$WORK/missing.stderr" "a missing rank"

# 3. Inconsistent environments: one line naming the variable, exit 2.
extra=()
refuse() {  # what ENV... : expects exit 2 and WHAT in the one line
  local what=$1 status=0
  shift
  env "$@" timeout -k 5 30 "$CCSCOPE" bench allreduce -b 8 -e 8 -n 1 "${extra[@]}" \
    >"$WORK/refused.stdout" 2>"$WORK/refused.stderr" </dev/null || status=$?
  assert_eq 2 "$status" "refusal ($*): exit status"
  grep -qF -- "$what" "$WORK/refused.stderr" || fail "refusal ($*) does not say '$what': $(cat "$WORK/refused.stderr")"
  assert_eq 1 "$(grep -c '' "$WORK/refused.stderr")" "refusal ($*): lines on stderr"
}
refuse "MASTER_ADDR" RANK=0 WORLD_SIZE=2 MASTER_PORT=29500
refuse "WORLD_SIZE" RANK=3  # a stray RANK: still said (by every process alike)
refuse "WORLD_SIZE" RANK=0 WORLD_SIZE=two MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
port=$(free_port)
extra=(--backend mpi)
refuse "--backend mpi runs over MPI's world of processes" RANK=0 WORLD_SIZE=1 \
  MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
extra=()
# Ranks told different world sizes: the one that disagrees says so.
port=$(free_port)
# shellcheck disable=SC2046
env $(torchrun_env 0 2 "$port") CCSCOPE_RENDEZVOUS_TIMEOUT=3 timeout -k 5 30 "$CCSCOPE" bench \
  allreduce -b 8 -e 8 -n 1 >/dev/null 2>"$WORK/size0.stderr" </dev/null &
rank0=$!
status=0
# shellcheck disable=SC2046
env $(torchrun_env 1 3 "$port") CCSCOPE_RENDEZVOUS_TIMEOUT=3 timeout -k 5 30 "$CCSCOPE" bench \
  allreduce -b 8 -e 8 -n 1 >/dev/null 2>"$WORK/size1.stderr" </dev/null || status=$?
wait "$rank0" || true
assert_eq 2 "$status" "a rank told another WORLD_SIZE: exit status"
grep -q 'rank 1 was told the world has 3 ranks, rank 0 that it has 2' "$WORK/size1.stderr" ||
  fail "the disagreement is not named: $(cat "$WORK/size1.stderr")"

# 4. -g 4: four thread ranks in one process give what four mpiexec ranks give.
status=0
timeout -k 5 120 "$CCSCOPE" bench allreduce -b 8 -e 1M -f 4 -n 2 -w 1 -g 4 --no-progress \
  --csv "$WORK/threads.csv" >"$WORK/threads.stdout" 2>"$WORK/threads.stderr" </dev/null ||
  status=$?
assert_eq 0 "$status" "-g 4: exit status"
[ "$status" = 0 ] || show_file "-g 4 stderr" "$WORK/threads.stderr"
status=0
timeout -k 5 120 "$MPIEXEC" -n 4 "$CCSCOPE" bench allreduce -b 8 -e 1M -f 4 -n 2 -w 1 \
  --backend gloo --no-progress --csv "$WORK/processes.csv" >"$WORK/processes.stdout" \
  2>"$WORK/processes.stderr" </dev/null || status=$?
assert_eq 0 "$status" "mpiexec -n 4: exit status"
threads=$(csv_select "$WORK/threads.csv" ranks size_bytes count in_place wrong)
processes=$(csv_select "$WORK/processes.csv" ranks size_bytes count in_place wrong)
assert_eq "$processes" "$threads" "-g 4 vs mpiexec -n 4: ranks, sizes, counts, #wrong"
assert_eq 18 "$(grep -c . <<<"$threads")" "-g 4: rows (8 B to 512 KiB by 4, out-of-place and in-place)"
assert_eq "4" "$(csv_select "$WORK/threads.csv" ranks_per_process | sort -u)" "-g 4: ranks_per_process"
grep -q '^# Ranks per process: 4' "$WORK/threads.stdout" || fail "-g 4: the header does not say the ranks are threads"

# 5. A sweep that cannot fit is refused before it starts, naming what fits (-e 64G
# on any host with less than a few TiB: 8 ranks x 2 buffers).
status=0
timeout -k 5 60 "$CCSCOPE" bench allreduce -b 8 -e 64G -f 2 -g 8 --no-progress \
  >"$WORK/big.stdout" 2>"$WORK/big.stderr" </dev/null || status=$?
assert_eq 2 "$status" "-e 64G -g 8: exit status"
grep -qE 'use -e [0-9.]+ [KMGT]?i?B or less' "$WORK/big.stderr" ||
  fail "-e 64G -g 8 does not name the largest size that fits: $(cat "$WORK/big.stderr")"
assert_eq 1 "$(grep -c '' "$WORK/big.stderr")" "-e 64G -g 8: lines on stderr"
finish
