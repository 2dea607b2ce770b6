#pragma once
// Faults the stand-in injects, chosen by CCSCOPE_STANDIN_FAULTS (docs/standin.md):
//   kind:rank=R[:op=N][:element=I][;kind:...]
// kinds: async_error (NCCL operation N of rank R fails asynchronously with
// ncclSystemError; it never completes until the communicator is aborted),
// hang (operation N of rank R never completes and reports nothing), corrupt
// (operation N of rank R writes one wrong element, index I, default 0),
// init_hang (rank R's ncclCommInitRank* never completes), vanish (rank R's
// process is killed with SIGKILL when it starts operation N), call_hang (rank
// R's host thread never returns from the NCCL call that issues operation N, as
// a process stuck in the library).
// Operations are counted per process from 1, over every communicator, each
// collective and each ncclSend/ncclRecv once, as they execute on a stream
// (call_hang: as they are called).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ccscope::standin {

enum class FaultKind { kAsyncError, kHang, kCorrupt, kInitHang, kVanish, kCallHang };

struct Fault {
  FaultKind kind = FaultKind::kHang;
  int rank = 0;
  uint64_t op = 1;
  size_t element = 0;
};

struct FaultParse {
  std::vector<Fault> faults;
  std::string error;  // "" when the text was valid
};

// Parses the variable's text ("" = no faults).
FaultParse parse_faults(std::string_view text);

// The fault of `kind` for `rank` at operation `op` (op ignored for init_hang).
std::optional<Fault> find_fault(const std::vector<Fault>& faults, FaultKind kind, int rank,
                                uint64_t op);

}  // namespace ccscope::standin
