#!/usr/bin/env bash
# Correctness matrix over real MPI: one collective at one rank count, swept
# over every element type (-d all) and, for the reductions, every op (-o all)
# in one launch: tiny, non-divisible and ~400 KiB sizes (-b 8 -e 400K -f 37:
# 8, 296, 10952, 405224 B; from 296 B at 3 and 4 ranks). At 3 and 4 ranks
# (ranks outnumber this machine's cores, and every operation costs a scheduler
# slice) the runs over every type stop at 10952 B (the check's cost grows with
# ranks x bytes: 405224 B of every type took 9 of a 4-rank test's 16 s) and
# float, plus bfloat16 (an MPI_Op of ccscope's own) for the reductions, runs
# the whole sweep; the reductions run every type with sum and every op with float;
# broadcast, gather and scatter run from the last rank (and from rank 0 with
# float), reduce every type with sum from the last rank and every op with float
# from rank 0 (at every rank count). At 1 and 2 ranks broadcast, gather and
# scatter run from every root; all-reduce and reduce-scatter run every type with
# every op up to 10952 B and, at 405224 B, every type with sum and every op with
# float (every type x op at 405224 B was two thirds of their time). Every CSV row must be checked, with the right
# collective, type, op, root, rank count and backend, and no wrong element,
# except where the MPI library itself is known to be wrong: unsigned MPI_MIN /
# MPI_MAX on a library that compares them as signed (MPICH 4.0,
# pmodels/mpich#6083; UNSIGNED_PROBE tells), where ccscope must report them.
#
# BACKEND=gloo: the reductions every type with sum and every op with float, the others every
# type from every root, over the -d all sweep; gloo has no bfloat16 or fp8 (ccscope refuses them; -d all leaves them out): its rows are the other
# 9 types.
#
# usage: [BACKEND=mpi|ring|gloo] matrix.sh CCSCOPE MPIEXEC NRANKS COLLECTIVE [UNSIGNED_PROBE]
source "$(dirname "$0")/lib.sh"
init_args "$@"
NRANKS=${3:?number of ranks}
COLL=${4:?collective}
PROBE=${5:-}
TEST_NAME="matrix.n${NRANKS}.${COLL}"
BACKEND=${BACKEND:-mpi}
make_workdir
use_private_binary

ALL_TYPES=(int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2)
ALL_OPS=(sum prod max min avg mulsum)
[ "$BACKEND" = gloo ] && ALL_TYPES=(int8 uint8 int32 uint32 int64 uint64 half float double)
case $COLL in
  allreduce | reducescatter | reduce) REDUCES=1 ;;
  allgather | broadcast | alltoall | sendrecv | gather | scatter | alltoallv) REDUCES=0 ;;
  *) die "unknown collective '$COLL'" ;;
esac
case $COLL in
  alltoall | sendrecv | alltoallv) PLACES=1 ;;  # out-of-place only
  *) PLACES=2 ;;
esac
SWEEP=(-b 8 -e 400K -f 37)
NSIZES=4
# ALL_TYPES_SWEEP: the sizes of a run over every type (-d all).
ALL_TYPES_SWEEP=("${SWEEP[@]}")
ALL_TYPES_NSIZES=$NSIZES
LARGEST=405224
if [ "$NRANKS" -le 2 ] && [ "$REDUCES" = 1 ] && [ "$COLL" != reduce ]; then
  ALL_TYPES_SWEEP=(-b 8 -e 11K -f 37)  # 8, 296, 10952 B; 405224 B in two runs below
  ALL_TYPES_NSIZES=3
fi
if [ "$NRANKS" -ge 3 ]; then  # 296, 10952, 405224 B: the 8 B case runs at 1 and 2 ranks
  SWEEP=(-b 296 -e 400K -f 37)
  NSIZES=3
  ALL_TYPES_SWEEP=(-b 296 -e 11K -f 37)  # 296, 10952 B
  ALL_TYPES_NSIZES=2
fi

