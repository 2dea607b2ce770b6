#!/usr/bin/env bash
# The outside audit's cases (issue 7), through the real binary: outputs never
# replace what the user did not ask to write, no uncaught exception, bad values
# inside files and flags refused with one line, untrusted text escaped in
# reports. Every case: the exit status, exactly one stderr line naming the
# problem (for refusals), no crash text, and what must hold on disk afterwards.
# Prints the audit table: cases, deviations, aborts.
#
# usage: hardening.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/lib.sh"
DATA_DIR=$(cd "$(dirname "$0")/../../../reports/tests/data" && pwd)
init_args "$@"
make_workdir
use_private_binary
cd "$WORK" || die "cannot enter $WORK"

CASES=0 DEVIATIONS=0 ABORTS=0
# check NAME EXIT MENTION -- COMMAND... : runs COMMAND (stdin closed, 60 s at
# most); EXIT is the expected status; MENTION ("" = none) must appear in the
# only stderr line when EXIT is not 0.
check() {
  local name=$1 expected=$2 mention=$3 status=0 lines before=$FAILURES
  shift 4
  CASES=$((CASES + 1))
  timeout -k 5 60 "$@" >"$WORK/case.out" 2>"$WORK/case.err" </dev/null || status=$?
  if [ "$status" = 124 ] || [ "$status" -ge 126 ]; then  # 125 is compare's "cannot judge"
    ABORTS=$((ABORTS + 1))
    fail "$name: exit $status (hang, abort or crash)"
    show_file stderr "$WORK/case.err"
  fi
  assert_eq "$expected" "$status" "$name: exit status"
  if [ "$expected" != 0 ]; then
    lines=$(grep -c '' "$WORK/case.err" || true)
    [ "$lines" = 1 ] || { fail "$name: $lines stderr lines, expected 1"; show_file stderr "$WORK/case.err"; }
    [ -z "$mention" ] || grep -qF -- "$mention" "$WORK/case.err" ||
      fail "$name: the message does not mention '$mention': $(head -c 300 "$WORK/case.err")"
  fi
  if grep -Eq 'terminate called|Aborted|Segmentation fault|core dumped|what\(\):|runtime error:' "$WORK/case.err"; then
    ABORTS=$((ABORTS + 1))
    fail "$name: stderr shows a crash"
  fi
  [ "$FAILURES" = "$before" ] || DEVIATIONS=$((DEVIATIONS + 1))
}
BENCH=("$CCSCOPE" bench allreduce --backend mpi -b 8 -e 64 -f 2 -n 2 -w 0 --no-progress)

mkdir in out
"${BENCH[@]}" --csv in/run.csv --json in/run.json >/dev/null 2>&1 || die "cannot make the input files"
cp in/run.csv in/run2.csv

# ---- 1. outputs: devices, FIFOs, links, directories, the same file twice
mknod out/full c 1 7 && mknod out/null c 1 3 || die "mknod failed (root needed)"
check "--json on a full device" 1 "" -- "${BENCH[@]}" --json out/full
[ -c out/full ] || fail "--json out/full: the character device was replaced"
check "--json on a null device" 0 "" -- "${BENCH[@]}" --json out/null
[ -c out/null ] || fail "--json out/null: the character device was replaced"
check "--csv and --json on one null device" 0 "" -- "${BENCH[@]}" --csv out/null --json out/null
[ -c out/null ] || fail "--csv out/null: the character device was replaced"
check "--json to /dev/stdout (a pipe)" 0 "" -- sh -c "\"$CCSCOPE\" bench allreduce --backend mpi -b 8 -e 8 -n 1 -w 0 --no-progress --json /dev/stdout | cat >/dev/null"
echo keep >out/target.json && ln -s target.json out/link.json
check "--json through a symbolic link" 0 "" -- "${BENCH[@]}" --json out/link.json
[ -L out/link.json ] || fail "--json out/link.json: the link was replaced by a file"
[ "$(read_records out/target.json --fields complete 2>/dev/null | sort -u)" = 1 ] ||
  fail "--json out/link.json: the link's target was not written"
