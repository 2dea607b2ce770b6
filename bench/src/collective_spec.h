#pragma once
// What each benchmarked collective means in nccl-tests' conventions: how a
// requested size becomes element counts, buffer sizes and in-place offsets,
// and the bus-bandwidth factor.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ccscope::bench {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll, kSendRecv };

std::string_view name(Collective collective);
std::optional<Collective> parse_collective(std::string_view text);
std::string collective_choices();

bool has_reduction(Collective collective);
bool has_root(Collective collective);
// alltoall and sendrecv are benchmarked out of place only (NCCL has no
// in-place form for them).
bool supports_in_place(Collective collective);

// Element counts for one requested size, as nccl-tests computes them.
struct Layout {
  size_t send_count = 0;            // elements in the send buffer
  size_t recv_count = 0;            // elements in the receive buffer
  size_t param_count = 0;           // the count passed to the collective (the "count" column)
  size_t size_bytes = 0;            // the "size" column: max(send, recv) bytes
  size_t send_in_place_offset = 0;  // elements: where send sits inside recv when in place
  size_t recv_in_place_offset = 0;  // elements: where recv sits inside send when in place
};
Layout layout_for(Collective collective, size_t requested_bytes, size_t element_bytes, int ranks,
                  int rank);

// busbw = algbw x factor (nccl-tests' PERFORMANCE.md).
double bus_bandwidth_factor(Collective collective, int ranks);

// One line for --help: what the size means for this collective.
std::string size_convention(Collective collective);

}  // namespace ccscope::bench
