# Common helpers for ccscope's MPI integration tests (sourced, not run).
#
# Every test script is called as: bash SCRIPT.sh CCSCOPE_BINARY MPIEXEC [args...]
# and exits 0 when every assertion held, non-zero (with a "FAIL:" line) otherwise.

set -u

TEST_NAME=$(basename "${0%.sh}")
FAILURES=0

log() { printf '[%s] %s\n' "$TEST_NAME" "$*" >&2; }

# Stops the test now.
die() {
  printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}

# Records a failure and keeps going (so one run reports every broken assertion).
fail() {
  printf '[%s] FAIL: %s\n' "$TEST_NAME" "$*" >&2
  FAILURES=$((FAILURES + 1))
}

# Prints the summary and exits with the right status.
finish() {
  if [ "$FAILURES" -ne 0 ]; then
    printf '[%s] %d assertion(s) failed\n' "$TEST_NAME" "$FAILURES" >&2
    exit 1
  fi
  log "PASS"
  exit 0
}

# Shows a file's content (indented) in the test log, for diagnosis after a failure.
show_file() {
  local label=$1 file=$2
  printf '[%s] --- %s (%s):\n' "$TEST_NAME" "$label" "$file" >&2
  if [ -f "$file" ]; then sed -e 's/^/    /' "$file" | head -n 20 >&2; else printf '    (missing)\n' >&2; fi
}

assert_eq() {  # expected actual message
  [ "$1" = "$2" ] || fail "$3: expected '$1', got '$2'"
}

assert_ne() {  # unexpected actual message
  [ "$1" != "$2" ] || fail "$3: did not expect '$1'"
}

# True when $1 is a non-negative integer.
is_uint() { case $1 in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }

# Checks the arguments every script receives; sets CCSCOPE and MPIEXEC.
init_args() {
  [ $# -ge 2 ] || die "usage: $0 CCSCOPE_BINARY MPIEXEC [args...]"
  CCSCOPE=$1
  MPIEXEC=$2
  [ -x "$CCSCOPE" ] || die "ccscope binary '$CCSCOPE' is not executable"
  [ -x "$MPIEXEC" ] || command -v "$MPIEXEC" >/dev/null 2>&1 || die "mpiexec '$MPIEXEC' not found"
  if "$MPIEXEC" --version 2>&1 | grep -qE "Open MPI|OpenRTE"; then
    # Open MPI's mpiexec: allow root (CI runs as root), more ranks than cores,
    # and no banner of its own when a rank exits non-zero, so that stderr holds
    # only what ccscope printed (as with MPICH).
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_orte_execute_quiet=1
  fi
}

# Creates $WORK (a fresh temporary directory) removed, with every process this
# test started, when the script exits for any reason.
CLEANUP_HOOKS=()
on_exit() { CLEANUP_HOOKS+=("$1"); }
run_cleanup() {
  local status=$? hook
  for hook in "${CLEANUP_HOOKS[@]+"${CLEANUP_HOOKS[@]}"}"; do eval "$hook" || true; done
  [ -n "${WORK:-}" ] && rm -rf "$WORK"
  exit "$status"
}
make_workdir() {
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/ccscope-it-${TEST_NAME}.XXXXXX") || die "mktemp -d failed"
  trap run_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# use_private_binary : copies $CCSCOPE into $WORK and points CCSCOPE at the copy,
# so that a rebuild of the build tree while the test runs (a relink replaces the
# file) cannot break the test half-way. Waits (up to 120 s) for a binary that is
# not being written: same size and time stamp before and after the copy, and the
# copy answers --help.
use_private_binary() {
  local source=$CCSCOPE copy="$WORK/bin/ccscope" before after deadline
  mkdir -p "$WORK/bin"
  deadline=$(($(date +%s) + 120))
  while :; do
    before=$(stat -c '%s %Y' "$source" 2>/dev/null)
    if cp "$source" "$copy" 2>/dev/null && chmod +x "$copy" &&
       "$copy" bench --help >/dev/null 2>&1 </dev/null; then
      after=$(stat -c '%s %Y' "$source" 2>/dev/null)
      [ -n "$before" ] && [ "$before" = "$after" ] && break
    fi
    [ "$(date +%s)" -ge "$deadline" ] && die "could not take a stable copy of '$source' within 120 s (is it being rebuilt?)"
    sleep 1
  done
  CCSCOPE=$copy
}

# ---------------------------------------------------------------------------
# Records: every script reads ccscope's CSV and JSON through ci/read-records
# (RFC 4180: quoted fields may hold commas, quotes and newlines).

READ_RECORDS="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../ci" && pwd)/read-records"
read_records() { python3 "$READ_RECORDS" "$@"; }

# csv_select FILE COLUMN... : one line per record, the named columns joined by
# tabs (tab, new line and backslash in a field written \t, \n, \\). Fails
# (status 2, one line on stderr) when the file is missing, a named column is not
# in the header, or a record has another field count than the header.
csv_select() {
  local file=$1
  shift
  read_records "$file" --fields "$(IFS=,; printf '%s' "$*")"
}

# csv_header FILE : the header's column names, one per line.
csv_header() {
  read_records "$1" --columns
}

# ---------------------------------------------------------------------------
# Processes

# Process ids of live (not zombie) ccscope processes whose command line contains
# MARKER (use a path inside $WORK, so concurrent tests never see each other's).
own_ccscope_pids() {
  local marker=$1 pid state
  for pid in $(pgrep -x ccscope 2>/dev/null); do
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || continue
    [ "$state" = Z ] && continue
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$marker"; then echo "$pid"; fi
  done
}

# True when pid $1 is $2 or a descendant of $2.
is_descendant() {
  local pid=$1 root=$2
  while [ -n "$pid" ] && [ "$pid" -gt 1 ]; do
    [ "$pid" = "$root" ] && return 0
    pid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) || return 1
  done
  return 1
}

