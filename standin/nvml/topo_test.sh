#!/usr/bin/env bash
# The real `ccscope topo` reading NVML from the stand-in (standin/nvml/README.md),
# found the way the driver's library is: by its soname, libnvidia-ml.so.1, on
# LD_LIBRARY_PATH. Two machines of machines/: the 8-GPU HGX H100 (NVSwitch) and
# the project's H200 VM; for each, what `ccscope topo` prints and its JSON.
#
#   topo_test.sh CCSCOPE STANDIN_LIB_DIR MACHINES_DIR
#
# --backend mpi: the probe does not ask the CUDA runtime which GPU a rank
# drives, so the test reads the same whether libcudart.so.13 is the real one
# (no GPU here) or the CUDA stand-in. --no-hwloc and an empty --sysfs root: the
# machine under test is NVML's alone, not this host's PCI tree or NICs.
set -u
ccscope=$1 lib_dir=$2 machines=$3

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sys"

failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Only the stand-in's own variable: nothing of the caller's NVML or NCCL setup.
unset CCSCOPE_NVML_LIBRARY CCSCOPE_FAKE_NVML_CONFIG
while read -r name; do unset "$name"; done < <(compgen -e | grep '^NCCL_')

# run MACHINE OUT [FLAGS...]: ccscope topo on machines/MACHINE.conf, stdout to OUT.
run() {
  local machine=$1 out=$2
  shift 2
  local rc=0
  LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    CCSCOPE_STANDIN_NVML="$machines/$machine.conf" \
    timeout 30 "$ccscope" topo --backend mpi --no-hwloc --sysfs "$work/sys" "$@" \
    >"$out" 2>"$out.err" || rc=$?
  if ((rc != 0)); then
    fail "$machine: ccscope topo $* exited $rc"
    cat "$out.err"
  fi
}

# expect_line FILE REGEX WHAT: a line of FILE matches REGEX (extended).
expect_line() {
  grep -Eq -- "$2" "$1" || fail "$3: no line matching /$2/"
}

