#pragma once
// NICs through sysfs and the kernel's traffic-control state.
#include <string>

#include "ccscope/topo/topology.h"

namespace ccscope::topo {

// Reads ROOT/class/net/* (speed, operstate, mtu, driver, type, the PCI device
// behind it, NUMA node) and ROOT/class/infiniband/*/ports/* (state, rate,
// link_layer: InfiniBand or Ethernet = RoCE, GID 0, the port's netdev). RDMA
// ports are NICs named "DEVICE:PORT"; a network interface of an RDMA device
// names it in rdma_device. NICs already in `into` (same name, from hwloc) are
// completed. Returns the "sysfs" SourceStatus. `root` is "/sys" except in tests.
SourceStatus read_sysfs_nics(HostTopology& into, const std::string& root = "/sys");

// The rate cap (Gbit/s) of the egress shapers (tc tbf qdiscs, any depth) on
// interface `ifname` in this network namespace, read over rtnetlink; 0 when
// there is none or it cannot be read.
double egress_shaped_Gbps(const std::string& ifname);

}  // namespace ccscope::topo
