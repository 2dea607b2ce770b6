#!/usr/bin/env bash
# ccscope diag (the bring-up checklist) through the real binary under the real
# mpiexec, 2 ranks on one machine:
#  - a healthy run of stages 1, 2 and 4 with --csv, --json and --prometheus:
#    exit 0, a PASS line per stage (a WARN only from a timing figure, which a
#    loaded 2-core machine cannot promise), every correctness check PASS in the
#    CSV (the six node.<collective> rows, scaling.loss_equivalence), the JSON
#    complete, the Prometheus file in the text exposition format;
#  - -q: nothing on stdout, the CSV still written;
#  - a rank corrupting one element (--test-corrupt-rank 1, stages 1-3): exit 1,
#    node.* FAIL naming the host, no stage 3, the CSV keeps stage 1's checks,
#    and ccscope report (HTML and --markdown) shows the FAIL;
#  - bad input: exit 2, exactly one line on stderr (once, not once per rank),
#    no crash, an existing --csv file left as it was;
#  - a character device as an output (a null device of our own, not /dev/null)
#    is written in place, never replaced: exit 0 and it is still a device;
#  - --help: exit 0, printed once under mpiexec.
#
# usage: diag_cli.sh CCSCOPE MPIEXEC
source "$(dirname "$0")/../../../bench/tests/integration/lib.sh"
init_args "$@"
make_workdir
use_private_binary
cd "$WORK" || die "cannot cd to $WORK"

HOST=$(hostname)
# Every run is bounded: a hang is a failure of its own, never a stuck ctest.
diag() {  # diag NRANKS ARGS... : stdout in $WORK/out, stderr in $WORK/err, status in $RC
  local n=$1
  shift
  RC=0
  if [ "$n" = 0 ]; then
    timeout -k 5 60 "$CCSCOPE" diag "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || RC=$?
  else
    timeout -k 5 60 "$MPIEXEC" -n "$n" "$CCSCOPE" diag "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || RC=$?
  fi
  if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
    fail "ccscope diag $*: still running after 60 s (hang)"
    show_file stderr "$WORK/err"
  fi
  assert_no_crash_text "$WORK/err" "ccscope diag $*"
}
# The stage lines of the human summary: "stage 2 node: PASS (0.4 s)".
stage_lines() { grep -E '^stage [1-4] [a-z]+: [A-Z]+ \([0-9.]+ s\)$' "$WORK/out"; }
# Checks whose verdict depends on timing (figures of ranks sharing 2 cores).
TIMING_CHECKS='^(rank\.gemm|rank\.memory_bandwidth|rank\.host_device_copy|node\.busbw|scaling\.efficiency)$'
COLLECTIVES=(allgather allreduce alltoall broadcast reducescatter sendrecv)

# --- a healthy run: stages 1, 2, 4 ------------------------------------------
log "healthy run: mpiexec -n 2 ccscope diag --stages 1,2,4 --train-steps 20"
diag 2 --stages 1,2,4 --train-steps 20 --timeout 30 --csv h.csv --json h.json --prometheus h.prom
assert_eq 0 "$RC" "healthy run: exit status"
[ "$RC" = 0 ] || show_file stdout "$WORK/out"
assert_eq "1 2 4" "$(stage_lines | awk '{printf "%s%s", sep, $2; sep=" "}')" \
  "healthy run: the stage lines (stages run)"
grep -q '^# verdict: ' "$WORK/out" || fail "healthy run: no verdict line"
rows=$(csv_select h.csv stage check status host rank) || die "healthy run: h.csv unreadable"
printf '%s\n' "$rows" >"$WORK/h.rows"
while read -r stage name status _rest; do
  case $status in
    PASS) ;;
    WARN)
      # Only a timing check may WARN; the stage's own WARN must come from one.
      # shellcheck disable=SC2086
      warns=$(awk -F'\t' -v s="$stage" '$1 == s && $3 == "WARN" {print $2}' "$WORK/h.rows")
      [ -n "$warns" ] || fail "healthy run: stage $stage says WARN but no check of it WARNed"
      for w in $warns; do
        [[ $w =~ $TIMING_CHECKS ]] || fail "healthy run: stage $stage WARN from $w (not a timing figure)"
      done
      log "healthy run: stage $stage $name WARN from timing only: $(echo $warns) (a loaded machine)"
      ;;
    *) fail "healthy run: stage $stage $name says $status: $(grep -E "^  (FAIL|WARN)" "$WORK/out" | head -3)" ;;
  esac
