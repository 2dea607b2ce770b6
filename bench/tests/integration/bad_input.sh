#!/usr/bin/env bash
# Bad input through the real binary, alone (1 rank, no launcher) and under
# mpiexec -n 2: exit status 2, exactly one line on stderr (under mpiexec the
# message appears once, not once per rank) that names the bad value, and no
# crash ("terminate called", "Aborted", a stack trace).
#
# usage: bad_input.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
init_args "$@"
make_workdir
use_private_binary

# name | what the message must mention | arguments after "bench"
CASES=(
  "min>max|minbytes|allreduce -b 2K -e 1K -n 1 -w 0"
  "min=0|minbytes|allreduce -b 0 -e 1K -n 1 -w 0"
  "bad dtype|float128|allreduce -b 8 -e 8 -n 1 -w 0 -d float128"
  "bad op|xor|allreduce -b 8 -e 8 -n 1 -w 0 -o xor"
  "root out of range|root|broadcast -b 8 -e 8 -n 1 -w 0 -r 5"
  "unknown flag|--frobnicate|allreduce -b 8 -e 8 -n 1 -w 0 --frobnicate"
  "unknown collective|allfoo|allfoo -b 8 -e 8 -n 1 -w 0"
  "unwritable csv|/nonexistent/x.csv|allreduce -b 8 -e 8 -n 1 -w 0 --csv /nonexistent/x.csv"
)

i=0
for launcher in none mpiexec; do
  for case in "${CASES[@]}"; do
    name=${case%%|*}
    rest=${case#*|}
    mention=${rest%%|*}
    args=${rest#*|}
    i=$((i + 1))
    out="$WORK/$i.stdout" err="$WORK/$i.stderr"
    if [ "$launcher" = none ]; then
      cmd=("$CCSCOPE" bench $args --timeout 30 --no-progress)
      tag="$name (1 rank, no mpiexec): ccscope bench $args"
    else
      cmd=("$MPIEXEC" -n 2 "$CCSCOPE" bench $args --timeout 30 --no-progress)
      tag="$name (mpiexec -n 2): ccscope bench $args"
    fi
    status=0
    timeout -k 5 60 "${cmd[@]}" >"$out" 2>"$err" </dev/null || status=$?
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      fail "$tag: still running after 60 s (hang)"
      continue
    fi
    assert_eq 2 "$status" "$tag: exit status"
    lines=$(grep -c '' "$err" || true)
    if [ "$lines" != 1 ]; then
      fail "$tag: expected exactly one line on stderr, got $lines"
      show_file stderr "$err"
    elif ! grep -qF -- "$mention" "$err"; then
      fail "$tag: the error line does not mention '$mention': $(cat "$err")"
    fi
    assert_no_crash_text "$err" "$tag"
  done
done
log "$i bad-input runs"
finish
