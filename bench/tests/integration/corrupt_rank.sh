#!/usr/bin/env bash
# --test-corrupt-rank 1 with 2 ranks must turn a correct run into a failed one:
# exit status 1, "WRONG RESULT" on stderr naming rank 1 (once per bad measurement,
# printed by rank 0 only), and wrong >= 1 in every CSV row.
#
# usage: corrupt_rank.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

for coll in allreduce allgather; do
  dir="$WORK/$coll"
  mkdir -p "$dir"
  status=0
  "$MPIEXEC" -n 2 "$CCSCOPE" bench "$coll" --backend mpi -b 1000 -e 1000 -n 2 -w 1 --timeout 60 --no-progress \
    --test-corrupt-rank 1 --csv "$dir/out.csv" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
  assert_eq 1 "$status" "$coll --test-corrupt-rank 1: exit status"

  # One measurement out-of-place and one in-place: one WRONG RESULT line each.
  wrong_lines=$(grep -c 'ccscope: WRONG RESULT in ' "$dir/stderr" || true)
  assert_eq 2 "$wrong_lines" "$coll --test-corrupt-rank 1: 'WRONG RESULT' lines on stderr (out-of-place + in-place, rank 0 only)"
  naming=$(grep 'ccscope: WRONG RESULT in ' "$dir/stderr" | grep -c ': rank 1 element ' || true)
  assert_eq "$wrong_lines" "$naming" "$coll --test-corrupt-rank 1: WRONG RESULT lines naming rank 1"
  grep -q 'ccscope: WRONG RESULT in ' "$dir/stderr" || show_file stderr "$dir/stderr"
  assert_no_crash_text "$dir/stderr" "$coll --test-corrupt-rank 1"

  if rows=$(csv_select "$dir/out.csv" in_place checked wrong); then
    nrows=$(printf '%s' "$rows" | grep -c '^' || true)
    assert_eq 2 "$nrows" "$coll --test-corrupt-rank 1: CSV data rows"
    bad=$(printf '%s\n' "$rows" | awk -F'\t' 'NF && !($2 == "1" && $3 ~ /^[0-9]+$/ && $3 >= 1) { print "in_place=" $1 " checked=" $2 " wrong=" $3 }')
    [ -z "$bad" ] || fail "$coll --test-corrupt-rank 1: CSV rows not marked wrong: $bad"
  else
    fail "$coll --test-corrupt-rank 1: unreadable CSV"
  fi
done

# A stale output (the check reads what the previous run left, as a backend
# that skipped the operation would) and a block shifted by one element on
# rank 1 must fail too, with -c 2 (two checks on inputs of their own seeds).
for fault in "--test-stale-output" "--test-shift-block 1"; do
  for coll in allreduce allgather alltoall; do
    tag="$coll $fault"
    dir="$WORK/$coll-${fault//[^a-z0-9]/_}"
    mkdir -p "$dir"
    status=0
    # shellcheck disable=SC2086  # $fault is a flag and maybe its value
    "$MPIEXEC" -n 2 "$CCSCOPE" bench "$coll" --backend mpi -b 4096 -e 4096 -n 2 -w 1 -c 2 --timeout 60 \
      --no-progress $fault --csv "$dir/out.csv" >"$dir/stdout" 2>"$dir/stderr" </dev/null || status=$?
    assert_eq 1 "$status" "$tag: exit status"
    assert_no_crash_text "$dir/stderr" "$tag"
    if rows=$(csv_select "$dir/out.csv" in_place wrong); then
      # Out of place the stale output is the 0xff fill or an earlier result; in
      # place at 2 ranks an all-reduce's stale buffer holds this check's inputs,
      # which are not the sum either.
      bad=$(printf '%s\n' "$rows" | awk -F'\t' 'NF && !($2 ~ /^[0-9]+$/ && $2 >= 1) { print "in_place=" $1 " wrong=" $2 }')
      [ -z "$bad" ] || fail "$tag: CSV rows not marked wrong: $bad"
    else
      fail "$tag: unreadable CSV"
      show_file stderr "$dir/stderr"
    fi
  done
done
finish
