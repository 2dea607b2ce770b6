#!/usr/bin/env bash
# Measures how long after a rank's SIGKILL ccscope's line naming it appears on
# stderr, and when the job ends (not a CTest test; for the figures in the
# watchdog's notes). Each run: an endless 1 MiB all-reduce, rank VICTIM killed
# after 3 s; stderr lines are stamped as they arrive.
#
# usage: measure_dead_rank.sh vcluster CCSCOPE [RUNS] [VICTIM]   (3 nodes x 1 rank, MPICH; root)
#        measure_dead_rank.sh local CCSCOPE MPIEXEC [RUNS] [VICTIM]   (2 ranks on this machine)
# Prints one line per run, then median and range of both delays in ms.
set -euo pipefail
mode=${1:?usage: see the header}
ccscope=$(realpath "${2:?usage: see the header}")
if [[ $mode == local ]]; then
  mpiexec=${3:?usage: see the header}
  runs=${4:-10} victim=${5:-1}
else
  runs=${3:-10} victim=${4:-1}
fi
here=$(cd "$(dirname "$0")" && pwd)
vcluster=${VCLUSTER:-$here/../../vcluster}
name="measure-$$"
work=$(mktemp -d /tmp/measure-dead-rank.XXXXXX)
cleanup() {
  [[ $mode == vcluster ]] && "$vcluster" --name "$name" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export VCLUSTER_QUIET=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_orte_execute_quiet=1
[[ $mode == vcluster ]] && "$vcluster" --name "$name" up --nodes 3 --ranks-per-node 1 --rate 1gbit

is_descendant() { # PID ROOT
  local pid=$1
  while [[ -n $pid && $pid -gt 1 ]]; do
    [[ $pid == "$2" ]] && return 0
    pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) || return 1
  done
  return 1
}
victim_pid() { # ROOT: the ccscope process of rank $victim under ROOT
  local pid
  for pid in $(pgrep -x ccscope); do
    is_descendant "$pid" "$1" || continue
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
      grep -qxE "(PMI_RANK|OMPI_COMM_WORLD_RANK)=$victim" && { echo "$pid"; return 0; }
  done
  return 1
}

line_ms=() end_ms=()
for ((i = 1; i <= runs; i++)); do
  args=(bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 --timeout 10 --no-progress)
  if [[ $mode == local ]]; then
    cmd=(setsid "$mpiexec" -n 2 "$ccscope" "${args[@]}")
  else
    cmd=(setsid "$vcluster" --name "$name" run --timeout 60 -- "$ccscope" "${args[@]}")
  fi
  "${cmd[@]}" >"$work/out" 2> >(while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$work/err") </dev/null &
  job=$!
  pid=""
  for _ in $(seq 1 100); do pid=$(victim_pid "$job") && break; sleep 0.1; done
  [[ -n $pid ]] || { echo "run $i: no rank $victim found" >&2; kill -KILL -- "-$job"; exit 1; }
  sleep 3
  t0=$EPOCHREALTIME
  kill -KILL "$pid"
  rc=0
  wait "$job" || rc=$?
  t1=$EPOCHREALTIME
  sleep 0.2   # the stamping reader finishes
  stamp=$(grep -m1 -E "^[0-9.]+ ccscope: rank $victim \(.*\) died during " "$work/err" | cut -d' ' -f1 || true)
  end=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", (b - a) * 1000}')
  if [[ -n $stamp ]]; then
    ms=$(awk -v a="$t0" -v b="$stamp" 'BEGIN {printf "%.2f", (b - a) * 1000}')
    line_ms+=("$ms")
  else
    ms="(no line)"
  fi
  end_ms+=("$end")
  echo "run $i: exit $rc, line after $ms ms, job ended after $end ms"
done
summary() { # LABEL VALUES...
  local label=$1
  shift
  printf '%s\n' "$@" | sort -g | awk -v l="$label" '{v[NR] = $1}
    END {if (NR == 0) {print l ": none"; exit}
         m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
         printf "%s: median %.2f ms, range %.2f-%.2f ms, n=%d\n", l, m, v[1], v[NR], NR}'
}
summary "line after SIGKILL" "${line_ms[@]}"
summary "job end after SIGKILL" "${end_ms[@]}"