done < <(stage_lines | sed -E 's/^stage ([1-4]) ([a-z]+): ([A-Z]+) .*/\1 \2 \3/')
for c in "${COLLECTIVES[@]}"; do
  assert_eq "2	node.$c	PASS	$HOST	-1" "$(grep -P "\tnode\.$c\t" "$WORK/h.rows")" \
    "healthy run: the CSV row of node.$c (stage, check, status, host, rank)"
done
assert_eq "4	scaling.loss_equivalence	PASS		-1" \
  "$(grep -P '\tscaling\.loss_equivalence\t' "$WORK/h.rows")" "healthy run: scaling.loss_equivalence"
for r in 0 1; do
  assert_eq "1	rank.collective	PASS	$HOST	$r" \
    "$(awk -F'\t' -v r="$r" '$2 == "rank.collective" && $5 == r' "$WORK/h.rows")" \
    "healthy run: rank.collective of rank $r"
done
bad=$(awk -F'\t' '$3 != "PASS" && $3 != "WARN" && $3 != "SKIP"' "$WORK/h.rows")
[ -z "$bad" ] || fail "healthy run: checks that FAILed (or have no verdict): $bad"
assert_eq "" "$(awk -F'\t' '$1 != 1 && $1 != 2 && $1 != 4 {print $1}' "$WORK/h.rows" | sort -u)" \
  "healthy run: CSV rows of stages not asked for"
assert_eq 1 "$(csv_select h.csv run_id | sort -u | grep -c '^diag-')" "healthy run: one run_id"
assert_eq "ccscope.diag_check/1" "$(csv_select h.csv schema | sort -u)" "healthy run: CSV schema"
python3 - "$WORK/h.json" "$(grep -c '' "$WORK/h.rows")" <<'PY' || fail "healthy run: h.json (above)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "ccscope.diag_check/1", d.get("schema")
assert d["complete"] is True, f"complete is {d['complete']!r}"
assert len(d["checks"]) == int(sys.argv[2]), (len(d["checks"]), sys.argv[2])
assert any(c["check"] == "node.allreduce" and c["status"] == "PASS" for c in d["checks"])
PY
# Prometheus' text exposition format: comments are "# HELP name text" or
# "# TYPE name gauge" before the family's samples; a sample is
# name{label="value",...} value, one series per label set.
python3 - "$WORK/h.prom" "$HOST" <<'PY' || fail "healthy run: h.prom (above)"
import re, sys
text = open(sys.argv[1]).read()
host = sys.argv[2]
assert text.endswith("\n"), "no final new line"
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:' + label + r'(?:,' + label + r')*)?\})? '
                    r'(NaN|[+-]Inf|[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)(?: -?[0-9]+)?$')
typed, seen, errors = set(), set(), []
for n, line in enumerate(text.splitlines(), 1):
    if line.startswith("#"):
        m = re.match(r'^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$', line)
        if not m:
            errors.append(f"line {n}: bad comment: {line!r}")
        elif m.group(1) == "TYPE":
            if m.group(3) not in ("gauge", "counter", "untyped", "summary", "histogram"):
                errors.append(f"line {n}: bad type: {line!r}")
            typed.add(m.group(2))
        continue
    m = sample.match(line)
    if not m:
        errors.append(f"line {n}: not name{{labels}} value: {line!r}")
        continue
    if m.group(1) not in typed:
        errors.append(f"line {n}: {m.group(1)} has no # TYPE before it")
    key = (m.group(1), m.group(2))
    if key in seen:
        errors.append(f"line {n}: duplicate series {line!r}")
    seen.add(key)
assert not errors, "\n".join(errors)
want = re.compile(r'^ccscope_diag_check_status\{[^}]*check="node\.allreduce"[^}]*\} 0$', re.M)
assert want.search(text), "no ccscope_diag_check_status{...check=\"node.allreduce\"...} 0"
assert re.search(r'^ccscope_diag_check_status\{[^}]*check="node\.allreduce",host="' + re.escape(host)
                 + '"', text, re.M), "node.allreduce's series does not name the host"
assert re.search(r'^ccscope_diag_exit_code 0$', text, re.M), "no ccscope_diag_exit_code 0"
for stage in ("rank", "node", "scaling"):
    assert re.search(r'^ccscope_diag_stage_status\{stage="' + stage + r'"\} [01]$', text, re.M), stage
assert 'stage="cluster"' not in text, "a stage 3 series, but stage 3 did not run"
for name in ("ccscope_diag_duration_seconds", "ccscope_diag_last_run_timestamp_seconds"):
    assert re.search("^" + name + " [0-9]", text, re.M), name
