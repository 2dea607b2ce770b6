#!/usr/bin/env bash
# ci/read-records, the one reader of ccscope's records in the test and benchmark
# scripts: quoted CSV fields come back exactly, --where filters, JSON reads like the
# CSV, and every refusal is exit 2 with one line. With CCSCOPE given, also a real
# run's CSV and JSON (one rank, no launcher) must read the same.
#
# usage: read_records_test.sh [CCSCOPE]
set -u
READ_RECORDS="$(cd "$(dirname "$0")/.." && pwd)/read-records"
CCSCOPE=${1:-}
failures=0
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  failures=$((failures + 1))
}
expect() {  # expected actual what
  [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}
rr() { python3 "$READ_RECORDS" "$@"; }
# refused WHAT TEXT ARGS... : exit 2 and one stderr line that contains TEXT.
refused() {
  local what=$1 text=$2 status=0
  shift 2
  rr "$@" >"$work/out" 2>"$work/err" || status=$?
  expect 2 "$status" "$what: exit status"
  expect 1 "$(grep -c '' "$work/err")" "$what: stderr lines"
  grep -qF -- "$text" "$work/err" || fail "$what: stderr lacks '$text': $(cat "$work/err")"
  [ -s "$work/out" ] && fail "$what: printed records: $(cat "$work/out")"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/read-records-test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
command -v python3 >/dev/null || { echo "FAIL: python3 is missing (bash ci/install-deps)" >&2; exit 1; }

# A field with a comma, a doubled quote, a new line, a tab and a backslash; CRLF
# between records as RFC 4180 writes them (the new line inside the field stays LF).
hostile=$'a,b "q"\nline2\tx\\y'
{
  printf 'schema,collective,in_place,size_bytes,command_line\r\n'
  printf 'ccscope.bench/1,allreduce,0,8,"a,b ""q""\nline2\tx\\y"\r\n'
  printf 'ccscope.bench/1,allreduce,1,8,plain\r\n'
  printf 'ccscope.bench/1,allgather,0,16,"x,y"\r\n'
} >"$work/run.csv"

got=$(rr "$work/run.csv" --fields command_line,size_bytes --where in_place=0 --where collective=allreduce)
expect 'a,b "q"\nline2\tx\\y	8' "$got" "quoted field, escaped"
expect "$hostile" "$(printf '%b' "${got%	8}")" "quoted field, unescaped"
expect $'8\t0\n8\t1\n16\t0' "$(rr "$work/run.csv" --fields size_bytes,in_place)" "every record, in order"
expect $'16' "$(rr "$work/run.csv" --fields size_bytes --where collective=allgather)" "--where"
expect '' "$(rr "$work/run.csv" --fields size_bytes --where collective=broadcast)" "--where that matches nothing"
expect $'collective\tin_place\nallgather\t0' \
  "$(rr "$work/run.csv" --fields collective,in_place --header --where size_bytes=16)" "--header"
expect 'schema collective in_place size_bytes command_line' "$(rr "$work/run.csv" --columns | tr '\n' ' ' | sed 's/ $//')" "--columns"

refused "unknown column" "no column 'sizes'" "$work/run.csv" --fields size_bytes,sizes
refused "unknown --where column" "no column 'coll'" "$work/run.csv" --fields size_bytes --where coll=allreduce
refused "missing file" "no file" "$work/none.csv" --fields size_bytes
printf 'a,b\n1,2\n' >"$work/other.csv"
refused "CSV without schema" "not a ccscope CSV" "$work/other.csv" --fields a
printf 'schema,size_bytes\nccscope.bench/1,8,9\n' >"$work/wide.csv"
refused "a record with a field too many" "has 3 fields, the header 2" "$work/wide.csv" --fields size_bytes
printf 'schema,size_bytes\nccscope.bench/1,"8\n' >"$work/open.csv"
refused "an unterminated quote" "not valid CSV" "$work/open.csv" --fields size_bytes
printf '{"schema": "ccscope.bench/1", "records": [' >"$work/cut.json"
refused "cut JSON" "not valid JSON" "$work/cut.json" --fields size_bytes

# JSON: record first, then metadata, then the document; true/false as 1/0, lists as a;b.
cat >"$work/run.json" <<'JSON'
{"schema": "ccscope.bench/1", "complete": false, "stopped_by": "SIGTERM",
 "metadata": {"hosts": ["n0", "n1"], "ranks": 4, "environment": {"A": "1", "B": "x\ty"}},
 "records": [{"size_bytes": 8, "in_place": false, "ranks": 2, "collective": "allreduce"},
             {"size_bytes": 8, "in_place": true, "collective": "allreduce"}]}
JSON
expect $'8\t0\t2\tn0;n1\tA=1;B=x\\ty\t0\tSIGTERM\n8\t1\t4\tn0;n1\tA=1;B=x\\ty\t0\tSIGTERM' \
  "$(rr "$work/run.json" --fields size_bytes,in_place,ranks,hosts,environment,complete,stopped_by)" "JSON"
expect '4' "$(rr "$work/run.json" --fields ranks --where in_place=1)" "JSON --where"
refused "JSON unknown column" "no column 'sizes'" "$work/run.json" --fields sizes
echo '{"records": []}' >"$work/other.json"
refused "JSON without schema" "not a ccscope JSON" "$work/other.json" --fields size_bytes

if [ -n "$CCSCOPE" ]; then
  # One rank without a launcher: MPI's singleton start, no mpiexec needed.
  if "$CCSCOPE" bench allreduce --backend mpi -b 8 -e 64 -f 2 -n 1 -w 0 --no-progress --timeout 60 \
       --csv "$work/real.csv" --json "$work/real.json" >"$work/real.out" 2>&1 </dev/null; then
    fields=collective,size_bytes,in_place,checked,wrong,hosts,gpu_names,environment,mpi_library,command_line
    from_csv=$(rr "$work/real.csv" --fields "$fields")
    expect 8 "$(printf '%s\n' "$from_csv" | grep -c '')" "ccscope run: CSV records (4 sizes x 2)"
    expect "$from_csv" "$(rr "$work/real.json" --fields "$fields")" "ccscope run: CSV and JSON"
  else
    fail "ccscope run failed: $(tail -n 3 "$work/real.out")"
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "read_records_test: $failures failure(s)" >&2
  exit 1
fi
echo "read_records_test: PASS"
