// The tables of the JSON documents ccscope writes whole (document_kind.h). Their writers:
// topo/src/topology_json.cpp, diag/src/nccl_log_output.cpp, training_probe/src/advisor.cpp.
#include "ccscope/records/document_kind.h"

namespace ccscope::records {
namespace {

using T = JsonType;

DocumentKey key(std::string path, JsonType type, std::string meaning) {
  return {std::move(path), type, false, std::move(meaning)};
}
// A key whose value is null where it is unknown.
DocumentKey or_null(std::string path, JsonType type, std::string meaning) {
  return {std::move(path), type, true, std::move(meaning)};
}

std::vector<DocumentKey> topology_keys() {
  const std::string n = "nodes[].", g = "nodes[].gpus[].", l = "nodes[].gpus[].nvlinks[].",
                    c = "nodes[].nics[].";
  return {
      key("schema", T::kString, "\"ccscope.topo/1\""),
      key("nodes", T::kObjects, "one per node; figures are 0 and texts \"\" when unknown"),
      key(n + "hostname", T::kString, "the node's host name"),
      key(n + "numa_nodes", T::kInteger, "NUMA nodes"),
      key(n + "packages", T::kInteger, "CPU packages (sockets)"),
      key(n + "cores", T::kInteger, "physical cores"),
      key(n + "pus", T::kInteger, "hardware threads"),
      key(n + "cpu_model", T::kString, "the CPU's model name"),
      key(n + "driver_version", T::kString, "NVIDIA driver version"),
      key(n + "cuda_version", T::kString, "CUDA driver API version, \"13.0\""),
      key(n + "nccl_version", T::kString, "the NCCL ccscope runs with; \"\" none"),
      key(n + "gpus", T::kObjects, "the node's NVIDIA GPUs"),
      key(g + "index", T::kInteger, "the GPU's index (NVML's, else the reader's order)"),
      key(g + "name", T::kString, "product name"),
      key(g + "uuid", T::kString, "NVML's UUID"),
      key(g + "pci_bus_id", T::kString, "PCI address, domain:bus:device.function"),
      key(g + "numa_node", T::kInteger, "the NUMA node it is attached to; -1 unknown"),
      key(g + "package", T::kInteger, "the CPU package it is attached to; -1 unknown"),
      key(g + "pci_path", T::kStrings,
          "the PCI bridges above it, nearest first: \"bridge:ID\", ..., \"host:ID\""),
      key(g + "pcie_generation", T::kInteger, "the PCIe link's current generation"),
      key(g + "pcie_width", T::kInteger, "the PCIe link's current lanes"),
      key(g + "pcie_max", T::kObject, "the PCIe link's maximum (NVML); {} when unknown"),
      key(g + "pcie_max.generation", T::kInteger, "maximum generation"),
      key(g + "pcie_max.width", T::kInteger, "maximum lanes"),
      key(g + "compute_capability", T::kInteger, "90 for sm_90"),
      key(g + "nvlinks", T::kObjects, "its NVLinks"),
      key(l + "link", T::kInteger, "the link's number on the GPU"),
      key(l + "active", T::kBoolean, "the link is up"),
      key(l + "version", T::kInteger, "NVLink version"),
      key(l + "remote_pci_bus_id", T::kString, "the GPU or NVSwitch at the other end"),
      key(l + "remote_is_switch", T::kBoolean, "the other end is an NVSwitch"),
      key(l + "bandwidth_GBps", T::kNumber, "the link's rate per direction, GB/s"),
      key(n + "nics", T::kObjects, "the node's network ports"),
      key(c + "name", T::kString, "\"mlx5_0:1\" (RDMA device and port) or the interface"),
      key(c + "kind", T::kString, "\"ethernet\", \"infiniband\", \"roce\" or \"other\""),
      key(c + "rate_Gbps", T::kNumber, "line rate, Gbit/s"),
      key(c + "shaped_Gbps", T::kNumber, "the rate of a tc shaper on it, Gbit/s; 0 none"),
      key(c + "effective_Gbps", T::kNumber, "what it can carry: the lower of the two"),
      key(c + "state", T::kString, "link state as the source reports it"),
      key(c + "mtu", T::kInteger, "MTU, bytes"),
      key(c + "driver", T::kString, "kernel driver"),
      key(c + "netdev", T::kString, "its network interface"),
      key(c + "rdma_device", T::kString, "its RDMA device"),
      key(c + "has_gid", T::kBoolean, "a RoCE port with a GID"),
      key(c + "virtual", T::kBoolean, "no PCI device behind it (veth, bridge, ...)"),
      key(c + "pci_bus_id", T::kString, "PCI address"),
      key(c + "numa_node", T::kInteger, "the NUMA node it is attached to; -1 unknown"),
      key(c + "pci_path", T::kStrings, "the PCI bridges above it, as a GPU's"),
      key(n + "gpu_pairs", T::kObjects, "every pair of the node's GPUs"),
      key(n + "gpu_pairs[].gpu_a", T::kInteger, "one GPU's index"),
      key(n + "gpu_pairs[].gpu_b", T::kInteger, "the other's"),
      key(n + "gpu_pairs[].path", T::kString,
          "nvidia-smi topo -m's token: \"NV#\", \"PIX\", \"PXB\", \"PHB\", \"NODE\", \"SYS\""),
      key(n + "gpu_pairs[].p2p", T::kBoolean, "NCCL would use P2P between them"),
      key(n + "gpu_pairs[].expected_GBps", T::kNumber, "what the path should carry, GB/s"),
      key(n + "gpu_pairs[].basis", T::kString, "what the expected figure is made of"),
      key(n + "gpu_nic_paths", T::kObjects, "how each GPU reaches each NIC"),
      key(n + "gpu_nic_paths[].gpu", T::kInteger, "the GPU's index"),
      key(n + "gpu_nic_paths[].nic", T::kString, "the NIC's name"),
      key(n + "gpu_nic_paths[].path", T::kString, "\"PIX\" ... \"SYS\"; \"?\" unknown"),
      key(n + "gpu_ancestors", T::kObjects,
          "NVML's common-ancestor level of GPU pairs, used where the PCI tree is unknown"),
      key(n + "gpu_ancestors[].gpu_a", T::kInteger, "one GPU's index"),
      key(n + "gpu_ancestors[].gpu_b", T::kInteger, "the other's"),
      key(n + "gpu_ancestors[].level", T::kString, "\"PIX\", \"PXB\", \"PHB\", \"NODE\", \"SYS\""),
      key(n + "sources", T::kObjectMap, "per source (hwloc, nvml, sysfs, nccl): what it gave"),
      key(n + "sources.*.read", T::kBoolean, "the source was read"),
      key(n + "sources.*.detail", T::kString, "what it gave, or why it gave nothing"),
      key(n + "notes", T::kStrings, "what a reader saw but could not use"),
      key("node_pairs", T::kObjects, "every pair of nodes"),
      key("node_pairs[].host_a", T::kString, "one node"),
      key("node_pairs[].host_b", T::kString, "the other"),
      key("node_pairs[].transport", T::kString,
          "as NCCL would connect them: \"IB\", \"RoCE\", \"socket\" or \"none\""),
      key("node_pairs[].device_a", T::kString, "the port host_a would use"),
      key("node_pairs[].device_b", T::kString, "the port host_b would use"),
      key("node_pairs[].expected_GBps", T::kNumber, "the lower of the two ends' rates, GB/s"),
      key("node_pairs[].basis", T::kString, "what the expected figure is made of"),
      key("measured", T::kObjects, "the pairs `topo --measure` measured"),
      key("measured[].endpoint_a", T::kString, "\"node0\" (a node) or \"node0/GPU0\" (a GPU)"),
      key("measured[].endpoint_b", T::kString, "the other end"),
      key("measured[].path", T::kString, "\"socket over eth0\", \"NV4\", \"PIX\", ..."),
      key("measured[].round", T::kInteger, "the schedule's round it ran in, from 0"),
      key("measured[].expected_GBps", T::kNumber, "GB/s; 0 unknown"),
      key("measured[].measured_GBps", T::kNumber, "per direction, the slower one, GB/s"),
      key("measured[].below_threshold", T::kBoolean, "measured < threshold x expected"),
      key("threshold", T::kNumber, "the fraction of the expected a measured pair must reach"),
      key("environment", T::kTextMap, "the NCCL_* variables that choose paths, as set"),
      key("findings", T::kObjects, "what the topology shows that needs a look"),
      key("findings[].severity", T::kString, "\"info\", \"warn\" or \"fail\""),
      key("findings[].host", T::kString, "the node; \"\" for the cluster"),
      key("findings[].check", T::kString, "the check's name"),
      key("findings[].message", T::kString, "what was found"),
      key("findings[].remedy", T::kString, "what to do"),
  };
}

std::vector<DocumentKey> nccl_log_keys() {
  const std::string r = "ranks[].", k = "communicators[].links[].", f = "findings[].";
  return {
      key("schema", T::kString, "\"ccscope.nccl_log/1\""),
      key("inputs", T::kObjects, "one per file read"),
      key("inputs[].name", T::kString, "the file"),
      key("inputs[].bytes", T::kInteger, "its size"),
      key("inputs[].lines", T::kInteger, "non-empty lines"),
      key("inputs[].nccl_lines", T::kInteger, "NCCL lines parsed"),
      key("inputs[].other_lines", T::kInteger, "other programs' output"),
      key("inputs[].garbled_lines", T::kInteger, "NCCL lines cut or interleaved, not read"),
      key("inputs[].binary", T::kBoolean, "NUL bytes or mostly control bytes"),
      key("inputs[].truncated_last_line", T::kBoolean, "no final newline"),
      key("inputs[].notes", T::kStrings, "what else the reader says of the file"),
      key("summary", T::kObject, "the job as the logs show it"),
      key("summary.ranks", T::kInteger, "ranks seen"),
      key("summary.nodes", T::kInteger, "nodes"),
      or_null("summary.nodes_source", T::kString, "\"nNodes\" or \"hosts\": what nodes counts"),
      key("summary.hosts", T::kStrings, "host names"),
      key("summary.nccl_versions", T::kStrings, "NCCL versions"),
      or_null("summary.network", T::kString,
              "\"IB\", \"Socket\", \"AWS Libfabric\", ..., or \"mixed\""),
      or_null("summary.network_source", T::kString, "\"Using network\" or \"channels\""),
      or_null("summary.net_plugin", T::kString, "the network plugin loaded"),
      key("summary.ib_devices", T::kStrings, "for example \"mlx5_0:1/IB\""),
      key("summary.socket_interfaces", T::kStrings, "NET/Socket's interfaces"),
      key("summary.bootstrap_interfaces", T::kStrings, "the bootstrap's interfaces"),
      or_null("summary.gdr", T::kString, "GPUDirect RDMA: \"enabled\", \"disabled\" or \"mixed\""),
      key("ranks", T::kObjects, "one per process and GPU, sorted by rank"),
      or_null(r + "rank", T::kInteger, "in the largest communicator"),
      key(r + "nranks", T::kInteger, "that communicator's size"),
      key(r + "host", T::kString, "host name"),
      key(r + "pid", T::kInteger, "process id"),
      key(r + "cuda_device", T::kInteger, "CUDA device; -1 unknown"),
      or_null(r + "nccl_version", T::kString, "NCCL version"),
      or_null(r + "nccl_cuda", T::kString, "the CUDA version NCCL was built for"),
      or_null(r + "cuda_driver", T::kString, "the CUDA driver version"),
      key(r + "init", T::kString, "how far its init got (diag.md, the init states)"),
      or_null(r + "network", T::kString, "the network it used"),
      or_null(r + "net_plugin", T::kString, "its network plugin"),
      key(r + "plugin_failures", T::kStrings, "plugins that failed to load"),
      or_null(r + "bootstrap_interface", T::kString, "the bootstrap's interface"),
      or_null(r + "bootstrap_address", T::kString, "the bootstrap's address"),
      key(r + "ib_devices", T::kStrings, "IB devices NCCL listed"),
      key(r + "ib_no_device", T::kBoolean, "NCCL found no IB device"),
      key(r + "socket_interfaces", T::kStrings, "NET/Socket's interfaces"),
      key(r + "gdr_enabled_hcas", T::kStrings, "HCAs with GPUDirect RDMA"),
      key(r + "gdr_disabled_hcas", T::kStrings, "HCAs without it"),
      or_null(r + "nvls_support", T::kBoolean, "NVLS (NVLink SHARP) supported"),
      key(r + "nvls_connected", T::kBoolean, "NVLS connected"),
      key(r + "collnet", T::kStrings, "CollNet paths, \"COLLNET/SHARP/0/GDRDMA\""),
      key(r + "environment", T::kTextMap, "NCCL_* variables it printed"),
      key(r + "communicators", T::kObjects, "the communicators it joined"),
      key(r + "communicators[].comm", T::kString, "the communicator's pointer"),
      or_null(r + "communicators[].comm_id", T::kString, "its commId"),
      or_null(r + "communicators[].rank", T::kInteger, "the rank in it"),
      key(r + "communicators[].nranks", T::kInteger, "its size"),
      key(r + "communicators[].init", T::kString, "how far its init got"),
      key(r + "sources", T::kStrings, "the input files its lines came from"),
      key(r + "lines", T::kInteger, "its lines"),
      key(r + "warn_lines", T::kInteger, "its WARN lines"),
      key("communicators", T::kObjects, "one per communicator, sorted by size"),
      or_null("communicators[].id", T::kString, "the commId; null before NCCL printed one"),
      key("communicators[].nranks", T::kInteger, "its size"),
      key("communicators[].nnodes", T::kInteger, "from nNodes; 0 unknown"),
      key("communicators[].ranks_seen", T::kIntegers, "ranks whose init lines are in the logs"),
      key("communicators[].links", T::kObjects, "the connections NCCL set up"),
      key(k + "from", T::kInteger, "sending rank"),
      key(k + "to", T::kInteger, "receiving rank"),
      key(k + "transport", T::kString, "the class: P2P, SHM, NET, ..."),
      key(k + "details", T::kStrings, "as logged, \"P2P/CUMEM/read\", \"NET/IB/GDRDMA\""),
      key(k + "channels", T::kInteger, "distinct channels"),
      or_null(k + "gdrdma_send", T::kBoolean, "NET only: GPUDirect RDMA on the send side"),
      or_null(k + "gdrdma_receive", T::kBoolean, "NET only: on the receive side"),
      key(k + "pxn_proxies", T::kIntegers, "PXN: the ranks the sends go through"),
      key("warnings", T::kObjects, "one per group of WARN lines"),
      key("warnings[].pattern", T::kString, "the line with its numbers as #"),
      key("warnings[].example", T::kString, "one such line"),
      key("warnings[].first_seen", T::kString, "\"file:line\""),
      key("warnings[].count", T::kInteger, "lines"),
      key("warnings[].hosts", T::kStrings, "hosts that printed it"),
      key("warnings[].ranks", T::kIntegers, "ranks that printed it"),
      key("findings", T::kObjects, "ordered fail, then warn, then info"),
      key(f + "severity", T::kString, "\"fail\", \"warn\" or \"info\""),
      key(f + "code", T::kString, "the finding's name"),
      or_null(f + "host", T::kString, "where"),
      or_null(f + "rank", T::kInteger, "which rank"),
      or_null(f + "peer", T::kString, "the other end"),
      key(f + "message", T::kString, "what the logs show"),
      or_null(f + "cause", T::kString, "the likely cause"),
      or_null(f + "remedy", T::kString, "what to do"),
      or_null(f + "role", T::kString,
              "\"root\", \"secondary\" or \"unknown\"; null when not a failure"),
      key(f + "count", T::kInteger, "occurrences folded into it"),
      key(f + "ranks", T::kIntegers, "ranks it concerns"),
      key(f + "hosts", T::kStrings, "hosts it concerns"),
      key("worst", T::kString, "the worst severity, which gives the exit code"),
  };
}

// A parallel layout, wherever the advice names one.
void add_layout(std::vector<DocumentKey>& keys, const std::string& at, bool nullable) {
  keys.push_back({at, T::kObject, nullable,
                  nullable ? "a layout (keys below); null when there is none" : "the layout"});
  const std::string p = at + ".";
  keys.push_back(key(p + "label", T::kString, "\"pp2 x dp8 zero1\", \"ddp\", ..."));
  keys.push_back(key(p + "tp", T::kInteger, "tensor-parallel degree"));
  keys.push_back(key(p + "pp", T::kInteger, "pipeline stages"));
  keys.push_back(key(p + "dp", T::kInteger, "data-parallel replicas"));
  keys.push_back(key(p + "ep", T::kInteger, "expert-parallel degree"));
  keys.push_back(key(p + "zero", T::kInteger, "ZeRO stage, 0 none"));
  keys.push_back(key(p + "offload", T::kBoolean, "optimizer state offloaded to the host"));
  keys.push_back(key(p + "micro_batches", T::kInteger, "micro-batches per step"));
}

std::vector<DocumentKey> advice_keys() {
  const std::string c = "candidates[].", m = "candidates[].communication[].";
  std::vector<DocumentKey> keys = {
      key("schema", T::kString, "\"ccscope.advice/1\""),
      key("model", T::kObject, "the model the advice is for"),
      key("model.kind", T::kString, "\"transformer\" or \"probe\" (train's MLP)"),
      key("model.parameters", T::kNumber, "parameters"),
      key("model.expert_parameters", T::kNumber, "of which in experts"),
      key("model.active_parameters", T::kNumber, "parameters a token uses"),
      key("model.layers", T::kInteger, "layers"),
      key("model.hidden", T::kInteger, "hidden size"),
      key("model.experts", T::kInteger, "experts per MoE layer"),
      key("model.top_k", T::kInteger, "experts per token"),
      key("model.sequence_length", T::kInteger, "tokens per sample"),
      key("model.global_batch", T::kInteger, "samples per step"),
      key("model.precision", T::kString, "training precision"),
      key("model.optimizer_words", T::kInteger, "optimizer state words per parameter"),
      key("model.flops_per_sample", T::kNumber, "forward and backward FLOPs per sample"),
      key("cluster", T::kObject, "the cluster the advice is for"),
      key("cluster.ranks", T::kInteger, "ranks (GPUs)"),
      key("cluster.ranks_per_node", T::kInteger, "ranks per node"),
      key("cluster.gpu_memory_bytes", T::kNumber, "memory per GPU, bytes"),
      key("cluster.usable_memory_fraction", T::kNumber, "the share of it a layout may use"),
      key("cluster.host_memory_bytes", T::kNumber, "host memory per rank for offload, bytes"),
      key("cluster.pcie_GBps", T::kNumber, "host<->GPU copy rate for offload, GB/s"),
      key("cluster.flops_per_rank", T::kNumber, "compute rate per rank, FLOP/s"),
      key("cluster.compute_seconds", T::kNumber,
          "a measured step's compute time, when given, else 0"),
      key("options", T::kObject, "the flags that shape the estimates"),
      key("options.overlap", T::kBoolean, "DDP/ZeRO traffic overlaps the backward pass"),
      key("options.bucket_bytes", T::kNumber, "DDP/ZeRO bucket, bytes"),
      key("options.tp_across_nodes", T::kBoolean, "tensor-parallel groups may span nodes"),
      key("options.min_micro_batch", T::kInteger, "samples per micro-batch at least"),
  };
  add_layout(keys, "recommended", true);
  keys.push_back(or_null("recommended_index", T::kInteger, "its index in candidates"));
  add_layout(keys, "runner_up", true);
  keys.push_back(or_null("runner_up_index", T::kInteger, "its index in candidates"));
  keys.push_back(key("reason", T::kString, "why the recommendation, in a sentence"));
  keys.push_back(key("rule_of_thumb", T::kObject, "the usual rule, against the estimates"));
  keys.push_back(key("rule_of_thumb.rule", T::kString, "the rule and why it applies"));
  add_layout(keys, "rule_of_thumb.pick", true);
  keys.push_back(key("rule_of_thumb.verdict", T::kString, "how its pick compares"));
  keys.push_back(key("notes", T::kStrings, "assumptions and fallbacks the estimates rest on"));
  keys.push_back(key("candidates", T::kObjects, "every layout estimated"));
  add_layout(keys, c + "layout", false);
  for (DocumentKey k : std::vector<DocumentKey>{
           key(c + "memory_bytes", T::kObject, "memory per rank, bytes"),
           key(c + "memory_bytes.parameters", T::kNumber, "parameters"),
           key(c + "memory_bytes.gradients", T::kNumber, "gradients"),
           key(c + "memory_bytes.optimizer", T::kNumber, "optimizer state"),
           key(c + "memory_bytes.model_states", T::kNumber, "the three above"),
           key(c + "memory_bytes.working", T::kNumber, "buffers and workspace"),
           key(c + "memory_bytes.activations", T::kNumber, "activations kept for backward"),
           key(c + "memory_bytes.total", T::kNumber, "on the GPU"),
           key(c + "memory_bytes.host", T::kNumber, "offloaded to the host"),
           key(c + "fits", T::kBoolean, "fits the usable memory"),
           key(c + "why_not", T::kString, "why it does not fit or cannot run; \"\" when it does"),
           key(c + "compute_s", T::kNumber, "compute per step, s"),
           key(c + "bubble_s", T::kNumber, "pipeline bubble per step, s"),
           key(c + "comm_s", T::kNumber, "communication per step, s"),
           key(c + "exposed_comm_s", T::kNumber, "the part not hidden under compute, s"),
           key(c + "offload_s", T::kNumber, "host<->GPU copies per step, s"),
           key(c + "step_s", T::kNumber, "the estimated step, s"),
           key(c + "communication", T::kObjects, "each kind of communication in a step"),
           key(m + "group", T::kString, "the group: \"dp\", \"tp\", \"pp\", \"ep\""),
           key(m + "collective", T::kString,
               "\"all_reduce\", \"all_gather\", \"reduce_scatter\", ..."),
           key(m + "scope", T::kString, "\"intra-node\" or \"inter-node\""),
           key(m + "group_size", T::kInteger, "ranks in the group"),
           key(m + "operation_bytes", T::kNumber, "bytes per operation"),
           key(m + "operations", T::kNumber, "operations per step"),
           key(m + "busbw_GBps", T::kNumber, "the busbw it runs at, GB/s"),
           key(m + "seconds", T::kNumber, "per step, s"),
           key(m + "exposed_seconds", T::kNumber, "not hidden under compute, s"),
           key(m + "fallback", T::kString, "which curve stood in for a missing one; \"\" none"),
       })
    keys.push_back(std::move(k));
  return keys;
}

}  // namespace

const DocumentKind& topology_document_kind() {
  static const DocumentKind kind{"ccscope.topo", 1,
                                 "`ccscope topo --json` (and what `topo --from` reads back).",
                                 topology_keys()};
  return kind;
}

const DocumentKind& nccl_log_document_kind() {
  static const DocumentKind kind{"ccscope.nccl_log", 1,
                                 "`ccscope diag nccl-log --json/--json-file`.", nccl_log_keys()};
  return kind;
}

const DocumentKind& advice_document_kind() {
  static const DocumentKind kind{"ccscope.advice", 1, "`ccscope advise --json`.", advice_keys()};
  return kind;
}

std::vector<const DocumentKind*> document_kinds() {
  return {&topology_document_kind(), &nccl_log_document_kind(), &advice_document_kind()};
}

}  // namespace ccscope::records
