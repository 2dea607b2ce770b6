#!/usr/bin/env bash
# Records: the CSV header starts with the documented columns; CSV and JSON agree
# after a complete run ("complete": true); --yielding-waits is in the records'
# backend_resources; and a run killed with SIGKILL in the
# middle of its sweep keeps every finished row in the CSV (whole rows, in sweep
# order) and leaves a valid JSON document with "complete": false.
#
# usage: records.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary
JOB=
on_exit 'kill_leftovers "$WORK/killed" "$JOB"'

DOCUMENTED_PREFIX="schema,collective,backend,dtype,op,root,in_place,size_bytes,count,ranks"
ALSO_DOCUMENTED="time_s time_statistic algbw_GBps busbw_GBps checked wrong"

# json_summary FILE : prints "complete=<true|false> records=<n> sizes=<s1,s2,...>"
# or fails (status 1) with the reader's message when FILE is not a ccscope JSON
# document ("complete" is the document's, repeated on each record read).
json_summary() {
  local rows
  rows=$(read_records "$1" --fields complete,size_bytes,in_place 2>&1) || { printf '%s\n' "$rows"; return 1; }
  printf '%s\n' "$rows" | awk -F'\t' '
    NF { n++; sizes = sizes (n > 1 ? "," : "") $2 "/" $3; complete = $1 }
    END {
      printf "complete=%s records=%d sizes=%s\n",
             (n == 0 ? "unknown" : complete == "1" ? "true" : complete == "0" ? "false" : complete), n, sizes
    }'
}

# --- 1. A complete run --------------------------------------------------------
dir="$WORK/complete"
mkdir -p "$dir"
status=0
"$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 8 -e 64 -f 2 -n 1 -w 0 --timeout 60 --no-progress \
  --csv "$dir/out.csv" --json "$dir/out.json" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
assert_eq 0 "$status" "complete run: exit status"
columns=$(csv_header "$dir/out.csv" 2>&1)
prefix=$(printf '%s\n' "$columns" | head -n 10 | paste -sd, -)
assert_eq "$DOCUMENTED_PREFIX" "$prefix" "CSV header: first 10 column names"
for column in $ALSO_DOCUMENTED; do
  printf '%s\n' "$columns" | grep -qx "$column" || fail "CSV header has no column '$column'"
done
if rows=$(csv_select "$dir/out.csv" schema size_bytes in_place checked wrong); then
  nrows=$(printf '%s' "$rows" | grep -c '^' || true)
  assert_eq 8 "$nrows" "complete run: CSV rows (4 sizes x 2)"
  bad=$(printf '%s\n' "$rows" | awk -F'\t' 'NF && !($1 ~ /^ccscope\.bench\/[0-9]+$/ && $4 == "1" && $5 == "0")')
  [ -z "$bad" ] || fail "complete run: unexpected rows: $bad"
  csv_sizes=$(printf '%s\n' "$rows" | awk -F'\t' 'NF { printf "%s%s/%s", (n++ ? "," : ""), $2, $3 }')
else
  fail "complete run: unreadable CSV"
  csv_sizes=
fi
# Text fields hold text: no NUL or other control byte (Open MPI's library version
# string once brought its terminating NUL along), except the quoted line breaks.
for file in out.csv out.json stdout; do
  controls=$(LC_ALL=C tr -d '\n\r\t' <"$dir/$file" | LC_ALL=C tr -d '\040-\377' | wc -c)
  assert_eq 0 "$controls" "complete run: control bytes in $file"
done
if summary=$(json_summary "$dir/out.json"); then
  assert_eq "complete=true records=8 sizes=$csv_sizes" "$summary" "complete run: JSON document"
else
  fail "complete run: $summary"
fi

# --- 1b. --yielding-waits: the records say how the ranks waited -------------------
dir="$WORK/yielding"
mkdir -p "$dir"
status=0
"$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi --yielding-waits -b 8 -e 64 -f 2 -n 1 -w 0 \
  --timeout 60 --no-progress --csv "$dir/out.csv" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
assert_eq 0 "$status" "--yielding-waits run: exit status"
waits=$(read_records "$dir/out.csv" --fields backend_resources 2>&1 | sort -u | paste -sd' ' -)
assert_eq "waits=yielding" "$waits" "--yielding-waits run: backend_resources"
plain=$(read_records "$WORK/complete/out.csv" --fields backend_resources 2>&1 | sort -u | paste -sd' ' -)
assert_eq "" "$plain" "default run: backend_resources"

