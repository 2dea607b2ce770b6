#!/usr/bin/env bash
# Correctness matrix over real MPI: one collective at one rank count, every data
# type (float, half, bfloat16, int32) and, for the reductions, every op (sum, max,
# avg); broadcast from root 0 and from the last rank. Two sweeps per case: tiny,
# non-divisible and ~400 KiB sizes (-b 8 -e 400K -f 37: 8, 296, 10952, 405224 B)
# and a single 1000 B size. Every run must exit 0 and its CSV must hold the
# expected rows, all checked, none wrong, for the right number of ranks.
#
# usage: [BACKEND=mpi|ring] matrix.sh CCSCOPE MPIEXEC NRANKS COLLECTIVE   (default backend: mpi)
source "$(dirname "$0")/lib.sh"
init_args "$@"
NRANKS=${3:?number of ranks}
COLL=${4:?collective}
TEST_NAME="matrix.n${NRANKS}.${COLL}"
make_workdir
use_private_binary

TYPES=(float half bfloat16 int32)
case $COLL in
  allreduce | reducescatter) OPS=(sum max avg) REDUCES=1 ;;
  allgather | broadcast | alltoall | sendrecv) OPS=(-) REDUCES=0 ;;
  *) die "unknown collective '$COLL'" ;;
esac
case $COLL in
  alltoall | sendrecv) PLACES=1 ;;  # out-of-place only
  *) PLACES=2 ;;
esac
ROOTS=(-)
if [ "$COLL" = broadcast ]; then
  ROOTS=(0)
  [ "$NRANKS" -gt 1 ] && ROOTS+=($((NRANKS - 1)))
fi

# The sizes ccscope must run for -b MIN -e MAX -f FACTOR, computed here
# independently: MIN, MIN*F, ... while <= MAX.
expected_size_count() {
  local size=$1 max=$2 factor=$3 n=0
  while [ "$size" -le "$max" ]; do
    n=$((n + 1))
    size=$((size * factor))
  done
  echo "$n"
}

SWEEPS=("-b 8 -e 400K -f 37|$(expected_size_count 8 409600 37)" "-b 1000 -e 1000|1")
RUNS=0

check_run() {  # type op root sweep_args expected_sizes
  local type=$1 op=$2 root=$3 sweep=$4 nsizes=$5
  local tag="${COLL} n=${NRANKS} type=${type} op=${op} root=${root} (${sweep})"
  local dir="$WORK/run$RUNS"
  mkdir -p "$dir"
  RUNS=$((RUNS + 1))
  local args=(bench "$COLL" --backend "${BACKEND:-mpi}" $sweep -n 2 -w 1 -d "$type" --no-progress --timeout 60 --csv "$dir/out.csv")
  [ "$op" != - ] && args+=(-o "$op")
  [ "$root" != - ] && args+=(-r "$root")

  local status=0
  "$MPIEXEC" -n "$NRANKS" "$CCSCOPE" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
  if [ "$status" -ne 0 ]; then
    fail "$tag: exit status $status, expected 0 (command: mpiexec -n $NRANKS ccscope ${args[*]})"
    show_file stderr "$dir/stderr"
    return
  fi
  if grep -q 'WRONG RESULT\|timeout' "$dir/stderr"; then
    fail "$tag: exit 0 but stderr reports a problem"
    show_file stderr "$dir/stderr"
  fi

  local rows
  if ! rows=$(csv_select "$dir/out.csv" collective dtype op root in_place size_bytes ranks checked wrong backend); then
    fail "$tag: unreadable CSV"
    show_file csv "$dir/out.csv"
    return
  fi
  local expected_rows=$((nsizes * PLACES)) got_rows
  got_rows=$(printf '%s' "$rows" | grep -c '^' || true)
  assert_eq "$expected_rows" "$got_rows" "$tag: CSV data rows ($nsizes size(s) x $PLACES placement(s))"

  local expected_op=none expected_root=-1
  [ "$REDUCES" -eq 1 ] && expected_op=$op
  [ "$root" != - ] && expected_root=$root
  local bad
  bad=$(printf '%s\n' "$rows" | awk -F'\t' -v coll="$COLL" -v type="$type" -v op="$expected_op" \
      -v root="$expected_root" -v n="$NRANKS" -v places="$PLACES" -v backend="${BACKEND:-mpi}" '
    NF == 0 { next }
    {
      why = ""
      if ($1 != coll) why = why " collective=" $1
      if ($2 != type) why = why " dtype=" $2
      if ($3 != op) why = why " op=" $3 " (expected " op ")"
      if ($4 != root) why = why " root=" $4 " (expected " root ")"
      if ($5 != "0" && $5 != "1") why = why " in_place=" $5
      if (places == 1 && $5 != "0") why = why " in_place=" $5 " (out-of-place only)"
      if ($7 != n) why = why " ranks=" $7 " (expected " n ")"
      if ($8 != "1") why = why " checked=" $8
      if ($9 != "0") why = why " wrong=" $9
      if ($10 != backend) why = why " backend=" $10 " (expected " backend ")"
      if ($6 !~ /^[0-9]+$/) why = why " size_bytes=" $6
      seen[$6 "/" $5]++
      if (seen[$6 "/" $5] > 1) why = why " duplicate row for size " $6 " in_place=" $5
      if (why != "") print "row " NR ":" why
      sizes[$6] = 1; count[$5]++
    }
    END {
      if (places == 2 && count["0"] != count["1"])
        print "out-of-place rows (" count["0"] + 0 ") != in-place rows (" count["1"] + 0 ")"
    }')
  if [ -n "$bad" ]; then
    fail "$tag: bad CSV rows:"$'\n'"$bad"
    show_file csv "$dir/out.csv"
  fi
}

for type in "${TYPES[@]}"; do
  for op in "${OPS[@]}"; do
    for root in "${ROOTS[@]}"; do
      for sweep in "${SWEEPS[@]}"; do
        check_run "$type" "$op" "$root" "${sweep%|*}" "${sweep#*|}"
      done
    done
  done
done
log "$RUNS run(s) of mpiexec -n $NRANKS ccscope bench $COLL"
finish
