#include <algorithm>
#include <cstring>

#include "ccscope/collectives/control_plane.h"

namespace ccscope {
namespace {

// Rank 0 collects every rank's bytes, combines them, and sends the result back.
class PointToPointControl : public ControlPlane {
 public:
  explicit PointToPointControl(PointToPoint& p2p) : p2p_(p2p) {}

  int rank() const override { return p2p_.rank(); }
  int size() const override { return p2p_.size(); }

  void barrier() const override {
    unsigned char token = 0;
    exchange_fixed({&token, 1}, [](unsigned char*, const unsigned char*) {});
  }

  std::vector<std::string> all_gather(const std::string& text) const override {
    const int n = size();
    std::vector<std::string> texts(static_cast<size_t>(n));
    if (rank() != 0) {
      send_text(0, text);
      for (auto& t : texts) t = recv_text(0);
      return texts;
    }
    texts[0] = text;
    for (int peer = 1; peer < n; ++peer) texts[static_cast<size_t>(peer)] = recv_text(peer);
    for (int peer = 1; peer < n; ++peer)
      for (const auto& t : texts) send_text(peer, t);
    return texts;
  }

  void all_reduce_max(std::span<double> values) const override {
    reduce_doubles(values, [](double a, double b) { return std::max(a, b); });
  }
  void all_reduce_min(std::span<double> values) const override {
    reduce_doubles(values, [](double a, double b) { return std::min(a, b); });
  }
  void all_reduce_sum(std::span<double> values) const override {
    reduce_doubles(values, [](double a, double b) { return a + b; });
  }
  int64_t all_reduce_sum(int64_t value) const override {
    exchange_fixed({reinterpret_cast<unsigned char*>(&value), sizeof value},
                   [](unsigned char* into, const unsigned char* from) {
                     int64_t a = 0, b = 0;
                     std::memcpy(&a, into, sizeof a);
                     std::memcpy(&b, from, sizeof b);
                     a += b;
                     std::memcpy(into, &a, sizeof a);
                   });
    return value;
  }

 private:
  template <typename Combine>
  void reduce_doubles(std::span<double> values, Combine combine) const {
    const size_t bytes = values.size_bytes();
    if (rank() != 0) {
      p2p_.send(0, values.data(), bytes);
      p2p_.recv(0, values.data(), bytes);
      return;
    }
    std::vector<double> incoming(values.size());
    for (int peer = 1; peer < size(); ++peer) {
      p2p_.recv(peer, incoming.data(), bytes);
      for (size_t i = 0; i < values.size(); ++i) values[i] = combine(values[i], incoming[i]);
    }
    for (int peer = 1; peer < size(); ++peer) p2p_.send(peer, values.data(), bytes);
  }

  // `data` is combined element-wise at rank 0 with every rank's copy, then
  // replaced by the result on every rank.
  template <typename Combine>
  void exchange_fixed(std::span<unsigned char> data, Combine combine) const {
    if (rank() != 0) {
      p2p_.send(0, data.data(), data.size());
      p2p_.recv(0, data.data(), data.size());
      return;
    }
    std::vector<unsigned char> incoming(data.size());
    for (int peer = 1; peer < size(); ++peer) {
      p2p_.recv(peer, incoming.data(), incoming.size());
      combine(data.data(), incoming.data());
    }
    for (int peer = 1; peer < size(); ++peer) p2p_.send(peer, data.data(), data.size());
  }

  void send_text(int peer, const std::string& text) const {
    const uint64_t length = text.size();
    p2p_.send(peer, &length, sizeof length);
    p2p_.send(peer, text.data(), text.size());
  }
  std::string recv_text(int peer) const {
    uint64_t length = 0;
    p2p_.recv(peer, &length, sizeof length);
    std::string text(length, '\0');
    p2p_.recv(peer, text.data(), text.size());
    return text;
  }

  PointToPoint& p2p_;
};

}  // namespace

std::unique_ptr<ControlPlane> point_to_point_control(PointToPoint& p2p) {
  return std::make_unique<PointToPointControl>(p2p);
}

}  // namespace ccscope
