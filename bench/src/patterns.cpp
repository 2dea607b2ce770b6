#include "patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace ccscope::bench {
namespace {

// Data-movement values: (source_rank * 31 + index) mod 113, below 127 so they
// are exact in every type including int8.
constexpr size_t kMovementModulus = 113;
// min/max values: (rank * 37 + index * 11) mod 101.
constexpr int kMinMaxModulus = 101;
constexpr int kSumModulus = 29;

// Largest integer every value up to which is exact in the type (for sums).
double exact_integer_limit(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 2048;
    case DataType::kBFloat16:
      return 256;
    case DataType::kFloat32:
      return 16777216.0;
    case DataType::kFloat64:
      return 9007199254740992.0;
    case DataType::kInt32:
      return 2147483647.0;
    case DataType::kInt8:
      return 127;
    case DataType::kUInt8:
      return 255;
  }
  return 127;
}

// How many factors of two a product may have and stay exact and in range.
int max_doublings(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return 15;
    case DataType::kInt8:
      return 6;
    case DataType::kUInt8:
      return 7;
    default:
      return 30;
  }
}

bool is_reduction(Collective c) { return has_reduction(c); }

}  // namespace

DataPattern::DataPattern(Collective collective, DataType type, ReduceOp op, int ranks, int root,
                         size_t block, double relative_tolerance)
    : collective_(collective),
      type_(type),
      op_(op),
      ranks_(ranks),
      root_(root),
      block_(block),
      relative_tolerance_(relative_tolerance),
      element_bytes_(element_size(type)) {
  if (is_reduction(collective)) {
    // Slots: [rank * period + phase] for inputs, then [ranks * period + phase] for results.
    const double limit = exact_integer_limit(type);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: {
        const double fit = std::floor(limit / ranks_) + 1;  // n * (M - 1) <= limit
        if (fit < 2) {
          one_hot_ = true;  // more ranks than exact integers: a single 1 per element
          period_ = static_cast<size_t>(ranks_);
        } else {
          modulus_ = static_cast<int>(std::min<double>(kSumModulus, fit));
          period_ = static_cast<size_t>(modulus_);
        }
        break;
      }
      case ReduceOp::kProd: {
        const int doublings = max_doublings(type);
        modulus_ = std::max(1, (ranks_ + doublings - 1) / doublings);
        period_ = static_cast<size_t>(modulus_);
        break;
      }
      case ReduceOp::kMin:
      case ReduceOp::kMax:
        modulus_ = kMinMaxModulus;
        period_ = static_cast<size_t>(kMinMaxModulus);
        break;
    }
    values_.resize((static_cast<size_t>(ranks_) + 1) * period_);
    for (int r = 0; r < ranks_; ++r)
      for (size_t k = 0; k < period_; ++k)
        values_[static_cast<size_t>(r) * period_ + k] = reduce_pattern(r, k);
    for (size_t k = 0; k < period_; ++k) {
      double result = values_[k];
      double exact_sum = 0;
      for (int r = 0; r < ranks_; ++r) {
        const double v = values_[static_cast<size_t>(r) * period_ + k];
        exact_sum += v;
        if (r == 0) continue;
        switch (op) {
          case ReduceOp::kSum:
          case ReduceOp::kAvg:
            result += v;
            break;
          case ReduceOp::kProd:
            result *= v;
            break;
          case ReduceOp::kMin:
            result = std::min(result, v);
            break;
          case ReduceOp::kMax:
            result = std::max(result, v);
            break;
        }
      }
      if (op == ReduceOp::kAvg) {
        // Integers truncate (as NCCL and C); floats round the exact quotient once.
        result = is_floating(type) ? exact_sum / ranks_ : std::trunc(exact_sum / ranks_);
      }
      values_[static_cast<size_t>(ranks_) * period_ + k] = result;
    }
  } else {
    values_.resize(kMovementModulus);
    for (size_t k = 0; k < kMovementModulus; ++k) values_[k] = static_cast<double>(k);
  }
  typed_.resize(values_.size() * element_bytes_);
  for (size_t slot = 0; slot < values_.size(); ++slot)
    store_element(typed_.data(), type_, slot, values_[slot]);
  // The typed value is the reference: e.g. an avg of 1/3 rounds to the type.
  for (size_t slot = 0; slot < values_.size(); ++slot)
    values_[slot] = load_element(typed_.data(), type_, slot);
}

