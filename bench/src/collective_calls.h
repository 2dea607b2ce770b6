#pragma once
// The executing half of each collective's description (records/collective.h
// holds its names, size rule, buffers, bus factor and expected values): the
// call into the Communicator with the arguments a layout gives.
#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/types.h"
#include "collective_spec.h"

namespace ccscope::bench {

// One operation's arguments, as nccl-tests' RunColl gets them.
struct CollectiveArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  const Layout* layout = nullptr;  // param_count and, for all-to-all-v, the per-peer blocks
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

using CollectiveCall = void (*)(Communicator& comm, const CollectiveArgs& args);

// The call of `collective`; look it up once, outside a timed loop.
CollectiveCall collective_call(Collective collective);

}  // namespace ccscope::bench
