#!/usr/bin/env bash
# `ccscope topo` on this machine, one rank, no launcher: the live probe says
# which sources it read, finds no GPU where NVML is absent (and says so), and
# finds eth0 with the speed sysfs gives (a virtio NIC gives none: then the rate
# must be unknown, never invented).
set -euo pipefail
ccscope=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$ccscope" topo --json >"$out/topo.json" 2>"$out/err" || { cat "$out/err"; exit 1; }
"$ccscope" topo >"$out/topo.txt" 2>>"$out/err" || { cat "$out/err"; exit 1; }
python3 - "$out/topo.json" "$out/topo.txt" <<'PY'
import json, os, sys
node = json.load(open(sys.argv[1]))["nodes"][0]
text = open(sys.argv[2]).read()
sources = node["sources"]
assert set(sources) >= {"hwloc", "nvml", "sysfs", "nccl"}, sources
assert sources["sysfs"]["read"], sources
have_driver = os.path.exists("/dev/nvidiactl")
if not have_driver:
    assert node["gpus"] == [], node["gpus"]
    assert not sources["nvml"]["read"] and sources["nvml"]["detail"], sources["nvml"]
    assert "no GPU found" in text, text
names = {n["name"]: n for n in node["nics"]}
if not os.path.exists("/sys/class/net/eth0"):
    print("no eth0 here: NIC checks skipped")
else:
    eth0 = names["eth0"]
    speed = open("/sys/class/net/eth0/speed").read().strip() if os.access("/sys/class/net/eth0/speed", os.R_OK) else ""
    try:
        want = int(speed) / 1000 if int(speed) > 0 else 0
    except ValueError:
        want = 0
    assert eth0["rate_Gbps"] == want, (eth0, speed)
    assert eth0["state"] == open("/sys/class/net/eth0/operstate").read().strip(), eth0
    print("eth0:", eth0["kind"], eth0["state"], "rate", eth0["rate_Gbps"] or "unknown (sysfs speed %s)" % speed,
          "MTU", eth0["mtu"], eth0["driver"])
print("sources:", {k: v["read"] for k, v in sources.items()}, "GPUs:", len(node["gpus"]))
PY