# Which unsigned types this MPI library reduces as signed under MPI_MIN/MAX.
SIGNED_UNSIGNED=" "
if [ "$BACKEND" = mpi ] && [ "$REDUCES" = 1 ] && [ -n "$PROBE" ]; then
  probe_out=$("$MPIEXEC" -n 2 "$PROBE" 2>&1) || die "the unsigned probe failed: $probe_out"
  SIGNED_UNSIGNED=" $(printf '%s\n' "$probe_out" | awk '$2 == "signed" { printf "%s ", $1 }')"
  [ "$SIGNED_UNSIGNED" != " " ] && log "this MPI library compares unsigned as signed for:$SIGNED_UNSIGNED(pmodels/mpich#6083)"
fi

RUNS=0
# check_run TYPES OPS ROOT [largest]: one launch; TYPES/OPS are "all" or one name;
# "largest": only the sweep's largest size.
check_run() {
  local types=$1 ops=$2 root=$3
  local tag="${COLL} n=${NRANKS} -d ${types} -o ${ops} root=${root} backend=${BACKEND}"
  local dir="$WORK/run$RUNS"
  mkdir -p "$dir"
  RUNS=$((RUNS + 1))
  local sweep=("${SWEEP[@]}") nsizes=$NSIZES
  [ "$types" = all ] && sweep=("${ALL_TYPES_SWEEP[@]}") nsizes=$ALL_TYPES_NSIZES
  [ "${4:-}" = largest ] && sweep=(-b "$LARGEST" -e "$LARGEST") nsizes=1
  local args=(bench "$COLL" --backend "$BACKEND" "${sweep[@]}" -n 1 -w 0 -c 1 -d "$types"
    --no-progress --timeout 60 --csv "$dir/out.csv")
  [ "$REDUCES" = 1 ] && args+=(-o "$ops")
  [ "$root" != - ] && args+=(-r "$root")

  local ntypes=1 nops=1
  [ "$types" = all ] && ntypes=${#ALL_TYPES[@]}
  [ "$REDUCES" = 1 ] && [ "$ops" = all ] && nops=${#ALL_OPS[@]}
  local nroots=1
  [ "$root" = -1 ] && nroots=$NRANKS
  local expected_rows=$((ntypes * nops * nsizes * PLACES * nroots))

  local status=0
  "$MPIEXEC" -n "$NRANKS" "$CCSCOPE" "${args[@]}" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
  local rows
  if ! rows=$(csv_select "$dir/out.csv" collective dtype op root in_place size_bytes ranks checked wrong backend); then
    fail "$tag: unreadable CSV (exit $status)"
    show_file stderr "$dir/stderr"
    return
  fi
  local got_rows
  got_rows=$(printf '%s' "$rows" | grep -c '^' || true)
  assert_eq "$expected_rows" "$got_rows" "$tag: CSV data rows ($ntypes type(s) x $nops op(s) x $nsizes sizes x $PLACES placement(s) x $nroots root(s))"

  local expected_op=none expected_root=-1
  [ "$REDUCES" -eq 1 ] && [ "$ops" != all ] && expected_op=$ops
  [ "$root" != - ] && [ "$root" != -1 ] && expected_root=$root
  local verdict
  verdict=$(printf '%s\n' "$rows" | awk -F'\t' -v coll="$COLL" -v types="$types" -v op="$expected_op" \
      -v opsall="$([ "$ops" = all ] && [ "$REDUCES" = 1 ] && echo 1 || echo 0)" \
      -v root="$expected_root" -v allroots="$([ "$root" = -1 ] && echo 1 || echo 0)" -v n="$NRANKS" -v places="$PLACES" -v backend="$BACKEND" \
      -v signed_unsigned="$SIGNED_UNSIGNED" '
    NF == 0 { next }
    {
      why = ""
      if ($1 != coll) why = why " collective=" $1
      if (types != "all" && $2 != types) why = why " dtype=" $2 " (expected " types ")"
      if (!opsall && $3 != op) why = why " op=" $3 " (expected " op ")"
      if (allroots ? !($4 ~ /^[0-9]+$/ && $4 < n) : $4 != root) why = why " root=" $4 " (expected " (allroots ? "0.." n - 1 : root) ")"
      if ($5 != "0" && $5 != "1") why = why " in_place=" $5
      if (places == 1 && $5 != "0") why = why " in_place=" $5 " (out-of-place only)"
      if ($7 != n) why = why " ranks=" $7 " (expected " n ")"
      if ($8 != "1") why = why " checked=" $8
      if ($10 != backend) why = why " backend=" $10 " (expected " backend ")"
      library_bug = index(signed_unsigned, " " $2 " ") && ($3 == "min" || $3 == "max")
      if ($9 != "0" && !library_bug) why = why " wrong=" $9
      if ($9 != "0") wrong_rows++
      if (library_bug && $9 != "0") bug_caught[$2] = 1
      key = $2 "/" $3 "/" $4 "/" $6 "/" $5
      if (seen[key]++) why = why " duplicate row " key
      if (why != "") print "row " NR " (" $2 " " $3 " " $6 " B in_place=" $5 "):" why
    }
    END {
      # uint64 patterns stay below 2^53, which the signed comparison gets right.
      split("uint8 uint32", shown, " ")
      # (one rank reduces nothing: its own value is the answer)
      for (k in shown) if (n > 1 && index(signed_unsigned, " " shown[k] " ") && (types == "all" || types == shown[k]) && opsall && !bug_caught[shown[k]])
        print "the library bug on " shown[k] " min/max was not reported as wrong"
      print "WRONG_ROWS " wrong_rows + 0
    }')
  local wrong_rows
  wrong_rows=$(printf '%s\n' "$verdict" | awk '$1 == "WRONG_ROWS" { print $2 }')
  local bad
  bad=$(printf '%s\n' "$verdict" | grep -v '^WRONG_ROWS' || true)
  if [ -n "$bad" ]; then
    fail "$tag: bad CSV rows:"$'\n'"$bad"
    show_file stderr "$dir/stderr"
  fi
  local expected_status=0
  [ "$wrong_rows" -gt 0 ] && expected_status=1
  if [ "$status" -ne "$expected_status" ]; then
    fail "$tag: exit status $status, expected $expected_status ($wrong_rows row(s) with wrong elements; command: mpiexec -n $NRANKS ccscope ${args[*]})"
    show_file stderr "$dir/stderr"
  fi
  if [ "$wrong_rows" -gt 0 ] && ! grep -q 'ccscope: note: MPICH 4.0.x compares unsigned' "$dir/stderr"; then
    fail "$tag: wrong results from the library's unsigned min/max without the note naming the defect"
  fi
  if [ "$wrong_rows" -eq 0 ] && grep -q 'WRONG RESULT\|timeout' "$dir/stderr"; then
    fail "$tag: no wrong row but stderr reports a problem"
    show_file stderr "$dir/stderr"
  fi
}

last=$((NRANKS - 1))
if [ "$BACKEND" = gloo ]; then
  # CI's time: every type with sum and every op with float (the types are gloo's own
  # reductions, the ops one per function); data movers every type from every root.
  case $COLL in
    allreduce | reducescatter | reduce)
      check_run all sum -
      check_run float all -
      ;;
    broadcast | gather | scatter) check_run all - -1 ;;
    *) check_run all - - ;;
  esac
elif [ "$NRANKS" -le 2 ]; then
  case $COLL in
    broadcast | gather | scatter) check_run all - -1 ;;  # every root (-r -1, nccl-tests' meaning)
    reduce)  # MPI's ops per type are all-reduce's (run with -d all -o all above)
      check_run all sum "$last"
      check_run float all 0
      ;;
    allreduce | reducescatter)
      # Every type with every op up to 10952 B; at 405224 B every type with sum (past the
      # library's eager/rendezvous and algorithm switches, through ccscope's own MPI_Ops
      # for half, bfloat16 and the fp8 types) and every op with float.
      check_run all all -
      check_run all sum - largest
      check_run float all - largest
      ;;
    *) check_run all all - ;;
  esac
else
  case $COLL in
    allreduce | reducescatter)
      check_run all sum -
      check_run float all -
      check_run bfloat16 sum -
      ;;
    reduce)
      check_run all sum "$last"
      check_run float all 0
      check_run bfloat16 sum "$last"
      ;;
    broadcast | gather | scatter)
      check_run all - "$last"
      check_run float - 0
      ;;
    *)
      check_run all - -
      check_run float - -
      ;;
  esac
fi
log "$RUNS run(s) of mpiexec -n $NRANKS ccscope bench $COLL"
finish
