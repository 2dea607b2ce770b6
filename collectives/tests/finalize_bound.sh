#!/usr/bin/env bash
# usage: finalize_bound.sh MPIEXEC BINARY (finalize_bound_test)
# A rank whose MPI_Finalize never returns ends the job after the bound (1 s), with the
# program's own exit code (0, and 5), saying so on stderr; without the bound the job hangs
# until the 60 s limit below.
set -uo pipefail
mpiexec=$1 binary=$2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for code in 0 5; do
  start=$SECONDS
  rc=0
  timeout -k 5 60 "$mpiexec" -n 2 "$binary" "$code" 2>"$err" >/dev/null || rc=$?
  elapsed=$((SECONDS - start))
  sed 's/^/  | /' "$err" | head -5
  [[ $rc != 124 && $rc != 137 ]] || { echo "FAIL: exit $code: the job hung until the 60 s limit"; exit 1; }
  [[ $rc == "$code" ]] || { echo "FAIL: the job exited $rc, want $code (the program's own code)"; exit 1; }
  # Rank 1 hangs; rank 0, waiting for it inside MPI_Finalize, may reach its bound first.
  grep -qE "^ccscope: rank [01]: MPI_Finalize did not return within 1000 ms" "$err" ||
    { echo "FAIL: exit $code: no rank said that MPI_Finalize did not return"; exit 1; }
  ((elapsed <= 20)) || { echo "FAIL: exit $code: took ${elapsed}s (want <= 20 s)"; exit 1; }
  echo "exit $code: ended with $rc after ${elapsed}s"
done
echo PASS