# The GPU matrix of FILE: N rows GPU0..GPU(N-1), N columns, X on the diagonal
# and TOKEN everywhere else. Prints what differs.
check_matrix() {
  local file=$1 gpus=$2 token=$3 what=$4 problems
  problems=$(awk -v n="$gpus" -v token="$token" '
    /^ +GPU0( |$)/ && !header { header = 1; if (NF != n) printf "header has %d GPU columns\n", NF }
    /^GPU[0-9]+ / {
      row = substr($1, 4) + 0; rows++
      if (row != rows - 1) printf "row %s out of order\n", $1
      if (NF - 1 != n) printf "%s has %d columns\n", $1, NF - 1
      for (j = 2; j <= NF; ++j) {
        want = (j - 2 == row) ? "X" : token
        if ($j != want) printf "%s column GPU%d: %s, not %s\n", $1, j - 2, $j, want
      }
    }
    END { if (rows != n) printf "%d GPU rows, not %d\n", rows, n }' "$file")
  [[ -z $problems ]] || fail "$what: the GPU matrix: $problems"
}

# --- the 8-GPU HGX H100: NV18 between every pair, through the NVSwitches -----
h100="hgx-h100-8gpu"
run $h100 "$work/h100.txt"
expect_line "$work/h100.txt" '^ +nvml +read +NVML, driver 550\.54\.15, 8 GPUs$' "$h100: sources"
check_matrix "$work/h100.txt" 8 NV18 $h100
bus_ids=(1b 43 52 61 9d c3 d1 df)
for gpu in 0 1 2 3 4 5 6 7; do
  expect_line "$work/h100.txt" \
    "^ +$gpu +NVIDIA H100 80GB HBM3 +0000:${bus_ids[gpu]}:00\.0 +gen5 x16 / gen5 x16$" \
    "$h100: GPU $gpu in the GPU list"
done
pairs=$(grep -Ec '^ +[0-7]-[0-7] +NV18 +P2P +450(\.0+)? +18 x NVLink4 via NVSwitch$' "$work/h100.txt")
[[ $pairs == 28 ]] || fail "$h100: $pairs of the 28 GPU pairs read NV18, 450 GB/s, 18 x NVLink4 via NVSwitch"

run $h100 "$work/h100.json" --json
python3 - "$work/h100.json" <<'EOF' || fail "$h100: the JSON (above)"
import json, sys
node = json.load(open(sys.argv[1]))["nodes"][0]
problems = []
def want(what, got, expected):
    if got != expected:
        problems.append(f"{what}: {got!r}, not {expected!r}")
want("driver_version", node["driver_version"], "550.54.15")
want("cuda_version", node["cuda_version"], "12.4")
want("GPUs", len(node["gpus"]), 8)
switches = set()
for gpu in node["gpus"]:
    links = gpu["nvlinks"]
    want(f"GPU {gpu['index']} links", sorted(l["link"] for l in links), list(range(18)))
    want(f"GPU {gpu['index']} links active, to a switch, NVLink4",
         {(l["active"], l["remote_is_switch"], l["version"]) for l in links}, {(True, True, 4)})
    want(f"GPU {gpu['index']} compute capability", gpu["compute_capability"], 90)
    per_switch = {}
    for l in links:
        per_switch[l["remote_pci_bus_id"]] = per_switch.get(l["remote_pci_bus_id"], 0) + 1
    want(f"GPU {gpu['index']} links per switch", sorted(per_switch.values()), [4, 4, 5, 5])
    switches |= set(per_switch)
want("NVSwitches", len(switches), 4)
# PCIe under the NVLinks: NODE inside a socket (GPUs 0-3, 4-7), SYS across.
ancestors = {(a["gpu_a"], a["gpu_b"]): a["level"] for a in node["gpu_ancestors"]}
expected = {(a, b): "NODE" if a // 4 == b // 4 else "SYS" for a in range(8) for b in range(a + 1, 8)}
want("gpu_ancestors", ancestors, expected)
paths = {(p["gpu_a"], p["gpu_b"]): (p["path"], p["expected_GBps"]) for p in node["gpu_pairs"]}
want("gpu_pairs", paths, {pair: ("NV18", 450.0) for pair in expected})
want("nvml source", node["sources"]["nvml"], {"read": True, "detail": "NVML, driver 550.54.15, 8 GPUs"})
for problem in problems:
    print("  " + problem)
sys.exit(1 if problems else 0)
EOF

# --- the H200 VM of ../shared/DEVICE.md: one GPU, no NVLink ------------------
h200="h200-vm"
run $h200 "$work/h200.txt"
expect_line "$work/h200.txt" '^ +nvml +read +NVML, driver 580\.159\.04, 1 GPU$' "$h200: sources"
check_matrix "$work/h200.txt" 1 - $h200
expect_line "$work/h200.txt" '^ +0 +NVIDIA H200 +0000:00:06\.0 +gen5 x16 / gen5 x16$' "$h200: the GPU list"
! grep -Eq '^ +[0-9]+-[0-9]+ ' "$work/h200.txt" || fail "$h200: a GPU pair with one GPU"

run $h200 "$work/h200.json" --json
python3 - "$work/h200.json" <<'EOF' || fail "$h200: the JSON (above)"
import json, sys
node = json.load(open(sys.argv[1]))["nodes"][0]
gpus = node["gpus"]
got = (node["driver_version"], node["cuda_version"], len(gpus), node["gpu_pairs"], node["gpu_ancestors"])
expected = ("580.159.04", "13.0", 1, [], [])
if got != expected:
    print(f"  (driver, CUDA, GPUs, pairs, ancestors): {got!r}, not {expected!r}")
    sys.exit(1)
gpu = gpus[0]
got = (gpu["name"], gpu["uuid"], gpu["pci_bus_id"], gpu["compute_capability"], gpu["nvlinks"])
expected = ("NVIDIA H200", "GPU-65ab6dfb-face-c420-70e5-561e9c3d3860", "0000:00:06.0", 90, [])
if got != expected:
    print(f"  GPU 0 (name, uuid, bus id, cc, nvlinks): {got!r}, not {expected!r}")
    sys.exit(1)
EOF

if ((failures)); then
  for out in "$work"/h100.txt "$work"/h200.txt; do
    echo "--- $(basename "$out"):"
    cat "$out"
  done
  echo "standin.nvml.topo: $failures check(s) failed"
  exit 1
fi
echo "standin.nvml.topo: ccscope topo read both machines through the NVML stand-in"
