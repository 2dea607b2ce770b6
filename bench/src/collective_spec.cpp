#include "collective_spec.h"

#include <algorithm>
#include <array>
#include <utility>

namespace ccscope::bench {
namespace {

constexpr std::array<std::pair<Collective, std::string_view>, 6> kNames{{
    {Collective::kAllReduce, "allreduce"},
    {Collective::kAllGather, "allgather"},
    {Collective::kReduceScatter, "reducescatter"},
    {Collective::kBroadcast, "broadcast"},
    {Collective::kAllToAll, "alltoall"},
    {Collective::kSendRecv, "sendrecv"},
}};

// nccl-tests 2.19 rounds each rank's block of all-gather, reduce-scatter and
// all-to-all down to a multiple of 16 bytes: (count / ranks) & ~(16 / size - 1).
constexpr size_t kBlockAlignBytes = 16;

size_t aligned_block(size_t count, size_t ranks, size_t element_bytes) {
  const size_t per_block = element_bytes >= kBlockAlignBytes ? 1 : kBlockAlignBytes / element_bytes;
  return (count / ranks) & ~(per_block - 1);
}

}  // namespace

std::string_view name(Collective collective) {
  for (const auto& [c, text] : kNames)
    if (c == collective) return text;
  return "unknown";
}

std::optional<Collective> parse_collective(std::string_view text) {
  for (const auto& [c, name_text] : kNames)
    if (name_text == text) return c;
  // nccl-tests binary names and underscores are accepted too.
  std::string plain(text);
  plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
  if (plain.size() > 4 && plain.ends_with("perf")) plain.resize(plain.size() - 4);
  for (const auto& [c, name_text] : kNames)
    if (name_text == plain) return c;
  return std::nullopt;
}

std::string collective_choices() {
  std::string out;
  for (const auto& [c, text] : kNames) out += (out.empty() ? "" : ", ") + std::string(text);
  return out;
}

bool has_reduction(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter;
}
bool has_root(Collective c) { return c == Collective::kBroadcast; }
bool supports_in_place(Collective c) {
  return c != Collective::kAllToAll && c != Collective::kSendRecv;
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

std::string size_convention(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "size = bytes reduced per rank (send = receive buffer size)";
    case Collective::kAllGather:
      return "size = the full OUTPUT per rank (ranks x block); each block rounded down to a "
             "multiple of 16 bytes";
    case Collective::kReduceScatter:
      return "size = the full INPUT per rank (ranks x block); each block rounded down to a "
             "multiple of 16 bytes";
    case Collective::kBroadcast:
      return "size = bytes broadcast from the root";
    case Collective::kAllToAll:
      return "size = the whole send buffer per rank (ranks x per-peer block); each block "
             "rounded down to a multiple of 16 bytes";
    case Collective::kSendRecv:
      return "size = bytes each rank sends to rank+1 (and receives from rank-1)";
  }
  return "";
}

}  // namespace ccscope::bench
