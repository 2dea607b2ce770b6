#!/usr/bin/env bash
# ccscope started without MPI across 2 virtual-cluster nodes x 2 ranks (1 Gbit/s links) from
# torchrun's / Kubernetes' variables, as torchrun or a PyTorchJob would start it: each process
# started by hand inside its node's namespaces (ci/vcluster exec), RANK, WORLD_SIZE, LOCAL_*,
# MASTER_ADDR (node0's address on the switch), MASTER_PORT (a free port) set by hand, the ranks
# meeting at ccscope's TCP rendezvous and running gloo (GLOO_SOCKET_IFNAME=eth0). All 4
# processes run in the background, are waited for with a deadline and are killed on exit.
#  a. torchrun's variables with TORCHELASTIC_USE_AGENT_STORE=True and a stand-in for
#     torchrun's agent store holding MASTER_PORT (ccscope's rank 0 then listens on
#     MASTER_PORT + 1): bench allreduce -b 1M -e 4M: every rank exits 0, rank 0's CSV says
#     launch=torchrun, backend=gloo, ranks=4, nodes=2, wrong=0 on every row, busbw within the
#     link's plausible range (measured once more when below the floor);
#  b. a PyTorchJob's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), only ranks 0-2 of
#     4 started, CCSCOPE_RENDEZVOUS_TIMEOUT=3: each exits 3 within 3 + 5 s, rank 0's stderr
#     names rank 3 ("rank 3 of 4 did not arrive within 3 s (rendezvous at ADDR:PORT");
#  c. torchrun's variables without the agent store: rank 3 (node1) killed with SIGKILL 2 s into
#     an endless 64 KiB all-reduce with -T 5: the others end within 5 + 5 s, non-zero, the first
#     "died" line names rank 3 (node1, pid P), no ccscope process is left on any node.
# Every case ends with no ccscope process left in the nodes; the cluster goes down in the trap.
# Exit 77 (SKIP) without root, ip netns, the ccscope binary, or a ccscope with gloo.
source "$(dirname "$0")/lib.sh"
require_vcluster
require_ccscope
"$CCSCOPE" bench --help 2>/dev/null | grep -- '--backend' | grep -qw gloo ||
  skip "this ccscope has no gloo backend ('bench --help' lists none under --backend)"

# The 4 ranks share this machine's cores, which each node's ranks cannot see: they yield while
# they wait (as in vcluster.slurm).
export CCSCOPE_YIELD_WHEN_IDLE=1
RATE=1gbit
LINK=0.125   # GB/s
# Plausible busbw of all-reduce on 2 nodes x 2 ranks, as a fraction of the link (the range of
# vcluster.slurm): at most 1.5 x 1.05 (each node's link carries the message size once each way
# while busbw counts 2(n-1)/n = 1.5 x it), at least MIN_FRACTION (other load on this 2-core
# machine can only lower the figure: a low one is measured once more; a figure above the
# ceiling fails at once).
MAX_FRACTION=1.575
MIN_FRACTION=${ENV_LAUNCH_TEST_MIN_FRACTION:-0.30}
KILL_T=5     # ccscope's -T in the kill case
NODE0=${VCLUSTER_SUBNET:-10.213.0}.1   # node0's eth0 on the cluster's switch

PIDS=()      # the processes of the case being run (each the ccscope itself: vcluster exec,
NAMES=()     # nsenter and env exec it), their names, exit codes and end times (us)
RCS=()
ENDS=()
STORE_PID=""
kill_started() {
  local pid
  for pid in "${PIDS[@]}" $STORE_PID; do kill -KILL "$pid" 2>/dev/null || true; done
  return 0
}
# our processes first, then lib.sh's cleanup (the cluster, $WORK), keeping the status (set +e:
# under errexit the `(exit $rc)` that hands cleanup the status would end the trap before it)
trap 'rc=$?; set +e; kill_started; (exit $rc); cleanup' EXIT

