#!/usr/bin/env bash
# Builds ccscope against Open MPI (Debian's mpicc.openmpi) in its own tree and
# runs MPI integration tests with Open MPI's mpiexec: correctness at 2 and 3
# ranks, the records, bad input (one line, exit 2), a killed rank
# (what mpirun makes of a signal, interrupted.sh, is measured by hand: README).
# Exit 77 (CTest SKIP) when Open MPI is not installed.
# usage: test_openmpi.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=${1:?usage: test_openmpi.sh SOURCE_DIR BUILD_DIR}
build_dir=${2:?usage: test_openmpi.sh SOURCE_DIR BUILD_DIR}
mpicc=$(command -v mpicc.openmpi || true)
mpiexec=$(command -v mpiexec.openmpi || true)
if [[ -z $mpicc || -z $mpiexec ]]; then
  echo "SKIP: Open MPI is not installed (apt-get install openmpi-bin libopenmpi-dev," \
    "or bash ci/install-deps --tests)"
  exit 77
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
echo "== configure and build against $($mpiexec --version 2>&1 | head -n 1)"
# No optimisation and no debug information (build type "Check" has no flags of its
# own): this tree is checked for behaviour, never timed, and builds in about half the time.
cmake -S "$source_dir" -B "$build_dir" "${generator[@]}" -DCCSCOPE_CUDA=OFF -DCMAKE_BUILD_TYPE=Check \
  -DCCSCOPE_BUILD_TESTS=OFF -DMPI_C_COMPILER="$mpicc" -DMPIEXEC_EXECUTABLE="$mpiexec" >/dev/null
cmake --build "$build_dir" --target ccscope -j "$(nproc 2>/dev/null || echo 2)" >"$build_dir.log" 2>&1 ||
  { tail -n 30 "$build_dir.log"; echo "FAIL: the build against Open MPI failed"; exit 1; }
ccscope=$build_dir/app/ccscope
"$ccscope" --version
library=$("$mpiexec" -n 1 --allow-run-as-root "$ccscope" bench allreduce --backend mpi -b 8 -e 8 \
  -n 1 -w 0 --no-progress 2>&1 | grep -a "^# MPI library" || true)
echo "$library"
[[ $library == *"Open MPI"* ]] || { echo "FAIL: the binary does not report Open MPI"; exit 1; }

it=$source_dir/bench/tests/integration
failed=0
run() {
  echo "== $*"
  bash "$@" "$ccscope" "$mpiexec" || failed=$((failed + 1))
}
matrix() { bash "$it/matrix.sh" "$ccscope" "$mpiexec" "$1" "$2" || failed=$((failed + 1)); }
matrix 2 allreduce
matrix 3 reducescatter
run "$it/records.sh"
run "$it/bad_input.sh"
run "$it/killed_rank.sh"
((failed == 0)) || { echo "FAIL: $failed test script(s) failed against Open MPI"; exit 1; }
echo "PASS: ccscope builds and runs against Open MPI"
