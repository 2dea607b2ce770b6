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
      {
          .id = Collective::kAllReduce,
          .name = "allreduce",
          .title = "all-reduce",
          .nccl_tests_program = "all_reduce_perf",
          .nccl_function = "ncclAllReduce",
          .osu_program = "osu_allreduce",
          .osu_titles = {"Allreduce"},
          .reduces = true,
          .has_root = false,
          .in_place = true,
          .osu_size_is_per_rank = false,
          .size_convention = "size = bytes reduced per rank (send = receive buffer size)",
          .busbw_rule = "2(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kReduction,
          .nccl_tests_old_columns = "redop",
          .param_count = whole_count,
          .buffers = one_vector,
          .bus_factor = all_reduce_factor,
          .output_source = reduced_element,
      },
      {
          .id = Collective::kAllGather,
          .name = "allgather",
          .title = "all-gather",
          .nccl_tests_program = "all_gather_perf",
          .nccl_function = "ncclAllGather",
          .osu_program = "osu_allgather",
          .osu_titles = {"Allgather"},
          .reduces = false,
          .has_root = false,
          .in_place = true,
          .osu_size_is_per_rank = true,
          .size_convention = "size = the full OUTPUT per rank (ranks x block); each block rounded "
                             "down to a multiple of 16 bytes",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "",
          .param_count = aligned_block,
          .buffers = blocks_gathered,
          .bus_factor = spread_factor,
          .output_source = gathered_blocks,
      },
      {
          .id = Collective::kReduceScatter,
          .name = "reducescatter",
          .title = "reduce-scatter",
          .nccl_tests_program = "reduce_scatter_perf",
          .nccl_function = "ncclReduceScatter",
          .osu_program = "osu_reduce_scatter",
          .osu_titles = {"Reduce_scatter", "Reduce Scatter"},
          .reduces = true,
          .has_root = false,
          .in_place = true,
          .osu_size_is_per_rank = false,
          .size_convention = "size = the full INPUT per rank (ranks x block); each block rounded "
                             "down to a multiple of 16 bytes",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kReduction,
          .nccl_tests_old_columns = "redop",
          .param_count = aligned_block,
          .buffers = blocks_scattered,
          .bus_factor = spread_factor,
          .output_source = reduced_own_block,
      },
      {
          .id = Collective::kBroadcast,
          .name = "broadcast",
          .title = "broadcast",
          .nccl_tests_program = "broadcast_perf",
          .nccl_function = "ncclBroadcast",
          .osu_program = "osu_bcast",
          .osu_titles = {"Broadcast", "Bcast"},
          .reduces = false,
          .has_root = true,
          .in_place = true,
          .osu_size_is_per_rank = false,
          .size_convention = "size = bytes broadcast from the root",
          .busbw_rule = "1",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "root",
          .param_count = whole_count,
          .buffers = one_vector,
          .bus_factor = one_factor,
          .output_source = root_input,
      },
      {
          .id = Collective::kAllToAll,
          .name = "alltoall",
          .title = "all-to-all",
          .nccl_tests_program = "alltoall_perf",
          .nccl_function = "ncclAlltoAll",
          .osu_program = "osu_alltoall",
          .osu_titles = {"All-to-All Personalized Exchange", "Alltoall"},
          .reduces = false,
          .has_root = false,
          .in_place = false,
          .osu_size_is_per_rank = true,
          .size_convention = "size = the whole send buffer per rank (ranks x per-peer block); each "
                             "block rounded down to a multiple of 16 bytes",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "redop",
          .param_count = aligned_block,
          .buffers = blocks_per_peer,
          .bus_factor = spread_factor,
          .output_source = transposed_blocks,
      },
      {
          .id = Collective::kSendRecv,
          .name = "sendrecv",
          .title = "send/recv",
          .nccl_tests_program = "sendrecv_perf",
          .nccl_function = "ncclSend/ncclRecv",
          .osu_program = "",
          .osu_titles = {},
          .reduces = false,
          .has_root = false,
          .in_place = false,
          .osu_size_is_per_rank = false,
          .size_convention = "size = bytes each rank sends to rank+1 (and receives from rank-1)",
          .busbw_rule = "1",
          .nccl_tests_op = NcclTestsOp::kAny,
          .nccl_tests_old_columns = "",
          .param_count = whole_count,
          .buffers = one_vector,
          .bus_factor = one_factor,
          .output_source = previous_rank_input,
      },
      {
          .id = Collective::kReduce,
          .name = "reduce",
          .title = "reduce",
          .nccl_tests_program = "reduce_perf",
          .nccl_function = "ncclReduce",
          .osu_program = "osu_reduce",
          .osu_titles = {"Reduce"},
          .reduces = true,
          .has_root = true,
          .in_place = true,
          .osu_size_is_per_rank = false,
          .size_convention =
              "size = bytes reduced per rank onto the root (send = receive buffer size)",
          .busbw_rule = "1",
          .nccl_tests_op = NcclTestsOp::kReduction,
          .nccl_tests_old_columns = "redop root",
          .param_count = whole_count,
          .buffers = one_vector,
          .bus_factor = one_factor,
          .output_source = reduced_on_root,
      },
      {
          .id = Collective::kGather,
          .name = "gather",
          .title = "gather",
          .nccl_tests_program = "gather_perf",
          .nccl_function = "ncclSend/ncclRecv to the root",
          .osu_program = "osu_gather",
          .osu_titles = {"Gather"},
          .reduces = false,
          .has_root = true,
          .in_place = true,
          .osu_size_is_per_rank = true,
          .size_convention = "size = the full OUTPUT on the root (ranks x block); each block "
                             "rounded down to a multiple of 16 bytes",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "root",
          .param_count = aligned_block,
          .buffers = blocks_gathered,
          .bus_factor = spread_factor,
          .output_source = gathered_on_root,
      },
      {
          .id = Collective::kScatter,
          .name = "scatter",
          .title = "scatter",
          .nccl_tests_program = "scatter_perf",
          .nccl_function = "ncclSend/ncclRecv from the root",
          .osu_program = "osu_scatter",
          .osu_titles = {"Scatter"},
          .reduces = false,
          .has_root = true,
          .in_place = true,
          .osu_size_is_per_rank = true,
          .size_convention = "size = the full INPUT on the root (ranks x block); each block "
                             "rounded down to a multiple of 16 bytes",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "root",
          .param_count = aligned_block,
          .buffers = blocks_scattered,
          .bus_factor = spread_factor,
          .output_source = root_block,
      },
      // OSU's alltoallv sends equal blocks: not this pattern, so no OSU name.
      {
          .id = Collective::kAllToAllV,
          .name = "alltoallv",
          .title = "all-to-all-v",
          .nccl_tests_program = "alltoallv_perf",
          .nccl_function = "ncclSend/ncclRecv to every rank",
          .osu_program = "",
          .osu_titles = {},
          .reduces = false,
          .has_root = false,
          .in_place = false,
          .osu_size_is_per_rank = false,
          .size_convention =
              "size = the whole send buffer per rank; rank i sends rank j a share of ranks x block "
              "proportional to (j-i) mod ranks, each rounded down to a multiple of 16 bytes "
              "(nccl-tests' alltoallv without a traffic matrix)",
          .busbw_rule = "(n-1)/n",
          .nccl_tests_op = NcclTestsOp::kNone,
          .nccl_tests_old_columns = "",
          .param_count = aligned_block,
          .buffers = blocks_distance_weighted,
          .bus_factor = spread_factor,
          .output_source = per_peer_segments,
      },
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
      collective,
      describe(collective).param_count(count, element_bytes, static_cast<size_t>(ranks)),
      element_bytes, ranks, rank);
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  return describe(collective).bus_factor(ranks);
}

OutputSource output_source(Collective collective, const OutputQuery& query, size_t index) {
  return describe(collective).output_source(query, index);
}

}  // namespace ccscope
