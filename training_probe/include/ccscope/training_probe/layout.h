#pragma once
// How a strategy cuts the flat parameter vector: DDP's gradient buckets and
// ZeRO's shards. Pure functions of sizes, unit-tested.
#include <cstddef>
#include <vector>

#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

// A contiguous range [begin, end) of the flat vector.
struct Range {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
  bool operator==(const Range&) const = default;
};

// Part `index` of `n` items cut into `parts` near-equal contiguous ranges (the
// first n % parts ranges one longer): tensor-parallel shards of a width that
// does not divide, experts over ranks, layers over stages.
Range split_evenly(size_t n, size_t parts, size_t index);

// PyTorch DDP's bucket assignment: parameters in reverse registration order
// (b_last, W_last, ..., b0, W0), a bucket closed once it holds `bucket_bytes`
// or more; the first bucket's cap is `first_bucket_bytes` (DDP's
// _DEFAULT_FIRST_BUCKET_BYTES, 1 MiB) so that communication starts early.
// Buckets come in the order backward fills them; each is one range because
// reverse order over a layer-ordered vector stays contiguous.
struct Bucket {
  Range range;
  size_t first_layer = 0;  // the lowest layer with a parameter in the bucket
};
std::vector<Bucket> assign_buckets(const std::vector<LayerSlice>& slices, size_t element_bytes,
                                   size_t bucket_bytes, size_t first_bucket_bytes);

// ZeRO / FSDP sharding of one range over `ranks`: padded to a multiple of
// `ranks` (as FSDP pads its flat parameter), each rank owns `chunk` elements
// from begin + rank * chunk; the last ranks' chunks may hold padding only.
struct Shard {
  Range unit;        // the range being sharded
  size_t chunk = 0;  // padded size / ranks
  // This rank's elements that are real parameters (possibly empty).
  Range owned(size_t rank) const;
  size_t padded_size(size_t ranks) const { return chunk * ranks; }
};
Shard shard_range(Range unit, size_t ranks);

}  // namespace ccscope::training_probe
