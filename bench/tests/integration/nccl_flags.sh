#!/usr/bin/env bash
# nccl-tests' flags through the real binary: -d all / -o all sweep every type
# and op (data movement once per type), -r -1 every root, -N K repeats the
# sweep and -N 0 repeats it until stopped, -T 0 runs with one warning, -J
# writes the JSON, and flags ccscope cannot honour (-G with the mpi backend,
# -t/-g > 1) are refused with one line and exit 2, also under mpiexec -n 2;
# NCCL_TESTS_MIN_BW fails a slow run, NCCL_TESTS_SPLIT splits the world.
#
# usage: nccl_flags.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

common=(-b 8 -e 8 -n 1 -w 0 --no-progress --timeout 60)
data_rows() { grep -cv '^#' "$1" || true; }

# run NAME EXPECTED_STATUS COMMAND... : stdout in $WORK/NAME.out, stderr in .err
run() {
  local name=$1 expected=$2 status=0
  shift 2
  timeout -k 5 90 "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" </dev/null || status=$?
  if [ "$status" != "$expected" ]; then
    fail "$name: exit status $status, expected $expected ($*)"
    show_file stderr "$WORK/$name.err"
    return 1
  fi
}

# -d all -o all: 12 types x 6 ops for allreduce, 12 types for allgather.
if run all_all 0 "$CCSCOPE" bench allreduce,allgather -d all -o all "${common[@]}"; then
  assert_eq 72 "$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +(sum|prod|max|min|avg|mulsum) ' "$WORK/all_all.out")" \
    "-d all -o all: allreduce rows"
  assert_eq 12 "$(grep -cE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +none ' "$WORK/all_all.out")" \
    "-d all -o all: allgather rows (once per type)"
  for type in int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2; do
    assert_eq 7 "$(grep -cE "^ +[0-9]+ +[0-9]+ +$type " "$WORK/all_all.out")" "-d all: rows of $type"
  done
  grep -qE '^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +[a-z]+ +-?[0-9]+ .* [1-9][0-9]* *$' "$WORK/all_all.out" &&
    fail "-d all -o all: a row has wrong elements"
fi

# -N 3: the sweep three times.
run repeat3 0 "$CCSCOPE" bench allreduce -N 3 "${common[@]}" &&
  assert_eq 3 "$(data_rows "$WORK/repeat3.out")" "-N 3: rows"

# -r -1 with 3 ranks: broadcast from roots 0, 1, 2.
if run roots 0 "$MPIEXEC" -n 3 "$CCSCOPE" bench broadcast -r -1 "${common[@]}"; then
  assert_eq "0 1 2" "$(grep -v '^#' "$WORK/roots.out" | awk '{print $5}' | tr '\n' ' ' | sed 's/ $//')" \
    "-r -1: roots"
fi

# -T 0: no timeout, one warning line.
if run timeout0 0 "$CCSCOPE" bench allreduce "${common[@]}" -T 0; then
  assert_eq 1 "$(grep -c 'warning: .*no timeout' "$WORK/timeout0.err")" "-T 0: warning lines"
  assert_eq 1 "$(data_rows "$WORK/timeout0.out")" "-T 0: rows"
fi

# -J FILE.json: the JSON document.
run json 0 "$CCSCOPE" bench allreduce "${common[@]}" -J "$WORK/out.json" &&
  { [ "$(read_records "$WORK/out.json" --fields complete 2>/dev/null | sort -u)" = 1 ] ||
      fail "-J: $WORK/out.json is not a complete JSON document"; }

# -N 0: until stopped; SIGTERM ends it after its records, exit 128 + 15.
"$CCSCOPE" bench allreduce -N 0 "${common[@]}" >"$WORK/forever.out" 2>"$WORK/forever.err" </dev/null &
pid=$!
deadline=$(($(date +%s) + 30))
while [ "$(data_rows "$WORK/forever.out")" -lt 5 ] && [ "$(date +%s)" -lt "$deadline" ] &&
  kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
rows=$(data_rows "$WORK/forever.out")
[ "$rows" -ge 5 ] || fail "-N 0: only $rows row(s) after 30 s (expected repeated sweeps)"
kill -TERM "$pid" 2>/dev/null
status=0
wait "$pid" || status=$?
assert_eq 143 "$status" "-N 0 then SIGTERM: exit status"
grep -q 'stopped by SIGTERM' "$WORK/forever.err" || { fail "-N 0: no 'stopped by SIGTERM' line"; show_file stderr "$WORK/forever.err"; }

# NCCL_TESTS_MIN_BW: an average busbw below 90% of it fails the run (exit 1) with
# nccl-tests' footer; at or above it the footer says OK. nccl-tests' closing line ends both.
if run minbw 1 env NCCL_TESTS_MIN_BW=1000 "$CCSCOPE" bench allreduce "${common[@]}"; then
  grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$' "$WORK/minbw.out" ||
    fail "NCCL_TESTS_MIN_BW=1000: no FAILED footer: $(grep 'Avg bus' "$WORK/minbw.out")"
  grep -q 'below 90% of NCCL_TESTS_MIN_BW=1000' "$WORK/minbw.err" ||
    fail "NCCL_TESTS_MIN_BW=1000: no line on stderr: $(cat "$WORK/minbw.err")"
  grep -qx '# Collective test concluded: all_reduce_perf' "$WORK/minbw.out" ||
    fail "no '# Collective test concluded' line"
fi
run minbw_ok 0 env NCCL_TESTS_MIN_BW=0 "$CCSCOPE" bench allreduce "${common[@]}" &&
  { grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+ OK$' "$WORK/minbw_ok.out" ||
      fail "NCCL_TESTS_MIN_BW=0: no OK footer"; }

# NCCL_TESTS_SPLIT=MOD2 at 2 ranks: two groups of one rank, each its own all-reduce.
if run split 0 env NCCL_TESTS_SPLIT=MOD2 "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce "${common[@]}" \
  --backend mpi --csv "$WORK/split.csv"; then
  assert_eq 1 "$(read_records "$WORK/split.csv" --fields ranks | sort -u)" "NCCL_TESTS_SPLIT=MOD2: ranks"
fi

# Refusals: one line, exit 2, once under mpiexec -n 2.
for launcher in none mpiexec; do
  for case in "G|-G/--cudagraph|allreduce -G 1 --backend mpi" "Gdefault|-G/--cudagraph|allreduce -G 2" \
    "t|-t/--nthreads|allreduce -t 0" "g|-g/--ngpus|allreduce -g 2000" "R|-R/--local_register|allreduce -R 1" \
    "z|-z/--blocking|allreduce -z 3" "y|-y/--stream_null|allreduce -y 1"; do
    name=${case%%|*}; rest=${case#*|}; mention=${rest%%|*}; args=${rest#*|}
    if [ "$launcher" = none ]; then
      cmd=("$CCSCOPE" bench $args "${common[@]}")
    else
      cmd=("$MPIEXEC" -n 2 "$CCSCOPE" bench $args "${common[@]}")
    fi
    run "refuse-$name-$launcher" 2 "${cmd[@]}" || continue
    err="$WORK/refuse-$name-$launcher.err"
    assert_eq 1 "$(grep -c '' "$err")" "$args ($launcher): lines on stderr"
    grep -qF -- "$mention" "$err" || fail "$args ($launcher): the line does not name $mention: $(cat "$err")"
    assert_no_crash_text "$err" "$args ($launcher)"
  done
done
finish