now_us() { echo "${EPOCHREALTIME/./}"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", (b - a) / 1e6}'; }

# none_left CASE: no ccscope process in the nodes (waiting up to 2 s for stragglers)
none_left() {
  local left
  left=$(node_ccscopes)
  [[ -z $left ]] && return 0
  sleep 2
  left=$(node_ccscopes)
  [[ -z $left ]] || fail "$1: ccscope processes left in the nodes (pid node): ${left//$'\n'/, }"
  note "$1: (ccscope processes lingered up to 2 s after the others ended)"
}

# free_port [N]: a port on node0's address from which N ports (default 1) are free
free_port() {
  vc exec 0 -- python3 -c '
import socket, sys
addr, n = sys.argv[1], int(sys.argv[2])
while True:
    s = [socket.socket()]
    s[0].bind((addr, 0))
    port = s[0].getsockname()[1]
    try:
        for k in range(1, n):
            s.append(socket.socket()); s[-1].bind((addr, port + k))
    except OSError:
        continue
    print(port)
    break' "$NODE0" "${1:-1}"
}

# torchrun_env RANK PORT AGENT_STORE: the variables torchrun sets for a worker of a 2-node x
# 2-worker job (torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers),
# plus the user's GLOO_SOCKET_IFNAME
torchrun_env() {
  local r=$1 node=$(($1 / 2))
  echo "RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 GROUP_RANK=$node"
  echo "GROUP_WORLD_SIZE=2 ROLE_RANK=$r ROLE_NAME=default ROLE_WORLD_SIZE=4"
  echo "MASTER_ADDR=$NODE0 MASTER_PORT=$2 TORCHELASTIC_RUN_ID=ccscope-vcluster"
  echo "TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0"
  echo "TORCHELASTIC_USE_AGENT_STORE=$3 GLOO_SOCKET_IFNAME=eth0"
}
# pytorchjob_env RANK PORT: what a Kubeflow PyTorchJob gives each pod (no LOCAL_*)
pytorchjob_env() {
  echo "RANK=$1 WORLD_SIZE=4 MASTER_ADDR=$NODE0 MASTER_PORT=$2 PYTHONUNBUFFERED=1 GLOO_SOCKET_IFNAME=eth0"
}

# start NAME RANK VARIABLES -- CCSCOPE_ARGS...: rank RANK's process in its node (ranks 0-1 on
# node0, 2-3 on node1), in the background; stdout/stderr in $WORK/NAME.rRANK.{out,err}
start() {
  local name=$1 r=$2 vars=$3
  shift 4
  # "$VCLUSTER" itself, not the function vc: a background function is a subshell that waits
  # for it, while this pid becomes ccscope's (the script execs nsenter, which execs env, ...)
  # shellcheck disable=SC2086
  "$VCLUSTER" --name "$VC_NAME" exec $((r / 2)) -- env $vars CCSCOPE_RENDEZVOUS_TIMEOUT="${RDV_TIMEOUT:-10}" \
    "$CCSCOPE" "$@" --no-progress >"$WORK/$name.r$r.out" 2>"$WORK/$name.r$r.err" </dev/null &
  PIDS+=($!)
  NAMES+=("rank $r")
}

# wait_all NAME LIMIT_S: wait for every started process, at most LIMIT_S s; RCS[i] its exit
# code (or "still running after LIMIT_S s", then it is killed), ENDS[i] when it ended (us)
wait_all() {
  local name=$1 deadline i pending rc
  deadline=$(($(now_us) + $2 * 1000000))
  RCS=()
  ENDS=()
  while :; do
    pending=0
    for i in "${!PIDS[@]}"; do
      [[ -n ${RCS[i]:-} ]] && continue
      if kill -0 "${PIDS[i]}" 2>/dev/null; then
        pending=1
        continue
      fi
      ENDS[i]=$(now_us)
      rc=0
      wait "${PIDS[i]}" 2>/dev/null || rc=$?
      RCS[i]=$rc
    done
    ((pending)) || break
    if (($(now_us) > deadline)); then
      for i in "${!PIDS[@]}"; do
        [[ -n ${RCS[i]:-} ]] && continue
        kill -KILL "${PIDS[i]}" 2>/dev/null || true
        wait "${PIDS[i]}" 2>/dev/null || true
        RCS[i]="still running after $2 s"
        ENDS[i]=$(now_us)
      done
      break
    fi
    sleep 0.05
  done
}
# show NAME: every rank's stderr, indented
show() {
  local f
  for f in "$WORK/$1".r*.err; do
    [[ -s $f ]] || continue
    echo "  ${f##*/}:"
    sed 's/^/  | /' "$f" | tail -n 12
  done
}
reset_case() { PIDS=(); NAMES=(); RCS=(); ENDS=(); }

t_start=$SECONDS
vc up --nodes 2 --ranks-per-node 2 --rate "$RATE" || fail "ci/vcluster up failed (exit $?)"
note "cluster up in $((SECONDS - t_start)) s"

# ---- a. torchrun's variables, torchrun's agent store holding MASTER_PORT
BENCH=(bench allreduce -b 1M -e 4M -f 2 -n 5 -w 1)
port=$(free_port 2) || fail "no free port on node0"
# The stand-in for torchrun's agent store (a TCPStore on MASTER_PORT of the first node)
"$VCLUSTER" --name "$VC_NAME" exec 0 -- python3 -c '
import socket, sys, time
s = socket.socket(); s.bind((sys.argv[1], int(sys.argv[2]))); s.listen()
print("listening", flush=True); time.sleep(120)' "$NODE0" "$port" >"$WORK/store.out" 2>&1 &
STORE_PID=$!
for _ in $(seq 50); do [[ -s $WORK/store.out ]] && break; sleep 0.1; done
grep -q listening "$WORK/store.out" || fail "a: the stand-in store did not listen on $NODE0:$port: $(cat "$WORK/store.out")"

# run_a NAME: the 4 ranks; low="" when in range, else why; fails on anything but a low busbw
run_a() {
  local name=$1 t0 i rows bad busbw v
  reset_case
  rm -f "$WORK/$name.csv"
  t0=$(now_us)
  for r in 0 1 2 3; do
    start "$name" "$r" "$(torchrun_env "$r" "$port" True)" -- "${BENCH[@]}" --csv "$WORK/$name.csv"
  done
  wait_all "$name" 30
  for i in "${!PIDS[@]}"; do
    [[ ${RCS[i]} == 0 ]] || { show "$name"; fail "$name: ${NAMES[i]} exited ${RCS[i]}"; }
  done
  [[ -s $WORK/$name.csv ]] || fail "$name: rank 0 wrote no CSV"
  rows=$(csv_col "$WORK/$name.csv" size_bytes | wc -l)
  [[ $rows == 6 ]] || { cat "$WORK/$name.r0.out"; fail "$name: the CSV has $rows rows, want 6 (1, 2, 4 MiB, out-of-place and in-place)"; }
  bad=$(csv_col "$WORK/$name.csv" size_bytes,in_place,wrong,checked | awk -F'\t' '$3 != "0" || $4 == "0"')
  [[ -z $bad ]] || fail "$name: rows with wrong != 0 or nothing checked (size in_place wrong checked): ${bad//$'\n'/; }"
  for v in launch=torchrun backend=gloo ranks=4 nodes=2; do
    bad=$(csv_col "$WORK/$name.csv" "${v%%=*}" | sort -u | tr '\n' ' ')
    [[ $bad == "${v#*=} " ]] || fail "$name: the CSV's ${v%%=*} is '$bad', want ${v#*=}"
  done
  grep -q '^# Launch: torchrun (torchrun environment)' "$WORK/$name.r0.out" ||
    fail "$name: the header does not say '# Launch: torchrun (torchrun environment)': $(grep '^# Launch' "$WORK/$name.r0.out")"
  grep -q '^# Hosts: node0 (ranks 0-1), node1 (ranks 2-3)' "$WORK/$name.r0.out" ||
    fail "$name: the header does not say node0 (ranks 0-1), node1 (ranks 2-3): $(grep '^# Hosts' "$WORK/$name.r0.out")"
  low=""
  while read -r busbw; do
    awk -v b="$busbw" -v l="$LINK" -v m="$MAX_FRACTION" 'BEGIN {exit !(b <= m * l)}' ||
      fail "$name: busbw $busbw GB/s is above $MAX_FRACTION x the $LINK GB/s link: the measurement is wrong"
    # (the lowest figure is the one named: the rows come sorted)
    [[ -n $low ]] || awk -v b="$busbw" -v l="$LINK" -v m="$MIN_FRACTION" 'BEGIN {exit !(b >= m * l)}' ||
      low="busbw $busbw GB/s is below $MIN_FRACTION x the $LINK GB/s link"
  done < <(csv_col "$WORK/$name.csv" busbw_GBps | sort -g)
  note "$name: 4 ranks exit 0, 6 rows, #wrong 0, launch torchrun, gloo, 4 ranks on 2 nodes, busbw" \
    "$(csv_col "$WORK/$name.csv" busbw_GBps | sort -g | awk -v l="$LINK" 'NR == 1 {lo = $1} {hi = $1}
      END {printf "%.3f-%.3f GB/s (%.2f-%.2f x the link)", lo, hi, lo / l, hi / l}') in $(secs "$t0" "$(now_us)") s"
  none_left "$name"
}
run_a a_torchrun
if [[ -n $low ]]; then
  echo "WARNING: a_torchrun: $low; measuring once more (other load lowers it)" >&2
  run_a a_torchrun_again
  [[ -z $low ]] || fail "a_torchrun: $low (twice)"
fi
kill -KILL "$STORE_PID" 2>/dev/null || true
wait "$STORE_PID" 2>/dev/null || true
STORE_PID=""

# ---- b. a PyTorchJob's variables, rank 3 never started
reset_case
port=$(free_port) || fail "no free port on node0"
t0=$(now_us)
for r in 0 1 2; do
  RDV_TIMEOUT=3 start b_missing "$r" "$(pytorchjob_env "$r" "$port")" -- "${BENCH[@]}"
done
wait_all b_missing 15
note "b_missing: ranks 0-2 of 4 started, rank 0's stderr:"
sed 's/^/  | /' "$WORK/b_missing.r0.err"
for i in "${!PIDS[@]}"; do
  took=$(secs "$t0" "${ENDS[i]}")
  [[ ${RCS[i]} == 3 ]] || { show b_missing; fail "b_missing: ${NAMES[i]} exited ${RCS[i]} (after ${took} s), want 3"; }
  awk -v t="$took" 'BEGIN {exit !(t <= 3 + 5)}' || fail "b_missing: ${NAMES[i]} took ${took} s to exit (want <= 3 + 5 s)"
done
want="rank 3 of 4 did not arrive within 3 s (rendezvous at $NODE0:$port"
grep -qF "$want" "$WORK/b_missing.r0.err" || fail "b_missing: rank 0's stderr does not say '$want'"
note "b_missing: ranks 0-2 exit 3 after $(for i in "${!PIDS[@]}"; do secs "$t0" "${ENDS[i]}"; echo; done |
  sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}') s"
