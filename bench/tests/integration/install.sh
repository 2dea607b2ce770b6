#!/usr/bin/env bash
# `cmake --install` into a temporary prefix installs ccscope and nccl-tests'
# program names as links to it; `<prefix>/bin/all_reduce_perf ARGS` under
# mpiexec runs `ccscope bench allreduce ARGS`; each other name runs its own
# collective; `cpack -G DEB` makes a .deb with the links, a version and a
# Depends line naming the MPI runtime (skipped, and said, without cpack/dpkg-deb).
#
# usage: install.sh CCSCOPE MPIEXEC BUILD_DIR
source "$(dirname "$0")/lib.sh"
init_args "$@"
BUILD_DIR=${3:?usage: install.sh CCSCOPE MPIEXEC BUILD_DIR}
make_workdir

prefix="$WORK/prefix"
cmake --install "$BUILD_DIR" --prefix "$prefix" >"$WORK/install.log" 2>&1 ||
  { show_file "cmake --install" "$WORK/install.log"; die "cmake --install $BUILD_DIR --prefix $prefix failed"; }
[ -x "$prefix/bin/ccscope" ] || die "no $prefix/bin/ccscope after cmake --install"

declare -A COLLECTIVE=([all_reduce_perf]=allreduce [all_gather_perf]=allgather
  [reduce_scatter_perf]=reducescatter [broadcast_perf]=broadcast [alltoall_perf]=alltoall
  [sendrecv_perf]=sendrecv [reduce_perf]=reduce [gather_perf]=gather [scatter_perf]=scatter
  [alltoallv_perf]=alltoallv)
for program in "${!COLLECTIVE[@]}"; do
  link="$prefix/bin/$program"
  if [ ! -L "$link" ]; then
    fail "$link is not a symbolic link"
    continue
  fi
  assert_eq ccscope "$(readlink "$link")" "$program: link target"
done

# The one the brief names, under the launcher, as nccl-tests users run it.
out="$WORK/all_reduce_perf.out" err="$WORK/all_reduce_perf.err"
status=0
timeout -k 5 60 "$MPIEXEC" -n 1 "$prefix/bin/all_reduce_perf" -b 8 -e 64 -n 1 -w 0 \
  >"$out" 2>"$err" </dev/null || status=$?
assert_eq 0 "$status" "mpiexec -n 1 all_reduce_perf -b 8 -e 64 -n 1 -w 0: exit status"
grep -q '^# Collective: allreduce$' "$out" ||
  { fail "all_reduce_perf's output does not name allreduce"; show_file stdout "$out"; show_file stderr "$err"; }
# 8 B to 64 B step 1M: one size; its row has the sum op and no wrong element.
rows=$(grep -cE '^ +8 +2 +float +sum ' "$out" || true)
assert_eq 1 "$rows" "all_reduce_perf: rows for 8 B float sum"

# Every other name: its own collective (one rank, no launcher).
for program in "${!COLLECTIVE[@]}"; do
  [ "$program" = all_reduce_perf ] && continue
  status=0
  timeout -k 5 60 "$prefix/bin/$program" -b 64 -e 64 -n 1 -w 0 --no-progress \
    >"$WORK/$program.out" 2>"$WORK/$program.err" </dev/null || status=$?
  assert_eq 0 "$status" "$program -b 64 -e 64 -n 1 -w 0: exit status"
  grep -q "^# Collective: ${COLLECTIVE[$program]}\$" "$WORK/$program.out" ||
    { fail "$program's output does not name ${COLLECTIVE[$program]}"; show_file stdout "$WORK/$program.out"; }
done
# A bad flag through a link: bench's one line, exit 2.
status=0
"$prefix/bin/all_gather_perf" -t 0 >/dev/null 2>"$WORK/bad.err" </dev/null || status=$?
assert_eq 2 "$status" "all_gather_perf -t 0: exit status"
assert_eq 1 "$(grep -c '' "$WORK/bad.err")" "all_gather_perf -t 0: lines on stderr"

# The Debian package.
if command -v cpack >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1; then
  status=0
  (cd "$WORK" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" -B "$WORK/package") \
    >"$WORK/cpack.log" 2>&1 || status=$?
  assert_eq 0 "$status" "cpack -G DEB: exit status"
  deb=$(ls "$WORK"/package/*.deb 2>/dev/null | head -n 1)
  if [ -z "$deb" ]; then
    fail "cpack -G DEB made no .deb"
    show_file cpack "$WORK/cpack.log"
  else
    assert_eq ccscope "$(dpkg-deb -f "$deb" Package)" ".deb Package"
    version=$(dpkg-deb -f "$deb" Version)
    [ -n "$version" ] || fail ".deb has no Version"
    [ -n "$(dpkg-deb -f "$deb" Maintainer)" ] || fail ".deb has no Maintainer"
    dpkg-deb -f "$deb" Depends | grep -qE '(^|, )(mpich|openmpi-bin)( |,|$)' ||
      fail ".deb Depends does not name the MPI runtime: $(dpkg-deb -f "$deb" Depends)"
    dpkg-deb -c "$deb" >"$WORK/contents"
    grep -qE ' \./usr/bin/ccscope$' "$WORK/contents" || fail ".deb lacks /usr/bin/ccscope"
    for program in "${!COLLECTIVE[@]}"; do
      grep -qF "./usr/bin/$program -> ccscope" "$WORK/contents" ||
        fail ".deb lacks the link /usr/bin/$program -> ccscope"
    done
    log "package: $(basename "$deb") (Depends: $(dpkg-deb -f "$deb" Depends))"
  fi
else
  log "SKIP (part): cpack or dpkg-deb is not installed, the .deb was not built"
fi
finish