ln -s new.json out/dangling.json
check "--json through a dangling link" 0 "" -- "${BENCH[@]}" --json out/dangling.json
[ -L out/dangling.json ] && [ -f out/new.json ] || fail "--json out/dangling.json: not written through the link"
echo mine >out/r.json.tmp
check "--json beside the user's FILE.tmp" 0 "" -- "${BENCH[@]}" --json out/r.json
[ "$(cat out/r.json.tmp)" = mine ] || fail "--json out/r.json: the user's r.json.tmp was overwritten"
mkdir out/dir
check "--json on a directory" 2 "is a directory" -- "${BENCH[@]}" --json out/dir
check "--csv on a directory" 2 "is a directory" -- "${BENCH[@]}" --csv out/dir
[ -d out/dir ] && [ -z "$(ls -A out/dir)" ] || fail "--json out/dir: the directory changed"
[ -z "$(ls -A out | grep -E 'tmp$' | grep -v '^r.json.tmp$')" ] || fail "a temporary file was left in out/: $(ls -A out)"
check "--csv and --json the same file" 2 "name the same file" -- "${BENCH[@]}" --csv out/same --json out/same
[ ! -e out/same ] || fail "--csv X --json X: X was written"
check "--json and --csv via a link to each other" 2 "name the same file" -- "${BENCH[@]}" --csv out/target.json --json out/link.json
mkfifo out/fifo
check "--json on a FIFO nobody reads" 2 "FIFO" -- "${BENCH[@]}" --json out/fifo
check "--json in a missing directory" 2 "No such file or directory" -- "${BENCH[@]}" --json out/missing/x.json
cp in/run.csv out/report-in.csv
check "report FILE -o FILE" 2 "same file" -- "$CCSCOPE" report out/report-in.csv -o out/report-in.csv
cmp -s in/run.csv out/report-in.csv || fail "report FILE -o FILE: the input was changed"
check "report -o a directory" 2 "is a directory" -- "$CCSCOPE" report in/run.csv -o out/dir
check "report -o a null device" 0 "" -- "$CCSCOPE" report in/run.csv -o out/null
[ -c out/null ] || fail "report -o out/null: the device was replaced"
check "report --markdown -o a full device" 1 "No space left on device" -- "$CCSCOPE" report --markdown in/run.csv -o out/full
[ -c out/full ] || fail "report -o out/full: the device was replaced"

# ---- 2. no uncaught exception (filesystem errors, a directory as a file, memory)
# (compare: input it cannot read is 125, cannot judge, for git bisect run; 2 is for bad flags.)
ln -s loop1 out/loop2 && ln -s loop2 out/loop1
check "baseline save --dir a symlink loop" 2 "symbolic links" -- "$CCSCOPE" baseline save b1 in/run.csv --dir out/loop1
long=$(printf 'd%.0s' $(seq 1 5000))
check "baseline save --dir a 5000-character path" 2 "too long" -- "$CCSCOPE" baseline save b1 in/run.csv --dir "out/$long"
mkdir -p bl && "$CCSCOPE" baseline save good in/run.csv --dir bl >/dev/null 2>&1 || fail "baseline save good failed"
ln -s self bl/self
check "baseline list beside a self-referencing link" 0 "" -- "$CCSCOPE" baseline list --dir bl
grep -q '^good ' "$WORK/case.out" || fail "baseline list: 'good' not listed"
mkdir -p bl/broken/baseline.json
check "compare --baseline whose baseline.json is a directory" 125 "is a directory" -- "$CCSCOPE" compare --baseline broken in/run.csv --dir bl
check "compare /dev/zero" 125 "NUL byte" -- "$CCSCOPE" compare /dev/zero in/run.csv
# (Not under AddressSanitizer: it cannot reserve its shadow memory under ulimit -v.)
if ldd "$CCSCOPE" 2>/dev/null | grep -q libasan; then
  log "skipped under ASan: compare an endless text stream under a 700 MB limit"
else
  check "compare an endless text stream under a 700 MB limit" 125 "" -- bash -c "ulimit -v 700000; exec \"$CCSCOPE\" compare <(yes 'schema,collective') in/run.csv"
fi
check "compare a directory" 125 "is a directory" -- "$CCSCOPE" compare out/dir in/run.csv

