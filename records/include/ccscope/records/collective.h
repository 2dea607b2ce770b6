#pragma once
// One description per benchmarked collective, as nccl-tests keeps a testColl
// per collective: its names in every tool's spelling, how a requested size
// becomes element counts and buffers, its bus-bandwidth factor, whether it
// runs in place, and what each rank's output must hold. bench measures and
// checks by it; reports name, convert and re-derive figures by it.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccscope {

// Adding a collective: an enumerator here, its description in collective.cpp,
// its call in bench/src/collective_calls.cpp, and the Communicator's entry
// (collectives/communicator.h) in each backend that runs it.
enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
  kSendRecv,
  kReduce,
  kGather,
  kScatter,
  kAllToAllV,
};

// Element counts for one requested size, as nccl-tests computes them.
struct Layout {
  size_t send_count = 0;            // elements in the send buffer
  size_t recv_count = 0;            // elements in the receive buffer
  size_t param_count = 0;           // the count passed to the collective (the "count" column)
  size_t size_bytes = 0;            // the "size" column: max(send, recv) bytes
  size_t send_in_place_offset = 0;  // elements: where send sits inside recv when in place
  size_t recv_in_place_offset = 0;  // elements: where the output sits inside recv when in place
  // Per-peer blocks of this rank (all-to-all-v only; empty otherwise), in
  // elements: peer p's block is send[send_displacements[p], + send_counts[p])
  // and recv[recv_displacements[p], + recv_counts[p]); source_offsets[p] is
  // where the block p sends to this rank starts in p's send buffer.
  std::vector<size_t> send_counts, send_displacements;
  std::vector<size_t> recv_counts, recv_displacements;
  std::vector<size_t> source_offsets;
};

// Where element `index` of a rank's output comes from (the expected-value rule).
struct OutputSource {
  enum class Kind {
    kReduced,    // element `element` of the reduction over ranks
    kInput,      // element `element` of rank `rank`'s input
    kUnchanged,  // what the output held before the call (the collective leaves it)
  };
  Kind kind = Kind::kUnchanged;
  size_t element = 0;
  int rank = 0;
};
struct OutputQuery {
  const Layout& layout;  // of the rank asked about
  int ranks;
  int rank;
  int root;
};

// What nccl-tests' redop column holds for a collective.
enum class NcclTestsOp {
  kNone,       // nothing (empty until 2.13.3, "none" after)
  kReduction,  // the reduction it runs (sum, prod, ...)
  kAny,        // sendrecv: run once per op though nothing is reduced; either
};

struct CollectiveDescription {
  Collective id;
  std::string_view name;                // ccscope's: "allreduce"
  std::string_view title;               // for people: "all-reduce"
  std::string_view nccl_tests_program;  // "all_reduce_perf"
  std::string_view nccl_function;       // "ncclAllReduce"
  std::string_view osu_program;         // "osu_allreduce"; "" when OSU has none
  // The words of OSU's title line, "# OSU MPI <words> Latency Test" (5.x-7.x).
  std::vector<std::string_view> osu_titles;
  bool reduces;
  bool has_root;
  bool in_place;  // NCCL has an in-place form (alltoall and sendrecv do not)
  // OSU prints one rank's block for this collective, nccl-tests the whole
  // buffer: nccl-tests' size = OSU's size x ranks.
  bool osu_size_is_per_rank;
  std::string_view size_convention;  // one line for --help and reports
  std::string_view busbw_rule;       // the factor in words, e.g. "2(n-1)/n"
  // nccl-tests' table: its redop column, and the columns its 2.0-2.11 header
  // has between "type" and "time" ("redop", "root" or ""; each test printed
  // its own header then).
  NcclTestsOp nccl_tests_op;
  std::string_view nccl_tests_old_columns;
  // The size rule: the count passed to the collective for `count` elements
  // requested over `ranks` (nccl-tests' paramcount) ...
  size_t (*param_count)(size_t count, size_t element_bytes, size_t ranks);
  // ... and the buffers around it on `rank` (layout.param_count is set).
  void (*buffers)(Layout& layout, size_t element_bytes, size_t ranks, size_t rank);
  // busbw = algbw x bus_factor(ranks) (nccl-tests' PERFORMANCE.md).
  double (*bus_factor)(double ranks);
  // The expected-value rule: what element `index` of q.rank's output holds.
  OutputSource (*output_source)(const OutputQuery& q, size_t index);
};

const std::vector<CollectiveDescription>& all_collectives();
const CollectiveDescription& describe(Collective collective);
std::string_view name(Collective collective);
// ccscope's name, nccl-tests' program name (with or without a path or
// "_perf"), underscores allowed: all_reduce, all_reduce_perf, allreduce.
std::optional<Collective> parse_collective(std::string_view text);
// ccscope's name, for a collective named in a file ("" when unknown).
std::string canonical_collective_name(std::string_view text);
// The collective of an OSU title line ("# OSU MPI Allgather Latency Test v7.3").
std::optional<Collective> collective_from_osu_title(std::string_view line);
std::string collective_choices();

Layout layout_for(Collective collective, size_t requested_bytes, size_t element_bytes, int ranks,
                  int rank);
// The same layout from the count passed to the collective (layout_for's param_count).
Layout layout_of_param_count(Collective collective, size_t param_count, size_t element_bytes,
                             int ranks, int rank);
OutputSource output_source(Collective collective, const OutputQuery& query, size_t index);
// busbw = algbw x factor (nccl-tests' PERFORMANCE.md).
double bus_bandwidth_factor(Collective collective, int ranks);

}  // namespace ccscope
