#include "ccscope/records/collective.h"

#include <algorithm>

namespace ccscope {
namespace {

// nccl-tests 2.19 rounds each rank's block of the blocked collectives down to a
// multiple of 16 bytes: (count / ranks) & ~(16 / size - 1).
constexpr size_t kBlockAlignBytes = 16;

// --- Size rules: the count passed to the collective ---
size_t whole_count(size_t count, size_t, size_t) { return count; }
size_t aligned_block(size_t count, size_t element_bytes, size_t ranks) {
  const size_t per_block = element_bytes >= kBlockAlignBytes ? 1 : kBlockAlignBytes / element_bytes;
  return (count / ranks) & ~(per_block - 1);
}

// --- Buffer rules: send and receive buffers around that count ---
void one_vector(Layout& l, size_t, size_t, size_t) { l.send_count = l.recv_count = l.param_count; }
// Each rank's block lands in block r of a ranks-block output (in place: the
// input already sits there).
void blocks_gathered(Layout& l, size_t, size_t ranks, size_t rank) {
  l.send_count = l.param_count;
  l.recv_count = l.param_count * ranks;
  l.send_in_place_offset = rank * l.param_count;
}
// Block r of a ranks-block input is rank r's output (in place: it stays there).
void blocks_scattered(Layout& l, size_t, size_t ranks, size_t rank) {
  l.recv_count = l.param_count;
  l.send_count = l.param_count * ranks;
  l.recv_in_place_offset = rank * l.param_count;
}
void blocks_per_peer(Layout& l, size_t, size_t ranks, size_t) {
  l.send_count = l.recv_count = l.param_count * ranks;
}

// nccl-tests 2.19's alltoallv_perf without a traffic matrix: rank i sends rank
// j a share of the whole (block x ranks) proportional to their distance
// d = (j - i) mod ranks, d x total / (ranks (ranks-1) / 2) bytes, rounded down
// to 16 bytes (its distance-weighted spread at its default 1.0). Integer
// arithmetic equals its double one while d x total < 2^53.
size_t distance_weighted_bytes(size_t distance, size_t total_bytes, size_t ranks) {
  if (ranks == 1) return total_bytes & ~(kBlockAlignBytes - 1);
  const size_t sum_of_distances = ranks * (ranks - 1) / 2;
  return distance * total_bytes / sum_of_distances & ~(kBlockAlignBytes - 1);
}
void blocks_distance_weighted(Layout& l, size_t element_bytes, size_t ranks, size_t rank) {
  const size_t total = l.param_count * ranks * element_bytes;
  auto count = [&](size_t from, size_t to) {
    return distance_weighted_bytes((to + ranks - from) % ranks, total, ranks) / element_bytes;
  };
  for (size_t p = 0; p < ranks; ++p) {
    l.send_displacements.push_back(l.send_count);
    l.send_counts.push_back(count(rank, p));
    l.send_count += l.send_counts.back();
    l.recv_displacements.push_back(l.recv_count);
    l.recv_counts.push_back(count(p, rank));
    l.recv_count += l.recv_counts.back();
    size_t offset = 0;
    for (size_t k = 0; k < rank; ++k) offset += count(p, k);
    l.source_offsets.push_back(offset);
  }
}

// --- Bus factors (nccl-tests' PERFORMANCE.md) ---
double all_reduce_factor(double n) { return 2.0 * (n - 1) / n; }
double spread_factor(double n) { return (n - 1) / n; }
double one_factor(double) { return 1.0; }

// --- Expected-value rules ---
using Kind = OutputSource::Kind;
OutputSource reduced(size_t element) { return {Kind::kReduced, element, 0}; }
OutputSource input(int rank, size_t element) { return {Kind::kInput, element, rank}; }
OutputSource unchanged() { return {}; }
size_t block_of(const OutputQuery& q) { return q.layout.param_count; }
size_t rank_of(const OutputQuery& q) { return static_cast<size_t>(q.rank); }

OutputSource reduced_element(const OutputQuery&, size_t i) { return reduced(i); }
OutputSource reduced_own_block(const OutputQuery& q, size_t i) {
  return reduced(rank_of(q) * block_of(q) + i);
}
OutputSource gathered_blocks(const OutputQuery& q, size_t i) {
  if (block_of(q) == 0) return unchanged();  // an empty output: nothing to say
  return input(static_cast<int>(i / block_of(q)), i % block_of(q));
}
OutputSource root_input(const OutputQuery& q, size_t i) { return input(q.root, i); }
// Block p of rank s's send buffer goes to rank p: element i of rank r's output
// came from rank i / block, its element r * block + i % block.
OutputSource transposed_blocks(const OutputQuery& q, size_t i) {
  if (block_of(q) == 0) return unchanged();
  return input(static_cast<int>(i / block_of(q)), rank_of(q) * block_of(q) + i % block_of(q));
}
OutputSource previous_rank_input(const OutputQuery& q, size_t i) {
  return input((q.rank + q.ranks - 1) % q.ranks, i);
}
OutputSource reduced_on_root(const OutputQuery& q, size_t i) {
  return q.rank == q.root ? reduced(i) : unchanged();
}
OutputSource gathered_on_root(const OutputQuery& q, size_t i) {
  return q.rank == q.root ? gathered_blocks(q, i) : unchanged();
}
OutputSource root_block(const OutputQuery& q, size_t i) {
  return input(q.root, rank_of(q) * block_of(q) + i);
}
OutputSource per_peer_segments(const OutputQuery& q, size_t i) {
  const auto& starts = q.layout.recv_displacements;
  const auto after = std::upper_bound(starts.begin(), starts.end(), i);
  if (after == starts.begin()) return unchanged();
  const size_t source = static_cast<size_t>(after - starts.begin()) - 1;
  return input(static_cast<int>(source), q.layout.source_offsets[source] + i - starts[source]);
}

std::vector<CollectiveDescription> make_descriptions() {
  return {
      {Collective::kAllReduce, "allreduce", "all-reduce", "all_reduce_perf", "ncclAllReduce",
       "osu_allreduce", {"Allreduce"}, true, false, true, false,
       "size = bytes reduced per rank (send = receive buffer size)", "2(n-1)/n",
       NcclTestsOp::kReduction, "redop", whole_count, one_vector, all_reduce_factor,
       reduced_element},
      {Collective::kAllGather, "allgather", "all-gather", "all_gather_perf", "ncclAllGather",
       "osu_allgather", {"Allgather"}, false, false, true, true,
       "size = the full OUTPUT per rank (ranks x block); each block rounded down to a multiple "
       "of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, "", aligned_block, blocks_gathered, spread_factor,
       gathered_blocks},
      {Collective::kReduceScatter, "reducescatter", "reduce-scatter", "reduce_scatter_perf",
       "ncclReduceScatter", "osu_reduce_scatter", {"Reduce_scatter", "Reduce Scatter"}, true,
       false, true, false,
       "size = the full INPUT per rank (ranks x block); each block rounded down to a multiple of "
       "16 bytes",
       "(n-1)/n", NcclTestsOp::kReduction, "redop", aligned_block, blocks_scattered,
       spread_factor, reduced_own_block},
      {Collective::kBroadcast, "broadcast", "broadcast", "broadcast_perf", "ncclBroadcast",
       "osu_bcast", {"Broadcast", "Bcast"}, false, true, true, false,
       "size = bytes broadcast from the root", "1", NcclTestsOp::kNone, "root", whole_count,
       one_vector, one_factor, root_input},
      {Collective::kAllToAll, "alltoall", "all-to-all", "alltoall_perf", "ncclAlltoAll",
       "osu_alltoall", {"All-to-All Personalized Exchange", "Alltoall"}, false, false, false,
       true,
       "size = the whole send buffer per rank (ranks x per-peer block); each block rounded down "
       "to a multiple of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, "redop", aligned_block, blocks_per_peer, spread_factor,
       transposed_blocks},
      {Collective::kSendRecv, "sendrecv", "send/recv", "sendrecv_perf", "ncclSend/ncclRecv", "",
       {}, false, false, false, false,
       "size = bytes each rank sends to rank+1 (and receives from rank-1)", "1",
       NcclTestsOp::kAny, "", whole_count, one_vector, one_factor, previous_rank_input},
      {Collective::kReduce, "reduce", "reduce", "reduce_perf", "ncclReduce", "osu_reduce",
       {"Reduce"}, true, true, true, false,
       "size = bytes reduced per rank onto the root (send = receive buffer size)", "1",
       NcclTestsOp::kReduction, "redop root", whole_count, one_vector, one_factor,
       reduced_on_root},
      {Collective::kGather, "gather", "gather", "gather_perf", "ncclSend/ncclRecv to the root",
       "osu_gather", {"Gather"}, false, true, true, true,
       "size = the full OUTPUT on the root (ranks x block); each block rounded down to a "
       "multiple of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, "root", aligned_block, blocks_gathered, spread_factor,
       gathered_on_root},
      {Collective::kScatter, "scatter", "scatter", "scatter_perf",
       "ncclSend/ncclRecv from the root", "osu_scatter", {"Scatter"}, false, true, true, true,
       "size = the full INPUT on the root (ranks x block); each block rounded down to a "
       "multiple of 16 bytes",
       "(n-1)/n", NcclTestsOp::kNone, "root", aligned_block, blocks_scattered, spread_factor,
       root_block},
      // OSU's alltoallv sends equal blocks: not this pattern, so no OSU name.
      {Collective::kAllToAllV, "alltoallv", "all-to-all-v", "alltoallv_perf",
       "ncclSend/ncclRecv to every rank", "", {}, false, false, false, false,
       "size = the whole send buffer per rank; rank i sends rank j a share of ranks x block "
       "proportional to (j-i) mod ranks, each rounded down to a multiple of 16 bytes "
       "(nccl-tests' alltoallv without a traffic matrix)",
       "(n-1)/n", NcclTestsOp::kNone, "", aligned_block, blocks_distance_weighted,
       spread_factor, per_peer_segments},
  };
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
  // The longest title that ends just before " Latency Test" ("Reduce Scatter",
  // not "Scatter").
  std::optional<Collective> found;
  size_t found_length = 0;
  for (const auto& d : all_collectives())
    for (std::string_view words : d.osu_titles) {
      const size_t at = line.find(words);
      if (at == std::string_view::npos || words.size() <= found_length) continue;
      const std::string_view rest = line.substr(at + words.size());
      if (rest.starts_with(" Latency Test")) found = d.id, found_length = words.size();
    }
  return found;
}

std::string collective_choices() {
  std::string out;
  for (const auto& d : all_collectives()) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

Layout layout_of_param_count(Collective collective, size_t param_count, size_t element_bytes,
                             int ranks, int rank) {
  const CollectiveDescription& d = describe(collective);
  Layout layout;
  layout.param_count = param_count;
  d.buffers(layout, element_bytes, static_cast<size_t>(ranks), static_cast<size_t>(rank));
  layout.size_bytes = std::max(layout.send_count, layout.recv_count) * element_bytes;
  return layout;
}

Layout layout_for(Collective collective, size_t requested_bytes, size_t element_bytes, int ranks,
                  int rank) {
  const size_t count = requested_bytes / element_bytes;
  return layout_of_param_count(
      collective, describe(collective).param_count(count, element_bytes, static_cast<size_t>(ranks)),
      element_bytes, ranks, rank);
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  return describe(collective).bus_factor(ranks);
}

OutputSource output_source(Collective collective, const OutputQuery& query, size_t index) {
  return describe(collective).output_source(query, index);
}

}  // namespace ccscope
