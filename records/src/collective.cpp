#include "ccscope/records/collective.h"

#include <algorithm>

namespace ccscope {
namespace {

std::vector<CollectiveDescription> make_descriptions() {
  return {
      {Collective::kAllReduce, "allreduce", "all-reduce", "all_reduce_perf", "ncclAllReduce",
       "osu_allreduce", {"Allreduce"}, true, false, true, false, ExpectedRule::kReducedElement,
       "size = bytes reduced per rank (send = receive buffer size)", "2(n-1)/n",
       NcclTestsOp::kReduction, "redop"},
      {Collective::kAllGather, "allgather", "all-gather", "all_gather_perf", "ncclAllGather",
       "osu_allgather", {"Allgather"}, false, false, true, true, ExpectedRule::kGatheredBlocks,
       "size = the full OUTPUT per rank (ranks x block); each block rounded down to a multiple "
       "of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, ""},
      {Collective::kReduceScatter, "reducescatter", "reduce-scatter", "reduce_scatter_perf",
       "ncclReduceScatter", "osu_reduce_scatter", {"Reduce_scatter", "Reduce Scatter"}, true,
       false, true, false, ExpectedRule::kReducedBlock,
       "size = the full INPUT per rank (ranks x block); each block rounded down to a multiple of "
       "16 bytes",
       "(n-1)/n", NcclTestsOp::kReduction, "redop"},
      {Collective::kBroadcast, "broadcast", "broadcast", "broadcast_perf", "ncclBroadcast",
       "osu_bcast", {"Broadcast", "Bcast"}, false, true, true, false, ExpectedRule::kRootInput,
       "size = bytes broadcast from the root", "1", NcclTestsOp::kNone, "root"},
      {Collective::kAllToAll, "alltoall", "all-to-all", "alltoall_perf", "ncclAlltoAll",
       "osu_alltoall", {"All-to-All Personalized Exchange", "Alltoall"}, false, false, false,
       true, ExpectedRule::kTransposed,
       "size = the whole send buffer per rank (ranks x per-peer block); each block rounded down "
       "to a multiple of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, "redop"},
      {Collective::kSendRecv, "sendrecv", "send/recv", "sendrecv_perf", "ncclSend/ncclRecv", "",
       {}, false, false, false, false, ExpectedRule::kPreviousRank,
       "size = bytes each rank sends to rank+1 (and receives from rank-1)", "1",
       NcclTestsOp::kAny, ""},
  };
}

// nccl-tests 2.19 rounds each rank's block of all-gather, reduce-scatter and
// all-to-all down to a multiple of 16 bytes: (count / ranks) & ~(16 / size - 1).
constexpr size_t kBlockAlignBytes = 16;

size_t aligned_block(size_t count, size_t ranks, size_t element_bytes) {
  const size_t per_block = element_bytes >= kBlockAlignBytes ? 1 : kBlockAlignBytes / element_bytes;
  return (count / ranks) & ~(per_block - 1);
}

std::string without_underscores(std::string_view text) {
  std::string plain(text);
  plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
  return plain;
}

}  // namespace

const std::vector<CollectiveDescription>& all_collectives() {
  static const std::vector<CollectiveDescription> descriptions = make_descriptions();
  return descriptions;
}

const CollectiveDescription& describe(Collective collective) {
  for (const auto& d : all_collectives())
    if (d.id == collective) return d;
  return all_collectives().front();  // unreachable: every enumerator is described
}

std::string_view name(Collective collective) { return describe(collective).name; }

std::optional<Collective> parse_collective(std::string_view text) {
  text = text.substr(text.find_last_of('/') + 1);  // npos + 1 == 0
  std::string plain = without_underscores(text);
  if (plain.size() > 4 && plain.ends_with("perf")) plain.resize(plain.size() - 4);
  for (const auto& d : all_collectives())
    if (d.name == plain) return d.id;
  return std::nullopt;
}

std::string canonical_collective_name(std::string_view text) {
  const auto c = parse_collective(text);
  return c ? std::string(name(*c)) : "";
}

std::optional<Collective> collective_from_osu_title(std::string_view line) {
  for (const auto& d : all_collectives())
    for (std::string_view words : d.osu_titles) {
      const size_t at = line.find(words);
      if (at == std::string_view::npos) continue;
      const std::string_view rest = line.substr(at + words.size());
      if (rest.starts_with(" Latency Test")) return d.id;
    }
  return std::nullopt;
}

std::string collective_choices() {
  std::string out;
  for (const auto& d : all_collectives()) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

Layout layout_for(Collective collective, size_t requested_bytes, size_t element_bytes, int ranks,
                  int rank) {
  const size_t n = static_cast<size_t>(ranks);
  const size_t r = static_cast<size_t>(rank);
  const size_t count = requested_bytes / element_bytes;
  Layout layout;
  switch (collective) {
    case Collective::kAllReduce:
    case Collective::kBroadcast:
    case Collective::kSendRecv:
      layout.send_count = layout.recv_count = layout.param_count = count;
      break;
    case Collective::kAllGather: {
      const size_t block = aligned_block(count, n, element_bytes);
      layout.send_count = layout.param_count = block;
      layout.recv_count = block * n;
      layout.send_in_place_offset = r * block;
      break;
    }
    case Collective::kReduceScatter: {
      const size_t block = aligned_block(count, n, element_bytes);
      layout.recv_count = layout.param_count = block;
      layout.send_count = block * n;
      layout.recv_in_place_offset = r * block;
      break;
    }
    case Collective::kAllToAll: {
      const size_t per_peer = aligned_block(count, n, element_bytes);
      layout.send_count = layout.recv_count = per_peer * n;
      layout.param_count = per_peer;
      break;
    }
  }
  layout.size_bytes = std::max(layout.send_count, layout.recv_count) * element_bytes;
  return layout;
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

}  // namespace ccscope