PY
# Written atomically (a temporary beside it, renamed): nothing else left there.
assert_eq "" "$(find "$WORK" -maxdepth 1 -newer "$WORK/bin/ccscope" -name '*prom*' ! -name h.prom)" \
  "healthy run: temporaries left beside h.prom"

# --- -q: files only ----------------------------------------------------------
diag 2 -q --stages 1 --csv q.csv
assert_eq 0 "$RC" "-q: exit status"
assert_eq 0 "$(grep -c '' "$WORK/out")" "-q: lines on stdout"
csv_select q.csv check | grep -qx rank.collective || fail "-q: q.csv has no rank.collective row"

# --- a rank that corrupts one element: stage 2 FAILs, stage 3 never runs -------
log "corrupt run: --test-corrupt-rank 1 --stages 1-3"
diag 2 --test-corrupt-rank 1 --stages 1-3 --timeout 30 --csv c.csv --json c.json --prometheus c.prom
assert_eq 1 "$RC" "corrupt run: exit status"
grep -Eq "^  FAIL  node\.[a-z]+ +$HOST rank 1: .*wrong elements; wrong on world rank 1 \($HOST\): [0-9]+$" "$WORK/out" ||
  fail "corrupt run: no node.* FAIL line naming host $HOST: $(grep -E '^  [A-Z]{4}  node' "$WORK/out" | head -3)"
grep -Eq '^stage 2 node: FAIL ' "$WORK/out" || fail "corrupt run: stage 2 does not say FAIL"
grep -Eq '^stage 3' "$WORK/out" && fail "corrupt run: stage 3 ran after stage 2 FAILed: $(grep '^stage 3' "$WORK/out")"
grep -q 'stopped after stage 2' "$WORK/out" || fail "corrupt run: the verdict does not say it stopped after stage 2"
rows=$(csv_select c.csv stage check status host) || die "corrupt run: c.csv unreadable"
printf '%s\n' "$rows" >"$WORK/c.rows"
assert_eq 2 "$(grep -cP '^1\trank\.collective\t' "$WORK/c.rows")" "corrupt run: stage 1's rank.collective rows kept in the CSV"
assert_eq 0 "$(grep -cP '^3\t' "$WORK/c.rows")" "corrupt run: stage 3 rows in the CSV"
grep -qP "^2\tnode\.allreduce\tFAIL\t$HOST$" "$WORK/c.rows" || fail "corrupt run: no node.allreduce FAIL row for $HOST"
grep -Eq '^ccscope_diag_exit_code 1$' c.prom || fail "corrupt run: c.prom does not say exit code 1"
grep -Eq '^ccscope_diag_check_status\{[^}]*check="node\.allreduce"[^}]*\} 2$' c.prom ||
  fail "corrupt run: c.prom has no node.allreduce status 2"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any(c["check"]=="node.allreduce" and c["status"]=="FAIL" for c in d["checks"])' \
  c.json || fail "corrupt run: c.json has no node.allreduce FAIL"

# ccscope report over that CSV: the Findings show the FAIL.
RC=0
timeout 30 "$CCSCOPE" report c.csv --markdown >"$WORK/report.md" 2>"$WORK/report.err" || RC=$?
assert_eq 0 "$RC" "report --markdown: exit status"
grep -q '^## Findings' "$WORK/report.md" || fail "report --markdown: no Findings section"
grep -Eq '^\| 2 node \| node\.allreduce \| \*\*FAIL\*\* \|' "$WORK/report.md" ||
  fail "report --markdown: no node.allreduce FAIL row"
grep -Eq '^- stage 2 node: .*FAIL' "$WORK/report.md" || fail "report --markdown: no stage 2 FAIL verdict line"
RC=0
timeout 30 "$CCSCOPE" report c.csv -o report.html 2>"$WORK/report.err" || RC=$?
assert_eq 0 "$RC" "report (HTML): exit status"
grep -Eq '<tr[^>]*>.*<td>node\.allreduce</td>.*>FAIL<' report.html ||
  fail "report (HTML): no table row with node.allreduce and FAIL"