none_left b_missing

# ---- c. rank 3 killed with SIGKILL during a long run
reset_case
port=$(free_port) || fail "no free port on node0"
for r in 0 1 2 3; do
  start c_kill "$r" "$(torchrun_env "$r" "$port" False)" -- \
    bench allreduce -b 64K -e 64K -n 1000000 -w 1 -T "$KILL_T"
done
# rank 3's ccscope inside node1 (found as the node's processes are, not by the pid we hold)
victim=""
deadline=$((SECONDS + 10))
while [[ -z $victim ]] && ((SECONDS < deadline)); do
  for pid in $(ip netns pids "ccvc-$VC_NAME-n1" 2>/dev/null); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == ccscope ]] || continue
    grep -qxzs RANK=3 "/proc/$pid/environ" && victim=$pid
  done
  sleep 0.1
done
[[ -n $victim ]] || { show c_kill; fail "c_kill: rank 3 never ran on node1"; }
[[ $victim == "${PIDS[3]}" ]] || note "c_kill: (rank 3's ccscope is pid $victim, started as ${PIDS[3]})"
sleep 2   # the rendezvous and gloo's connections done, well inside the timed loop
for i in 0 1 2 3; do
  kill -0 "${PIDS[i]}" 2>/dev/null || { show c_kill; fail "c_kill: ${NAMES[i]} ended before rank 3 was killed"; }