double DataPattern::reduce_pattern(int rank, size_t phase) const {
  const size_t r = static_cast<size_t>(rank);
  switch (op_) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      if (one_hot_) return (r == phase % static_cast<size_t>(ranks_)) ? 1 : 0;
      return static_cast<double>((r + phase) % static_cast<size_t>(modulus_));
    case ReduceOp::kProd:
      return (r + phase) % static_cast<size_t>(modulus_) == 0 ? 2 : 1;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return static_cast<double>((r * 37 + phase * 11) % static_cast<size_t>(modulus_));
  }
  return 0;
}

static size_t movement_slot(size_t source, size_t index) {
  return (source * 31 + index) % kMovementModulus;
}

size_t DataPattern::input_slot(int rank, size_t index) const {
  if (is_reduction(collective_)) return static_cast<size_t>(rank) * period_ + index % period_;
  const size_t r = static_cast<size_t>(rank);
  switch (collective_) {
    case Collective::kAllGather:
      return movement_slot(r, r * block_ + index);  // the block's global position
    default:  // broadcast (non-roots start with their own values), alltoall, sendrecv
      return movement_slot(r, index);
  }
}

size_t DataPattern::expected_slot(int rank, size_t index) const {
  const size_t r = static_cast<size_t>(rank);
  const size_t n = static_cast<size_t>(ranks_);
  switch (collective_) {
    case Collective::kAllReduce:
      return n * period_ + index % period_;
    case Collective::kReduceScatter:
      return n * period_ + (r * block_ + index) % period_;
    case Collective::kAllGather:
      return movement_slot(block_ == 0 ? 0 : index / block_, index);
    case Collective::kBroadcast:
      return movement_slot(static_cast<size_t>(root_), index);
    case Collective::kAllToAll: {
      const size_t source = block_ == 0 ? 0 : index / block_;
      return movement_slot(source, r * block_ + (block_ == 0 ? 0 : index % block_));
    }
    case Collective::kSendRecv:
      return movement_slot((r + n - 1) % n, index);
  }
  return 0;
}

double DataPattern::input_value(int rank, size_t index) const {
  return values_[input_slot(rank, index)];
}
double DataPattern::expected_value(int rank, size_t index) const {
  return values_[expected_slot(rank, index)];
}

void DataPattern::fill_input(int rank, size_t first, size_t count, void* out) const {
  auto* bytes = static_cast<unsigned char*>(out);
  const size_t width = element_bytes_;
  for (size_t i = 0; i < count; ++i)
    std::memcpy(bytes + i * width, typed_.data() + input_slot(rank, first + i) * width, width);
}

CheckResult DataPattern::check_output(int rank, size_t first, size_t count,
                                      const void* received) const {
  CheckResult result;
  const auto* bytes = static_cast<const unsigned char*>(received);
  const size_t width = element_bytes_;
  for (size_t i = 0; i < count; ++i) {
    const size_t slot = expected_slot(rank, first + i);
    bool ok = std::memcmp(bytes + i * width, typed_.data() + slot * width, width) == 0;
    if (!ok && relative_tolerance_ > 0) {
      const double got = load_element(received, type_, i);
      ok = std::fabs(got - values_[slot]) <=
           relative_tolerance_ * std::max(1.0, std::fabs(values_[slot]));
    }
    if (ok) continue;
    if (!result.has_first) {
      result.has_first = true;
      result.first_index = first + i;
      result.expected = values_[slot];
      result.received = load_element(received, type_, i);
    }
    ++result.wrong;
  }
  return result;
}

}  // namespace ccscope::bench