# --- 1c. The default: ranks that outnumber their CPUs yield (job::wait_policy) -------
# Two ranks bound to one CPU (taskset: MPICH's mpiexec keeps the mask; Open MPI's binds a
# rank to a core of its own, which is no oversubscription, unless --bind-to none) are
# oversubscribed; CCSCOPE_YIELD_WHEN_IDLE=0 makes them spin, and a value other than 0 or 1
# is refused.
keep_mask=()
"$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE" && keep_mask=(--bind-to none)
if command -v taskset >/dev/null; then
  for policy in auto 0 bad; do
    env=()
    [ "$policy" = auto ] || env=(CCSCOPE_YIELD_WHEN_IDLE="$policy")
    status=0
    env "${env[@]}" taskset -c 0 "$MPIEXEC" "${keep_mask[@]}" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 8 -e 64 \
      -f 2 -n 1 -w 0 --timeout 60 --no-progress --csv "$dir/$policy.csv" >"$dir/$policy.out" \
      2>"$dir/$policy.err" </dev/null || status=$?
    if [ "$policy" = bad ]; then
      assert_eq 2 "$status" "CCSCOPE_YIELD_WHEN_IDLE=bad: exit status"
      assert_eq "ccscope bench: error: CCSCOPE_YIELD_WHEN_IDLE='bad': give 1 (waits yield the core) or 0 (they spin)" \
        "$(cat "$dir/$policy.err")" "CCSCOPE_YIELD_WHEN_IDLE=bad: one line"
      continue
    fi
    assert_eq 0 "$status" "2 ranks on 1 CPU ($policy): exit status"
    waits=$(read_records "$dir/$policy.csv" --fields backend_resources 2>&1 | sort -u | paste -sd' ' -)
    expected=waits=yielding
    [ "$policy" = 0 ] && expected=""
    assert_eq "$expected" "$waits" "2 ranks on 1 CPU ($policy): backend_resources"
  done
else
  log "no taskset: the default wait policy is not checked here"
fi

# --- 2. A run killed in the middle of its sweep -----------------------------------
dir="$WORK/killed"
mkdir -p "$dir"
# -b 8 -e 64M -f 2: 24 sizes x 2 = 48 rows; the large ones take long at -n 200.
TOTAL_ROWS=48
setsid "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 8 -e 64M -f 2 -n 200 -w 1 --timeout 60 --no-progress \
  --csv "$dir/out.csv" --json "$dir/out.json" >"$dir/stdout" 2>"$dir/stderr" </dev/null &
JOB=$!
deadline=$(($(date +%s) + 60))
rows_seen=0
while :; do
  # Whole records only (a field may hold a new line); none while a row is half written.
  if [ -f "$dir/out.csv" ]; then
    rows_seen=$(csv_select "$dir/out.csv" size_bytes 2>/dev/null | grep -c '')
    [ "$rows_seen" -ge 3 ] && break
  fi
  if ! kill -0 "$JOB" 2>/dev/null; then
    show_file stderr "$dir/stderr"
    die "the run ended before it wrote 3 CSV rows"
  fi
  [ "$(date +%s)" -ge "$deadline" ] && die "no 3 CSV rows within 60 s (saw $rows_seen)"
  sleep 0.05
done
log "the CSV has $rows_seen data row(s): SIGKILL to the whole job (process group $JOB)"
kill -KILL -- "-$JOB"
wait "$JOB" 2>/dev/null
JOB_STATUS=$?
assert_ne 0 "$JOB_STATUS" "exit status of the killed job"
assert_no_leftovers "$dir/out.csv" 10

if rows=$(csv_select "$dir/out.csv" size_bytes in_place checked wrong); then
  nrows=$(printf '%s' "$rows" | grep -c '^' || true)
  [ "$nrows" -ge 3 ] || fail "killed run: the CSV lost finished rows: $nrows left, $rows_seen seen before the kill"
  [ "$nrows" -lt "$TOTAL_ROWS" ] || fail "killed run: the sweep finished before the kill ($nrows rows); the test proved nothing"
  # Row i (from 0) is size 8 x 2^(i/2), out-of-place then in-place; all checked and right.
  bad=$(printf '%s\n' "$rows" | awk -F'\t' 'NF {
      want = 8 * 2 ^ int(i / 2); place = i % 2; i++
      if ($1 != want || $2 != place || $3 != "1" || $4 != "0")
        print "row " i ": size_bytes=" $1 " in_place=" $2 " checked=" $3 " wrong=" $4 " (expected size " want " in_place " place ")"
    }')
  [ -z "$bad" ] || fail "killed run: unexpected CSV rows:"$'\n'"$bad"
  csv_sizes=$(printf '%s\n' "$rows" | awk -F'\t' 'NF { printf "%s%s/%s", (n++ ? "," : ""), $1, $2 }')
  [ -z "$(tail -c 1 "$dir/out.csv")" ] || fail "killed run: the CSV ends in the middle of a row"
else
  fail "killed run: the CSV is not readable after the kill"
  show_file csv "$dir/out.csv"
  nrows=0 csv_sizes=
fi

if summary=$(json_summary "$dir/out.json"); then
  log "killed run: JSON $summary"
  case $summary in
    "complete=false "*) ;;
    *) fail "killed run: the JSON document does not say \"complete\": false: $summary" ;;
  esac
  jrecords=$(printf '%s' "$summary" | sed -n 's/.* records=\([0-9]*\) .*/\1/p')
  jsizes=${summary##* sizes=}
  # The JSON is rewritten after each record: at most the record in flight is missing.
  if [ -z "$jrecords" ] || [ "$jrecords" -lt $((nrows - 1)) ] || [ "$jrecords" -gt $((nrows + 1)) ]; then
    fail "killed run: JSON has ${jrecords:-?} records, the CSV $nrows"
  fi
  case ",$csv_sizes," in ",$jsizes,"*) ;; *)
    case ",$jsizes," in ",$csv_sizes,"*) ;; *) fail "killed run: JSON records ($jsizes) are not the CSV rows ($csv_sizes)" ;; esac ;;
  esac
else
  fail "killed run: $summary"
fi
finish
