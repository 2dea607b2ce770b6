#include "ccscope/training_probe/layout.h"

#include <algorithm>
#include <stdexcept>

namespace ccscope::training_probe {

std::vector<Bucket> assign_buckets(const std::vector<LayerSlice>& slices, size_t element_bytes,
                                   size_t bucket_bytes, size_t first_bucket_bytes) {
  std::vector<Bucket> buckets;
  if (slices.empty()) return buckets;
  // Parameters in reverse registration order: bias then weight, last layer first.
  struct Tensor {
    Range range;
    size_t layer;
  };
  std::vector<Tensor> reversed;
  for (size_t l = slices.size(); l-- > 0;) {
    reversed.push_back({{slices[l].bias_offset, slices[l].bias_offset + slices[l].bias_count}, l});
    reversed.push_back(
        {{slices[l].weight_offset, slices[l].weight_offset + slices[l].weight_count}, l});
  }
  Bucket open;
  bool has_open = false;
  for (const Tensor& t : reversed) {
    if (!has_open) {
      open = Bucket{t.range, t.layer};
      has_open = true;
    } else {
      open.range.begin = t.range.begin;  // contiguous, descending
      open.first_layer = t.layer;
    }
    const size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (open.range.size() * element_bytes >= cap) {
      buckets.push_back(open);
      has_open = false;
    }
  }
  if (has_open) buckets.push_back(open);
  return buckets;
}

Range Shard::owned(size_t rank) const {
  const size_t begin = std::min(unit.begin + rank * chunk, unit.end);
  const size_t end = std::min(begin + chunk, unit.end);
  return {begin, end};
}

Range split_evenly(size_t n, size_t parts, size_t index) {
  const size_t base = n / parts, extra = n % parts;
  const size_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

Shard shard_range(Range unit, size_t ranks) {
  if (ranks == 0) throw std::invalid_argument("sharding over zero ranks");
  return Shard{unit, (unit.size() + ranks - 1) / ranks};
}

}  // namespace ccscope::training_probe