# --- bad input: exit 2, one line, once ---------------------------------------
mkdir -p "$WORK/a-directory"
printf 'keep me\n' >"$WORK/keep.csv"
# name | what the line must mention | arguments (word-split)
CASES=(
  "stage 5|'5'|--stages 5 --csv keep.csv"
  "backwards range|3-1|--stages 3-1 --csv keep.csv"
  "stage word|'x'|--stages x --csv keep.csv"
  "no stage at all|--stages|--stages , --csv keep.csv"
  "warn fraction above 1|--warn-fraction|--warn-fraction 2 --csv keep.csv"
  "fail above warn|--fail-fraction|--fail-fraction 0.6 --warn-fraction 0.5 --csv keep.csv"
  "csv is a directory|a-directory|--csv a-directory"
  "csv and json one file|same file|--csv keep.csv --json keep.csv"
  "corrupt rank out of range|--test-corrupt-rank|--test-corrupt-rank 2 --csv keep.csv"
  "unknown flag|--frobnicate|--frobnicate --csv keep.csv"
)
for case in "${CASES[@]}"; do
  name=${case%%|*}
  rest=${case#*|}
  mention=${rest%%|*}
  args=${rest#*|}
  printf 'keep me\n' >"$WORK/keep.csv"
  # shellcheck disable=SC2086
  diag 2 $args
  tag="bad input ($name): mpiexec -n 2 ccscope diag $args"
  assert_eq 2 "$RC" "$tag: exit status"
  lines=$(grep -c '' "$WORK/err")
  if [ "$lines" != 1 ]; then
    fail "$tag: expected exactly one line on stderr, got $lines"
    show_file stderr "$WORK/err"
  elif ! grep -qF -- "$mention" "$WORK/err"; then
    fail "$tag: the line does not mention '$mention': $(cat "$WORK/err")"
  fi
  assert_eq "keep me" "$(cat "$WORK/keep.csv")" "$tag: keep.csv was changed"
done
# The test-only clock offset, read after MPI starts: still one line, exit 2.
printf 'keep me\n' >"$WORK/keep.csv"
CCSCOPE_TEST_CLOCK_OFFSET=garbage diag 2 --stages 1 --csv keep.csv
assert_eq 2 "$RC" "CCSCOPE_TEST_CLOCK_OFFSET=garbage: exit status"
assert_eq 1 "$(grep -c '' "$WORK/err")" "CCSCOPE_TEST_CLOCK_OFFSET=garbage: lines on stderr"
grep -q CCSCOPE_TEST_CLOCK_OFFSET "$WORK/err" || fail "CCSCOPE_TEST_CLOCK_OFFSET=garbage: the line does not name it"
assert_eq "keep me" "$(cat "$WORK/keep.csv")" "CCSCOPE_TEST_CLOCK_OFFSET=garbage: keep.csv was changed"

# --- a character device as an output: written in place, never replaced --------
# /dev/null is what users name; a regression would replace the machine's own,
# so the test makes a null device of its own (root and a dev-enabled /tmp).
if mknod "$WORK/null" c 1 3 2>/dev/null && [ -c "$WORK/null" ] && echo x >"$WORK/null" 2>/dev/null; then
  diag 2 --stages 1 --prometheus "$WORK/null" --json "$WORK/null"
  assert_eq 0 "$RC" "--prometheus/--json a character device: exit status"
  [ -c "$WORK/null" ] || fail "--prometheus a character device: it was replaced by a $(stat -c %F "$WORK/null")"
else
  log "SKIP the character-device output case: cannot make a null device in $WORK (not root, or nodev)"
fi

# --- split-half over 4 "nodes" (SLURMD_NODENAME names each rank's node) ------
# Stage 3's halves run at once and every rank learns both figures; on one loaded
# machine the halves' figures are noise, so only the plan is asserted: one round
# of node0,node1 against node2,node3, no hang.
log "split-half: 4 ranks as 4 nodes, --stages 3 --localize split-half"
RC=0
timeout -k 5 60 "$MPIEXEC" -n 4 sh -c \
  'SLURMD_NODENAME=node${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-0}} exec "$0" diag "$@"' "$CCSCOPE" \
  --stages 3 --localize split-half --bytes 64K --timeout 20 --csv "$WORK/split.csv" \
  >"$WORK/out" 2>"$WORK/err" </dev/null || RC=$?
case "$RC" in 0 | 1) ;; *) fail "split-half: exit $RC"; show_file stderr "$WORK/err" ;; esac
grep -qE "cluster\.split_half +halves' all-reduce, 1 round \(node0,node1 [0-9.e-]+ vs node2,node3 " \
  "$WORK/out" || { fail "split-half: no cluster.split_half line with one round"; show_file stdout "$WORK/out"; }

# --- help ------------------------------------------------------------------
diag 0 --help
assert_eq 0 "$RC" "--help: exit status"
grep -q -- '--stages' "$WORK/out" || fail "--help: does not list --stages"
diag 2 --help
assert_eq 0 "$RC" "mpiexec -n 2 ccscope diag --help: exit status"
assert_eq 1 "$(grep -c -- '^ *--stages' "$WORK/out")" "mpiexec -n 2 ccscope diag --help: copies of the help"

assert_no_leftovers "$WORK/bin/ccscope" 5
finish
