#!/usr/bin/env bash
# Builds ccscope against Open MPI (Debian's mpicc.openmpi) in its own tree and
# runs MPI integration tests with Open MPI's mpiexec: correctness at 2 and 3
# ranks, the records, bad input (one line, exit 2), a killed rank (what mpirun makes of a
# signal, interrupted.sh, and MPI_Finalize's bound are measured by hand: docs/launch.md).
# Exit 77 (CTest SKIP) when Open MPI is not installed.
# usage: test_openmpi.sh SOURCE_DIR BUILD_DIR [MAIN_BUILD_DIR]
# With MAIN_BUILD_DIR (the tree ctest runs from), this tree takes its build type, flags,
# CUDA setting and compiler launcher: when that is ccache (ci/test), only the files whose
# flags name the MPI library (collectives' MPI files) compile again; the others are cache
# hits, because CMake passes absolute paths and no -g (ccache then ignores the directory).
set -euo pipefail
source_dir=${1:?usage: test_openmpi.sh SOURCE_DIR BUILD_DIR [MAIN_BUILD_DIR]}
build_dir=${2:?usage: test_openmpi.sh SOURCE_DIR BUILD_DIR [MAIN_BUILD_DIR]}
main_build_dir=${3:-}
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
# Without a main tree: no optimisation and no debug information (build type "Check" has no
# flags of its own): this tree is checked for behaviour, never timed.
settings=(-DCCSCOPE_CUDA=OFF -DCMAKE_BUILD_TYPE=Check)
cache=$main_build_dir/CMakeCache.txt
if [[ -n $main_build_dir && -f $cache ]]; then
  cached() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -n 1; }
  build_type=$(cached CMAKE_BUILD_TYPE)
  type_upper=${build_type^^}
  settings=(-DCCSCOPE_CUDA="$(cached CCSCOPE_CUDA)" -DCMAKE_BUILD_TYPE="$build_type"
    "-DCMAKE_C_FLAGS_$type_upper=$(cached "CMAKE_C_FLAGS_$type_upper")"
    "-DCMAKE_CXX_FLAGS_$type_upper=$(cached "CMAKE_CXX_FLAGS_$type_upper")")
  for setting in CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER CMAKE_UNITY_BUILD \
    CCSCOPE_UNOPTIMISED_LIBRARIES CMAKE_EXE_LINKER_FLAGS CMAKE_SHARED_LINKER_FLAGS; do
    value=$(cached $setting)
    [[ -n $value ]] && settings+=("-D$setting=$value")
  done
fi
cmake -S "$source_dir" -B "$build_dir" "${generator[@]}" "${settings[@]}" \
  -DCCSCOPE_BUILD_TESTS=OFF -DMPI_C_COMPILER="$mpicc" -DMPIEXEC_EXECUTABLE="$mpiexec" >/dev/null
cmake --build "$build_dir" --target ccscope -j "$(nproc 2>/dev/null || echo 2)" >"$build_dir.log" 2>&1 ||
  { tail -n 30 "$build_dir.log"; echo "FAIL: the build against Open MPI failed"; exit 1; }
if command -v ccache >/dev/null && [[ ${settings[*]} == *ccache* ]]; then
  echo "ccache: $(ccache --print-stats 2>/dev/null | grep -E '^(direct_cache_hit|preprocessed_cache_hit|cache_miss)' | xargs || true)"
fi
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
# MPI_Finalize's bound (collectives/tests/finalize_bound.sh) is not run here: with the
# bound's PMIx_Abort, mpirun 4.1.4 ended the job with the program's code in every run by
# hand but crashed itself (SIGSEGV, exit 139) in 2 of 3 CI runs (docs/launch.md).
((failed == 0)) || { echo "FAIL: $failed test script(s) failed against Open MPI"; exit 1; }
echo "PASS: ccscope builds and runs against Open MPI"
