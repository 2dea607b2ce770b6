#!/usr/bin/env bash
# A real `git bisect run` driven by `ccscope compare`: a throw-away repository
# whose commits flip a file `slowdown` 0 -> 1 at commit 4 of 6. The bisect
# script runs the real all-reduce benchmark over 2 MPI ranks; with slowdown=1
# both ranks are pinned to one core (taskset -c 0), so the busy-polling ranks
# share it and the collective really is slower. compare's exit code (0 good,
# 1 bad, 125 skip) is the verdict git bisect uses; 6 repeats per run give
# compare a Mann-Whitney test, and --threshold 90 (slower = busbw below 0.1 x
# the baseline's) ignores a busy machine's noise: measured side by side here, the
# pinned run's busbw is 0.004-0.05 x the baseline's, while an unpinned run on a
# loaded 2-core CI machine fell to 0.17 x. CTest runs this test alone (RUN_SERIAL)
# so that other tests do not load the cores. Exit 77 = skipped.
set -euo pipefail
ccscope=${1:?usage: bisect_test.sh PATH/TO/ccscope}
ccscope=$(realpath "$ccscope")
if ! "$ccscope" compare --help >/dev/null 2>&1; then
  echo "SKIP: '$ccscope compare' is not available (the verb is not wired into app/main.cpp yet)"
  exit 77
fi
command -v mpiexec >/dev/null || { echo "SKIP: no mpiexec"; exit 77; }
command -v taskset >/dev/null || { echo "SKIP: no taskset"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ccscope-bisect-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

bench() {  # bench OUTPUT.csv [taskset prefix...]
  local out=$1
  shift
  timeout 120 "$@" mpiexec -n 2 "$ccscope" bench allreduce --backend mpi -b 256K -e 4M -f 4 \
    -n 10 -w 2 --repeat 6 --timeout 60 --csv "$out" >/dev/null
}
bench baseline.csv

cat >check.sh <<CHECK
#!/usr/bin/env bash
# git bisect run script: 0 = as fast as the baseline, 1 = slower, 125 = cannot judge.
set -u
$(declare -f bench)
ccscope='$ccscope'
if [ "\$(cat slowdown)" = 1 ]; then bench current.csv taskset -c 0 || exit 125
else bench current.csv || exit 125; fi
'$ccscope' compare '$work/baseline.csv' current.csv --threshold 90
CHECK
chmod +x check.sh

git init -q repo
cd repo
git config user.email bisect@example.invalid
git config user.name bisect
commits=()
for i in 1 2 3 4 5 6; do
  if [ "$i" -ge 4 ]; then echo 1 >slowdown; else echo 0 >slowdown; fi
  echo "$i" >version
  git add slowdown version
  git commit -q -m "commit $i"
  commits+=("$(git rev-parse HEAD)")
done

git bisect start "${commits[5]}" "${commits[0]}" >/dev/null
git bisect run "$work/check.sh" | tee "$work/bisect.log"
found=$(sed -n 's/^\([0-9a-f]\{40\}\) is the first bad commit.*/\1/p' "$work/bisect.log")
git bisect reset >/dev/null
if [ "$found" != "${commits[3]}" ]; then
  echo "FAIL: git bisect found '${found}', expected commit 4 ${commits[3]}"
  exit 1
fi
echo "PASS: git bisect run named commit 4 (${found}) as the first bad commit"
