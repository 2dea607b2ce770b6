#include "gather_channel.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ccscope/collectives/error.h"

namespace ccscope::detail {

std::string pack_parts(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    const uint64_t length = part.size();
    out.append(reinterpret_cast<const char*>(&length), sizeof length);
    out += part;
  }
  return out;
}

std::vector<std::string> unpack_parts(const std::string& packed, size_t count) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (parts.size() < count) {
    uint64_t length = 0;
    if (at + sizeof length > packed.size()) throw BackendError("a truncated gather");
    std::memcpy(&length, packed.data() + at, sizeof length);
    at += sizeof length;
    if (length > packed.size() - at) throw BackendError("a truncated gather");
    parts.push_back(packed.substr(at, length));
    at += length;
  }
  return parts;
}

void GatherChannel::barrier(bool) const { gather("", {}); }

std::vector<std::string> GatherChannel::all_gather(const std::string& text, bool) const {
  return gather(text, {});
}

void GatherChannel::all_reduce(std::span<double> values, Reduction reduction, bool) const {
  const std::string mine(reinterpret_cast<const char*>(values.data()), values.size_bytes());
  const std::vector<std::string> all = gather(mine, {});
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != mine.size())
      throw BackendError("ranks reduced different numbers of values");
    for (size_t i = 0; i < values.size(); ++i) {
      double value = 0;
      std::memcpy(&value, all[r].data() + i * sizeof(double), sizeof value);
      if (r == 0)
        values[i] = value;
      else
        values[i] = reduction == Reduction::kMax   ? std::max(values[i], value)
                    : reduction == Reduction::kMin ? std::min(values[i], value)
                                                   : values[i] + value;
    }
  }
}

int64_t GatherChannel::all_reduce_sum(int64_t value, bool) const {
  const std::string mine(reinterpret_cast<const char*>(&value), sizeof value);
  int64_t total = 0;
  for (const std::string& part : gather(mine, {})) {
    int64_t one = 0;
    if (part.size() != sizeof one) throw BackendError("a malformed sum");
    std::memcpy(&one, part.data(), sizeof one);
    total += one;
  }
  return total;
}

void GatherChannel::sleeping_barrier(std::chrono::milliseconds timeout) const {
  gather("", std::max(timeout, std::chrono::milliseconds(1)));
}

void GatherChannel::broadcast(std::vector<char>& bytes, int root) const {
  const std::vector<std::string> all =
      gather(channel_rank() == root ? std::string(bytes.begin(), bytes.end()) : std::string(), {});
  const std::string& sent = all.at(static_cast<size_t>(root));
  bytes.assign(sent.begin(), sent.end());
}

}  // namespace ccscope::detail
