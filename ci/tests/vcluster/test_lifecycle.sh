#!/usr/bin/env bash
# Life cycle without ccscope: `down` with nothing up and `up` twice are harmless;
# an interrupted `up` removes what it built; hostnames and placement are node by
# node; and `down` after a test that died half-way (cluster up, job running, no
# trap ran) leaves no namespace, run folder or process behind.
source "$(dirname "$0")/lib.sh"
require_vcluster

state=${VCLUSTER_STATE_ROOT:-/run/ccscope-vcluster}
procs_of() { grep -lsaz "^VCLUSTER_JOB=$1\." /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 || true; }

# down with nothing up
vc down || fail "down with nothing up exited $?"
"$VCLUSTER" --help >"$WORK/help"
grep -q "stop-rank" "$WORK/help" || fail "--help does not describe fault actions"

# up twice: the second is a no-op; a different shape is refused and changes nothing
vc up --nodes 2 --ranks-per-node 2
vc up --nodes 2 --ranks-per-node 2 || fail "second identical up exited $?"
rc=0; vc up --nodes 3 --ranks-per-node 2 2>/dev/null || rc=$?
[[ $rc != 0 ]] || fail "up with a different shape over a running cluster succeeded"
vc status >"$WORK/status"
grep -q "2 nodes x 2 ranks" "$WORK/status" || fail "status does not show the cluster: $(cat "$WORK/status")"

# placement and hostnames: ranks 0,1 on node0 and 2,3 on node1, each node its own hostname
vc run --timeout 30 -- sh -c 'echo "$PMI_RANK $(hostname)"' | sort -n >"$WORK/place"
printf '0 node0\n1 node0\n2 node1\n3 node1\n' | diff - "$WORK/place" || fail "unexpected placement"

# a test that dies half-way: cluster up, a job running, then SIGKILL, no cleanup ran
name2="$VC_NAME-dead"
EXTRA_NAMES+=("$name2")
{ (
  "$VCLUSTER" --name "$name2" up --nodes 2 --ranks-per-node 1
  "$VCLUSTER" --name "$name2" run -- sleep 1000 &
  sleep 2
  kill -KILL $BASHPID
) || true; } 2>"$WORK/dead.err"
sleep 0.5
[[ -n $(ns_of "$name2") ]] || fail "setup of the half-way failure did not work"
[[ -n $(procs_of "$name2") ]] || fail "the dead test's job is not running"
"$VCLUSTER" --name "$name2" down || fail "down after a half-way failure exited $?"
sleep 0.5
[[ -z $(ns_of "$name2") ]] || fail "namespaces left: $(ns_of "$name2")"
[[ ! -e $state/$name2 ]] || fail "run folder $state/$name2 left"
[[ -z $(procs_of "$name2") ]] || fail "job processes left: $(procs_of "$name2")"
"$VCLUSTER" --name "$name2" down || fail "second down exited $?"

# an interrupted up removes what it built
name3="$VC_NAME-int"
EXTRA_NAMES+=("$name3")
"$VCLUSTER" --name "$name3" up --nodes 8 --ranks-per-node 1 &
up_pid=$!
sleep 0.3
kill -TERM "$up_pid" 2>/dev/null || true
rc=0; wait "$up_pid" || rc=$?
if [[ $rc != 0 ]]; then
  [[ -z $(ns_of "$name3") && ! -e $state/$name3 ]] ||
    fail "interrupted up left: $(ns_of "$name3") $(ls -d "$state/$name3" 2>/dev/null)"
  note "interrupted up (rc $rc) cleaned up after itself"
else
  note "up finished before the signal; nothing to check"
fi
"$VCLUSTER" --name "$name3" down

vc down
[[ -z $(our_leftovers) ]] || fail "left behind after down: $(our_leftovers)"
note PASS
