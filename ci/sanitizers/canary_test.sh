#!/usr/bin/env bash
# Test sanitizer.canary (asan preset only): with the environment of `ctest --preset asan`
# (LSAN_OPTIONS with ci/sanitizers/lsan.supp, UBSAN_OPTIONS), the third-party leak of
# MPI_Init is suppressed, a leak in our own code is reported and fails, and undefined
# behaviour stops the program.
# usage: canary_test.sh CANARY_BINARY MPIEXEC
set -u
canary=${1:?usage: canary_test.sh CANARY_BINARY MPIEXEC}
mpiexec=${2:?usage: canary_test.sh CANARY_BINARY MPIEXEC}
work=$(mktemp -d "${TMPDIR:-/tmp}/ccscope-canary.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
show() { sed -e 's/^/    /' "$1" | head -n 40; }

case ${LSAN_OPTIONS:-} in
  *lsan.supp*) ;;
  *) echo "note: LSAN_OPTIONS names no lsan.supp; run this through 'ctest --preset asan'" ;;
esac

# 1. clean: MPI_Init + MPI_Finalize only; the libpciaccess leak must be suppressed.
status=0
"$mpiexec" -n 1 "$canary" clean >"$work/clean" 2>&1 </dev/null || status=$?
if [ "$status" -ne 0 ] || grep -q "Sanitizer" "$work/clean"; then
  fail "clean run: exit $status, expected 0 and no sanitizer report (is the suppression file in LSAN_OPTIONS?)"
  show "$work/clean"
fi

# 2. leak: exactly our 40 bytes are reported, from leak_ten_ints, and the run fails.
status=0
"$mpiexec" -n 1 "$canary" leak >"$work/leak" 2>&1 </dev/null || status=$?
[ "$status" -ne 0 ] || fail "leak run: exit 0, expected non-zero (LeakSanitizer did not fail the run)"
grep -q "Direct leak of 40 byte(s) in 1 object(s)" "$work/leak" || fail "leak run: our 40-byte leak is not reported"
grep -q "leak_ten_ints" "$work/leak" || fail "leak run: the report does not name leak_ten_ints"
grep -q "SUMMARY: AddressSanitizer: 40 byte(s) leaked in 1 allocation(s)" "$work/leak" ||
  fail "leak run: expected only our leak (40 bytes in 1 allocation) in the summary"
[ "$failures" -eq 0 ] || show "$work/leak"

# 3. ub: UBSan reports the shift and stops the program with a non-zero status.
status=0
"$canary" ub >"$work/ub" 2>&1 </dev/null || status=$?
before=$failures
[ "$status" -ne 0 ] || fail "ub run: exit 0, expected non-zero (UBSan errors must be fatal)"
grep -q "runtime error: shift exponent 64" "$work/ub" || fail "ub run: no UBSan report of the shift"
grep -q "^shifted:" "$work/ub" && fail "ub run: the program went on after the UBSan report"
[ "$failures" -eq "$before" ] || show "$work/ub"

if [ "$failures" -ne 0 ]; then
  echo "FAIL: $failures check(s) of the sanitizer canary failed"
  exit 1
fi
echo "PASS: third-party leak suppressed; our leak (40 B, leak_ten_ints) and UB fail"
