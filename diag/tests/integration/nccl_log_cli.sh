#!/usr/bin/env bash
# ccscope diag nccl-log from the command line: exit codes (0 nothing above
# info, 1 a warn or fail finding, 2 bad arguments or unreadable files, with one
# line on stderr and no trace), --json on stdout, --json-file, stdin, several
# files, and a binary file read as a partial result.
# usage: nccl_log_cli.sh CCSCOPE LOGS_DIR
set -uo pipefail
ccscope=$1 logs=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
run() {  # run EXPECTED_RC ARGS...: stdout in $work/out, stderr in $work/err
  local want=$1
  shift
  timeout 30 "$ccscope" diag nccl-log "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [[ $rc == "$want" ]] || fail "nccl-log $*: exit $rc, not $want: $(head -3 "$work/err")"
  grep -qi "terminate\|abort\|backtrace\|what()" "$work/err" && fail "nccl-log $*: a crash: $(cat "$work/err")"
  echo "ok: nccl-log $* -> $rc"
}
expect_usage() {  # expect_usage WHAT ARGS...
  local what=$1
  shift
  run 2 "$@"
  [[ $(wc -l <"$work/err") == 1 ]] || fail "$*: not one line: $(cat "$work/err")"
  grep -q -- "$what" "$work/err" || fail "$*: the line does not say '$what': $(cat "$work/err")"
}
expect_usage "required"
expect_usage "no such file" "$work/missing.log"
expect_usage "is a directory" "$logs"
expect_usage "not expected" --no-such-flag "$logs/ib-2node-gdr-openmpi.log"
# A healthy 2-node IB log: only info findings.
run 0 "$logs/ib-2node-gdr-openmpi.log"
grep -q "network IB (Using network); GPUDirect RDMA enabled" "$work/out" || fail "no IB summary: $(cat "$work/out")"
grep -q "NET/IB+GDR+PXN" "$work/out" || fail "no matrix: $(cat "$work/out")"
# The real 2-rank socket log of the GPU machine: a warn.
run 1 "$logs/nccl-2.28.3-h200-2rank-socket.log"
grep -q "WARN net.socket_between_nodes" "$work/out" || fail "no socket finding: $(cat "$work/out")"
# --json: one JSON document on stdout with the schema and the findings.
run 1 --json "$logs/peer-closed-ib-error-kubectl.log"
grep -q '"schema": "ccscope.nccl_log/1"' "$work/out" || fail "no schema: $(head -5 "$work/out")"
grep -q '"code": "error.peer_closed"' "$work/out" || fail "no peer_closed finding"
grep -q '"role": "secondary"' "$work/out" || fail "no secondary role"
if command -v python3 >/dev/null; then
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["summary"]["ranks"] == 2' \
    "$work/out" || fail "--json output does not parse"
fi
# Several files, one per rank, and stdin; --json-file written beside the text.
run 1 "$logs/invalid-usage-refused.log" - --json-file "$work/a.json" <"$logs/socket-with-ib-srun.log"
grep -q "4 rank(s)" "$work/out" || fail "not 4 ranks from two inputs: $(head -3 "$work/out")"
grep -q '"name": "<stdin>"' "$work/a.json" || fail "--json-file without the stdin input"
expect_usage "directory" "$logs/ib-2node-gdr-openmpi.log" --json-file "$work"
# Binary data: a partial result with a note, not a crash.
run 1 "$logs/binary-core.bin"
grep -q "binary" "$work/out" || fail "binary not reported: $(cat "$work/out")"
head -c 4096 /dev/urandom >"$work/random.bin"
run 1 "$work/random.bin"
: >"$work/empty.log"
run 1 "$work/empty.log"
grep -q "log.no_nccl_lines" "$work/out" || fail "an empty file not reported"
# --ras-addr: NCCL's RAS service asked (a stub on loopback answering its text protocol with a
# report of rank 5 one all-reduce behind); the hung rank is named with RAS's evidence.
cat >"$work/ras_report" <<'EOF'
Errors
======

Warnings
========

#0-0 (9e8a5b7c1d2f3a40) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 120
  Rank 5 has launched up to operation 119 -- GPU 1 managed by process 4242 on node node1

EOF
python3 "$(dirname "$0")/../../../standin/src/ras_stub.py" "$work/port" 20 "$work/ras_report" &
stub=$!
for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.05; done
run 1 --ras-addr "127.0.0.1:$(cat "$work/port")" --ras-timeout 5 "$logs/ib-2node-gdr-openmpi.log"
wait "$stub"
grep -q "FAIL ras.ranks_behind" "$work/out" || fail "no RAS finding: $(cat "$work/out")"
grep -q "rank 5 (pid 4242 on node1, GPU 1) launched 119 AllReduce" "$work/out" ||
  fail "the rank behind is not named: $(grep ras "$work/out")"
# Nothing listening: an info finding, the log's verdict unchanged.
run 0 --ras-addr 127.0.0.1:1 "$logs/ib-2node-gdr-openmpi.log"
grep -q "ras.unreachable" "$work/out" || fail "no ras.unreachable: $(tail -5 "$work/out")"
expect_usage "port" --ras-addr node0:x "$logs/ib-2node-gdr-openmpi.log"
echo "all ok"
