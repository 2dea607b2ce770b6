# ci/tests/vcluster/lib.sh — shared by the virtual-cluster tests (sourced, not run).
# shellcheck shell=bash
# Each test: its own cluster name, teardown in a trap, exit 77 (CTest SKIP) when
# it cannot run here (not root, no usable `ip netns`, no ccscope binary).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VCLUSTER=${VCLUSTER:-$HERE/../../vcluster}
CCSCOPE=${CCSCOPE_BINARY:-}
TEST=$(basename "$0" .sh)
VC_NAME="t-${TEST#test_}-$$"
WORK=$(mktemp -d "/tmp/vcluster-$TEST.XXXXXX")
export VCLUSTER_QUIET=1

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "$TEST: $*"; }

require_vcluster() {
  [[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
  command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
  ip netns add "ccvc-probe-$$" 2>/dev/null || skip "ip netns is not usable here"
  ip netns del "ccvc-probe-$$"
  command -v mpiexec >/dev/null || skip "needs MPICH's mpiexec"
}
require_ccscope() {
  [[ -n $CCSCOPE && -x $CCSCOPE ]] || skip "no ccscope binary (CCSCOPE_BINARY='$CCSCOPE')"
}

vc() { "$VCLUSTER" --name "$VC_NAME" "$@"; }

# node_ccscopes [NODES]: ccscope processes in the first NODES (default 2) nodes' namespaces
# ("pid nodeI" per line)
node_ccscopes() {
  local i pid
  for ((i = 0; i < ${1:-2}; i++)); do
    for pid in $(ip netns pids "ccvc-$VC_NAME-n$i" 2>/dev/null); do
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == ccscope ]] && echo "$pid node$i"
    done
  done
  return 0
}

job_procs() { # processes of any job of this cluster still alive, anywhere
  grep -lsaz "^VCLUSTER_JOB=$VC_NAME\." /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true
}

# run_with_fault NAME FAULT...: an endless all-reduce with --timeout 5 through the
# cluster, FAULT injected after 3 s; the job must end non-zero by itself within
# 30 s and leave no process behind. Sets rc and elapsed; stderr in $WORK/NAME.err.
run_with_fault() {
  local name=$1
  shift
  vc run --timeout 60 -- "$CCSCOPE" bench allreduce --backend mpi -b 1M -e 1M -n 1000000 -w 1 \
    --timeout 5 >"$WORK/$name.out" 2>"$WORK/$name.err" &
  local run_pid=$!
  sleep 3
  vc fault --wait 20 "$@"
  local t0=$SECONDS
  rc=0
  wait "$run_pid" || rc=$?
  elapsed=$((SECONDS - t0))
  note "$name: bench exited $rc after ${elapsed}s; stderr:"
  sed 's/^/  | /' "$WORK/$name.err" | head -12
  [[ $rc != 0 ]] || fail "$name: ccscope bench exited 0"
  [[ $rc != 124 ]] || fail "$name: the job did not end by itself (vcluster run --timeout fired)"
  ((elapsed <= 30)) || fail "$name: took ${elapsed}s to exit (want <= 30 s)"
  local left
  left=$(job_procs)
  [[ -z $left ]] || fail "$name: processes of the job still alive: $left"
}

EXTRA_NAMES=()   # further clusters a test made, also removed on exit
cleanup() {
  local rc=$? n
  for n in "$VC_NAME" "${EXTRA_NAMES[@]}"; do "$VCLUSTER" --name "$n" down >/dev/null 2>&1 || true; done
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# csv_col FILE COLUMN [FILTER_COLUMN FILTER_VALUE]: values of COLUMN (by header name), one
# per record, through ci/read-records (quoted fields may hold commas and new lines);
# status 2 for a missing file or column.
READ_RECORDS=$HERE/../../read-records
csv_col() {
  local where=()
  [[ -z ${3:-} ]] || where=(--where "$3=${4:-}")
  python3 "$READ_RECORDS" "$1" --fields "$2" "${where[@]}"
}

# bench COLLECTIVE CSV [ccscope bench options...]: run ccscope bench through the cluster
# MPICH 4.0.2 over UCX's tcp transport now and then hangs in MPI_Finalize (one rank
# in UCX progress flushing an endpoint, its peer already in the PMI barrier; about
# 1 run in 30 here with one rank per node, also without shaping). A run that hits the job time limit is
# therefore retried once, saying so; a second hang fails the test.
BENCH_TIME_LIMIT=${BENCH_TIME_LIMIT:-30}
bench() {
  local coll=$1 csv=$2 rc attempt
  shift 2
  for attempt in 1 2; do
    rc=0
    rm -f "$csv"
    vc run --timeout "$BENCH_TIME_LIMIT" -- "$CCSCOPE" bench "$coll" --backend mpi --no-progress \
      --csv "$csv" "$@" || rc=$?
    [[ $rc == 124 && $attempt == 1 ]] || return "$rc"
    echo "WARNING: $coll run hit the ${BENCH_TIME_LIMIT}s limit (MPI_Finalize hang?); retrying once" >&2
  done
}

# check_correct CSV: every row has wrong == 0 and checked > 0
check_correct() {
  local rows bad
  rows=$(csv_col "$1" wrong | wc -l)
  [[ $rows -ge 1 ]] || fail "$1 has no rows"
  bad=$(csv_col "$1" wrong | awk '$1 != 0' | wc -l)
  [[ $bad == 0 ]] || fail "$1: $bad rows with wrong != 0"
}

# ns_of NAME: the namespaces of cluster NAME that exist
ns_of() {
  ip netns list | awk -v p="ccvc-$1-" '
    index($1, p) == 1 { r = substr($1, length(p) + 1); if (r == "head" || r ~ /^n[0-9]+$/) print $1 }'
}

# our_leftovers: namespaces / run folder of this test's cluster that still exist
our_leftovers() {
  ns_of "$VC_NAME" | sed 's/^/netns /'
  [[ ! -e ${VCLUSTER_STATE_ROOT:-/run/ccscope-vcluster}/$VC_NAME ]] || echo "run folder of $VC_NAME"
}