# find_rank_pid ROOT_PID RANK : the pid of the ccscope process descended from
# ROOT_PID (our mpiexec) whose environment gives it rank RANK (MPICH's PMI_RANK,
# Open MPI's OMPI_COMM_WORLD_RANK).
find_rank_pid() {
  local root=$1 rank=$2 pid
  for pid in $(pgrep -x ccscope 2>/dev/null); do
    is_descendant "$pid" "$root" || continue
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxE "(PMI_RANK|OMPI_COMM_WORLD_RANK)=$rank"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# wait_for_rank_pids ROOT_PID NRANKS SECONDS : waits until all NRANKS rank processes
# exist under ROOT_PID; fails the test when they do not appear in time.
wait_for_rank_pids() {
  local root=$1 nranks=$2 seconds=$3 deadline r missing
  deadline=$(($(date +%s) + seconds))
  while :; do
    missing=0
    for ((r = 0; r < nranks; r++)); do find_rank_pid "$root" "$r" >/dev/null || missing=1; done
    [ "$missing" -eq 0 ] && return 0
    kill -0 "$root" 2>/dev/null || die "mpiexec (pid $root) exited before all $nranks ranks started"
    [ "$(date +%s)" -ge "$deadline" ] && die "the $nranks rank processes did not all start within ${seconds} s"
    sleep 0.1
  done
}

# wait_pid_with_deadline PID SECONDS : waits for our background child PID for at
# most SECONDS. Sets WAIT_STATUS (its exit status, or "timeout") and WAIT_ELAPSED.
wait_pid_with_deadline() {
  local pid=$1 seconds=$2 start now
  start=$(date +%s.%N)
  while kill -0 "$pid" 2>/dev/null; do
    now=$(date +%s.%N)
    if awk -v a="$start" -v b="$now" -v s="$seconds" 'BEGIN { exit !(b - a > s) }'; then
      WAIT_STATUS=timeout
      WAIT_ELAPSED=$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
      return 0
    fi
    sleep 0.1
  done
  wait "$pid"
  WAIT_STATUS=$?
  now=$(date +%s.%N)
  WAIT_ELAPSED=$(awk -v a="$start" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
}

# Sends SIGCONT then SIGKILL to every live ccscope process carrying MARKER and to
# the process group PGID (when given): nothing stopped or running is left behind.
kill_leftovers() {
  local marker=$1 pgid=${2:-} pid
  for pid in $(own_ccscope_pids "$marker"); do
    kill -CONT "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  done
  if [ -n "$pgid" ]; then
    kill -CONT -- "-$pgid" 2>/dev/null
    kill -KILL -- "-$pgid" 2>/dev/null
  fi
  return 0
}

# assert_no_leftovers MARKER SECONDS : fails when a ccscope process carrying MARKER
# is still alive SECONDS after the job ended (killed ranks take a moment to be reaped).
assert_no_leftovers() {
  local marker=$1 seconds=$2 deadline left
  deadline=$(($(date +%s) + seconds))
  while :; do
    left=$(own_ccscope_pids "$marker" | tr '\n' ' ')
    [ -z "$left" ] && return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      fail "ccscope process(es) left behind ${seconds} s after the job ended: pid(s) $left($(ps -o pid=,stat=,args= -p "${left// /,}" 2>/dev/null | tr '\n' ';'))"
      return 1
    fi
    sleep 0.2
  done
}

# Fails when FILE shows a crash instead of a clean error.
assert_no_crash_text() {
  local file=$1 what=$2
  if grep -Eq 'terminate called|Aborted|Segmentation fault|core dumped|stack trace|Backtrace|#[0-9]+ +0x[0-9a-f]+|what\(\):' "$file"; then
    fail "$what: stderr shows a crash or stack trace"
    show_file "stderr" "$file"
  fi
}