done
kill -KILL "$victim"
t0=$(now_us)
wait_all c_kill $((KILL_T + 5 + 5))
note "c_kill: killed rank 3 (node1, pid $victim); exits (rank: code after s):" \
  "$(for i in 0 1 2 3; do printf '%s: %s after %s; ' "${NAMES[i]}" "${RCS[i]}" "$(secs "$t0" "${ENDS[i]}")"; done)"
show c_kill
for i in 0 1 2; do
  took=$(secs "$t0" "${ENDS[i]}")
  [[ ${RCS[i]} =~ ^[0-9]+$ ]] || fail "c_kill: ${NAMES[i]} was ${RCS[i]} (want it to end within -T $KILL_T + 5 s)"
  awk -v t="$took" -v l="$((KILL_T + 5))" 'BEGIN {exit !(t <= l)}' ||
    fail "c_kill: ${NAMES[i]} took ${took} s to end after the kill (want <= -T $KILL_T + 5 s)"
  ((RCS[i] != 0)) || fail "c_kill: ${NAMES[i]} exited 0 after rank 3 was killed"
done
want="ccscope: rank 3 (node1, pid $victim) died"
first=$(cat "$WORK"/c_kill.r[012].err | grep -m1 -o 'ccscope: rank [0-9]* ([^)]*) died' || true)
[[ $first == "$want" ]] ||
  fail "c_kill: the first rank named dead is '${first:-none}', want '$want'"
none_left c_kill

# ---- the cluster down, nothing left
reset_case
vc down || fail "ci/vcluster down failed"
[[ -z $(our_leftovers) ]] || fail "left behind: $(our_leftovers | tr '\n' ' ')"
note "the whole test took $((SECONDS - t_start)) s"
note PASS