# ---- 4. bad values inside files and flags
python3 - in/run.csv out/ranks.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
rows[1][rows[0].index("ranks")] = "99999999999"
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(rows)
PY
check "CSV with ranks=99999999999" 125 "ranks.csv:2: ranks 99999999999 is out of range" -- "$CCSCOPE" compare out/ranks.csv in/run.csv
cp "$DATA_DIR/all_reduce_perf-h200-1rank.txt" out/nccl.txt
printf 'x\0y\n' >>out/nccl.txt
check "nccl-tests text with a NUL byte" 125 "NUL byte" -- "$CCSCOPE" compare out/nccl.txt in/run.csv
check "bench -f 2^70" 2 "-f/--stepfactor 1180591620717411303424 is out of range" -- "$CCSCOPE" bench allreduce -f 1180591620717411303424
check "compare --threshold nan" 2 "--threshold" -- "$CCSCOPE" compare in/run.csv in/run2.csv --threshold nan
check "compare --threshold -5" 2 "--threshold" -- "$CCSCOPE" compare in/run.csv in/run2.csv --threshold -5
check "compare --sizes -1:5" 2 "--sizes" -- "$CCSCOPE" compare in/run.csv in/run2.csv --sizes -1:5
check "compare --sizes 99999999999999999999K:" 2 "--sizes" -- "$CCSCOPE" compare in/run.csv in/run2.csv --sizes 99999999999999999999K:
check "bench -b 1T under mpiexec -n 2" 2 "use a smaller -e" -- "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend mpi -b 1T -e 1T --no-progress --csv out/1t.csv
[ ! -e out/1t.csv ] || fail "-b 1T: a CSV was left behind"
check "bench -b 1T, ring backend, under mpiexec -n 2" 2 "or less" -- "$MPIEXEC" -n 2 "$CCSCOPE" bench allreduce --backend ring -b 1T -e 1T --no-progress
check "a file name with a new line" 125 "'in/no\\nsuch.csv'" -- "$CCSCOPE" compare $'in/no\nsuch.csv' in/run.csv
check "a baseline name with a new line" 2 "'a\\nb'" -- "$CCSCOPE" baseline save $'a\nb' in/run.csv --dir bl
longname=$(printf 'n%.0s' $(seq 1 300))
check "a 300-character baseline name" 2 "at most" -- "$CCSCOPE" baseline save "$longname" in/run.csv --dir out/newbl
[ ! -e out/newbl ] || fail "a too-long baseline name left $(find out/newbl | head -3 | tr '\n' ' ')"

# ---- 5 and 6. sizes near 2^63; untrusted text in reports
python3 - in/run.csv out/huge.csv out/bidi.csv <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
for r in rows[1:]:
    r[h.index("size_bytes")] = "9223372036854775807"
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(rows)
rows = list(csv.reader(open(sys.argv[1], newline="")))
for r in rows[1:]:
    r[h.index("hosts")] = "node\u202egnp.exe"
    r[h.index("collective")] = 'all reduce"<b>'
csv.writer(open(sys.argv[3], "w", newline="", encoding="utf-8"), lineterminator="\n").writerows(rows)
PY
check "report of sizes near 2^63" 0 "" -- "$CCSCOPE" report out/huge.csv -o out/huge.html
check "report of a hostname with U+202E" 0 "" -- "$CCSCOPE" report out/bidi.csv -o out/bidi.html
grep -q $'\u202e' out/bidi.html && fail "HTML report: a raw U+202E passed through"
grep -q 'node\\u202egnp.exe' out/bidi.html || fail "HTML report: U+202E not shown as \\u202e"
grep -Eo 'id="[^"]*"' out/bidi.html | grep -vE '^id="[a-z0-9_-]+"$' && fail "HTML report: an id outside [a-z0-9_-]"
check "markdown of a hostname with U+202E" 0 "" -- "$CCSCOPE" report --markdown out/bidi.csv -o out/bidi.md
grep -q $'\u202e' out/bidi.md && fail "markdown report: a raw U+202E passed through"
grep -q 'u202e' out/bidi.md || fail "markdown report: U+202E not shown"

log "audit: $CASES cases, $DEVIATIONS deviations, $ABORTS aborts"
finish
