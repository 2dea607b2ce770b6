#include "ccscope/collectives/reference_algorithms.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ccscope/collectives/error.h"

namespace ccscope {
namespace {

// How each element type is loaded into a type that computes without overflow or
// precision loss for one step, and stored back.
template <typename S, typename C>
struct Plain {
  using Storage = S;
  using Compute = C;
  static C load(S value) { return static_cast<C>(value); }
  static S store(C value) { return static_cast<S>(value); }  // integers wrap
};
struct Half {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t bits) { return half_to_float(bits); }
  static uint16_t store(float value) { return float_to_half(value); }
};
struct BFloat16 {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t bits) { return bfloat16_to_float(bits); }
  static uint16_t store(float value) { return float_to_bfloat16(value); }
};
struct Fp8E4M3 {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t bits) { return fp8_e4m3_to_float(bits); }
  static uint8_t store(float value) { return float_to_fp8_e4m3(value); }
};
struct Fp8E5M2 {
  using Storage = uint8_t;
  using Compute = float;
  static float load(uint8_t bits) { return fp8_e5m2_to_float(bits); }
  static uint8_t store(float value) { return float_to_fp8_e5m2(value); }
};

// Integer sums and products wrap: a signed 64-bit compute type is combined in
// its unsigned counterpart (signed overflow is undefined), every other compute
// type is wide enough for one step of its storage type.
template <typename C>
C wrapping_add(C x, C y) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(x) + static_cast<U>(y));
  } else {
    return x + y;
  }
}
template <typename C>
C wrapping_mul(C x, C y) {
  if constexpr (std::is_integral_v<C> && std::is_signed_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(x) * static_cast<U>(y));
  } else {
    return x * y;
  }
}

// Calls fn.template operator()<Traits>() for the traits of `type`.
template <typename Fn>
void dispatch(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat32:
      return fn.template operator()<Plain<float, float>>();
    case DataType::kFloat64:
      return fn.template operator()<Plain<double, double>>();
    case DataType::kFloat16:
      return fn.template operator()<Half>();
    case DataType::kBFloat16:
      return fn.template operator()<BFloat16>();
    case DataType::kInt32:
      return fn.template operator()<Plain<int32_t, int64_t>>();
    case DataType::kInt8:
      return fn.template operator()<Plain<int8_t, int32_t>>();
    case DataType::kUInt8:
      return fn.template operator()<Plain<uint8_t, uint32_t>>();
    case DataType::kUInt32:
      return fn.template operator()<Plain<uint32_t, uint64_t>>();
    case DataType::kInt64:
      return fn.template operator()<Plain<int64_t, int64_t>>();
    case DataType::kUInt64:
      return fn.template operator()<Plain<uint64_t, uint64_t>>();
    case DataType::kFloat8E4M3:
      return fn.template operator()<Fp8E4M3>();
    case DataType::kFloat8E5M2:
      return fn.template operator()<Fp8E5M2>();
  }
  throw UsageError("reference algorithms: unknown data type " +
                   std::to_string(static_cast<int>(type)));
}

// Elements are accessed through memcpy so that buffers need no alignment.
template <typename Traits>
typename Traits::Compute load_at(const void* data, size_t index) {
  typename Traits::Storage value;
  std::memcpy(&value, static_cast<const unsigned char*>(data) + index * sizeof(value),
              sizeof(value));
  return Traits::load(value);
}
template <typename Traits>
void store_at(void* data, size_t index, typename Traits::Compute value) {
  typename Traits::Storage stored = Traits::store(value);
  std::memcpy(static_cast<unsigned char*>(data) + index * sizeof(stored), &stored, sizeof(stored));
}

template <typename Traits, typename Combine>
void combine_all(void* out, const void* a, const void* b, size_t count, Combine combine) {
  for (size_t i = 0; i < count; ++i) {
    store_at<Traits>(out, i, combine(load_at<Traits>(a, i), load_at<Traits>(b, i)));
  }
}

size_t bytes_of(size_t count, DataType type) { return count * element_size(type); }

unsigned char* at(void* base, size_t elements, DataType type) {
  return static_cast<unsigned char*>(base) + bytes_of(elements, type);
}
const unsigned char* at(const void* base, size_t elements, DataType type) {
  return static_cast<const unsigned char*>(base) + bytes_of(elements, type);
}

void copy_if_distinct(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memmove(dst, src, bytes);
}

void check_buffers(const char* algorithm, const void* send, const void* recv, size_t count) {
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    throw UsageError(std::string(algorithm) + ": null buffer for " + std::to_string(count) +
                     " elements");
  }
}

int mod(int value, int n) { return ((value % n) + n) % n; }

// Block b of `count` elements split over n ranks: the first count%n blocks get
// one element more.
struct Blocks {
  size_t count;
  int n;
  size_t size(int b) const {
    return count / static_cast<size_t>(n) + (static_cast<size_t>(b) < count % n ? 1 : 0);
  }
  size_t offset(int b) const {
    size_t ub = static_cast<size_t>(b);
    return ub * (count / static_cast<size_t>(n)) + std::min(ub, count % n);
  }
  size_t largest() const { return size(0); }
};

void finish_average(void* data, size_t count, DataType type, ReduceOp op, int n) {
  if (op == ReduceOp::kAvg) divide_elements(data, count, type, n);
}

// kMulSum: this rank's copy of its own input, `data`, times its scalar.
void premultiply_own_input(void* data, size_t count, DataType type, ReduceOp op, int rank) {
  if (op == ReduceOp::kMulSum) premultiply_elements(data, data, count, type, premul_scalar(rank));
}

}  // namespace

void reduce_elements(void* out, const void* a, const void* b, size_t count, DataType type,
                     ReduceOp op) {
  dispatch(type, [&]<typename Traits>() {
    using C = typename Traits::Compute;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
      case ReduceOp::kMulSum:  // the inputs were premultiplied (premultiply_elements)
        return combine_all<Traits>(out, a, b, count,
                                   [](C x, C y) -> C { return wrapping_add(x, y); });
      case ReduceOp::kProd:
        return combine_all<Traits>(out, a, b, count,
                                   [](C x, C y) -> C { return wrapping_mul(x, y); });
      case ReduceOp::kMin:
        return combine_all<Traits>(out, a, b, count, [](C x, C y) -> C { return y < x ? y : x; });
      case ReduceOp::kMax:
        return combine_all<Traits>(out, a, b, count, [](C x, C y) -> C { return x < y ? y : x; });
    }
    throw UsageError("reference algorithms: unknown reduce op " +
                     std::to_string(static_cast<int>(op)));
  });
}

void divide_elements(void* data, size_t count, DataType type, int divisor) {
  if (divisor == 0) throw UsageError("divide_elements: divisor is 0");
  dispatch(type, [&]<typename Traits>() {
    using C = typename Traits::Compute;
    C d = static_cast<C>(divisor);
    for (size_t i = 0; i < count; ++i) {
      store_at<Traits>(data, i, static_cast<C>(load_at<Traits>(data, i) / d));
    }
  });
}

void premultiply_elements(void* out, const void* in, size_t count, DataType type, double scalar) {
  dispatch(type, [&]<typename Traits>() {
    using C = typename Traits::Compute;
    // The scalar as the element type holds it (NCCL converts it to T first).
    const C factor = Traits::load(Traits::store(static_cast<C>(scalar)));
    for (size_t i = 0; i < count; ++i) {
      store_at<Traits>(out, i, wrapping_mul<C>(load_at<Traits>(in, i), factor));
    }
  });
}

void ring_all_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     ReduceOp op) {
  check_buffers("ring_all_reduce", send, recv, count);
  if (count == 0) return;
  const int n = p2p.size();
  const int r = p2p.rank();
  copy_if_distinct(recv, send, bytes_of(count, type));
  premultiply_own_input(recv, count, type, op, r);
  if (n == 1) return finish_average(recv, count, type, op, n);

  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  const Blocks blocks{count, n};
  std::vector<unsigned char> incoming(bytes_of(blocks.largest(), type));

  // Reduce-scatter: in step s send block r-s, receive block r-s-1 and add ours to
  // it. After n-1 steps block r+1 is fully reduced here.
  for (int s = 0; s < n - 1; ++s) {
    int out_block = mod(r - s, n);
    int in_block = mod(r - s - 1, n);
    size_t in_size = blocks.size(in_block);
    p2p.send_recv(right, at(recv, blocks.offset(out_block), type),
                  bytes_of(blocks.size(out_block), type), left, incoming.data(),
                  bytes_of(in_size, type));
    void* mine = at(recv, blocks.offset(in_block), type);
    reduce_elements(mine, mine, incoming.data(), in_size, type, op);
  }
  const int owned = mod(r + 1, n);
  finish_average(at(recv, blocks.offset(owned), type), blocks.size(owned), type, op, n);

  // All-gather: in step s pass on block r+1-s, receive block r-s in place.
  for (int s = 0; s < n - 1; ++s) {
    int out_block = mod(r + 1 - s, n);
    int in_block = mod(r - s, n);
    p2p.send_recv(right, at(recv, blocks.offset(out_block), type),
                  bytes_of(blocks.size(out_block), type), left,
                  at(recv, blocks.offset(in_block), type), bytes_of(blocks.size(in_block), type));
  }
}

void ring_all_gather(PointToPoint& p2p, const void* send, void* recv, size_t send_count,
                     DataType type) {
  check_buffers("ring_all_gather", send, recv, send_count);
  if (send_count == 0) return;
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t block_bytes = bytes_of(send_count, type);
  copy_if_distinct(at(recv, static_cast<size_t>(r) * send_count, type), send, block_bytes);

  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  // In step s pass on block r-s (our own first), receive block r-s-1.
  for (int s = 0; s < n - 1; ++s) {
    size_t out_block = static_cast<size_t>(mod(r - s, n));
    size_t in_block = static_cast<size_t>(mod(r - s - 1, n));
    p2p.send_recv(right, at(recv, out_block * send_count, type), block_bytes, left,
                  at(recv, in_block * send_count, type), block_bytes);
  }
}

void ring_reduce_scatter(PointToPoint& p2p, const void* send, void* recv, size_t recv_count,
                         DataType type, ReduceOp op) {
  check_buffers("ring_reduce_scatter", send, recv, recv_count);
  if (recv_count == 0) return;
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t block_bytes = bytes_of(recv_count, type);
  // kMulSum: input block b times this rank's scalar, made in `scaled` when it is
  // needed (each one is used before the next is made), so the input stays intact.
  std::vector<unsigned char> scaled(op == ReduceOp::kMulSum ? block_bytes : 0);
  auto own_block = [&](int b) -> const void* {
    const void* block = at(send, static_cast<size_t>(b) * recv_count, type);
    if (op != ReduceOp::kMulSum) return block;
    premultiply_elements(scaled.data(), block, recv_count, type, premul_scalar(r));
    return scaled.data();
  };
  if (n == 1) {
    copy_if_distinct(recv, own_block(0), block_bytes);
    return finish_average(recv, recv_count, type, op, n);
  }

  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  // The partial sum travels right: in step s we send partial block r-s-1 (our own
  // input at step 0) and receive partial block r-s-2, to which we add our input.
  // The last block received is block r. Two scratch blocks alternate, so the
  // input is never written.
  std::vector<unsigned char> outgoing(block_bytes);
  std::vector<unsigned char> incoming(block_bytes);
  for (int s = 0; s < n - 1; ++s) {
    const void* out_data =
        s == 0 ? own_block(mod(r - 1, n)) : static_cast<const void*>(outgoing.data());
    p2p.send_recv(right, out_data, block_bytes, left, incoming.data(), block_bytes);
    int in_block = mod(r - s - 2, n);
    if (s < n - 2) {
      reduce_elements(incoming.data(), incoming.data(), own_block(in_block), recv_count, type, op);
      std::swap(outgoing, incoming);
    } else {
      // in_block == r; in place, recv aliases own_block(r) element for element.
      reduce_elements(recv, incoming.data(), own_block(in_block), recv_count, type, op);
    }
  }
  finish_average(recv, recv_count, type, op, n);
}

void recursive_doubling_all_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count,
                                   DataType type, ReduceOp op) {
  check_buffers("recursive_doubling_all_reduce", send, recv, count);
  if (count == 0) return;
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t bytes = bytes_of(count, type);
  copy_if_distinct(recv, send, bytes);
  premultiply_own_input(recv, count, type, op, r);
  if (n == 1) return finish_average(recv, count, type, op, n);

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;
  std::vector<unsigned char> incoming(bytes);

  // Fold: among ranks [0, 2*extra) each even rank hands its vector to the odd one
  // above it and sits out; the remaining p ranks get new ranks 0..p-1.
  int new_rank;
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      p2p.send(r + 1, recv, bytes);
      new_rank = -1;
    } else {
      p2p.recv(r - 1, incoming.data(), bytes);
      reduce_elements(recv, recv, incoming.data(), count, type, op);
      new_rank = r / 2;
    }
  } else {
    new_rank = r - extra;
  }
  auto old_rank = [extra](int nr) { return nr < extra ? 2 * nr + 1 : nr + extra; };

  if (new_rank >= 0) {
    for (int mask = 1; mask < p; mask <<= 1) {
      int partner = old_rank(new_rank ^ mask);
      p2p.send_recv(partner, recv, bytes, partner, incoming.data(), bytes);
      reduce_elements(recv, recv, incoming.data(), count, type, op);
    }
    finish_average(recv, count, type, op, n);
  }

  // Unfold: the odd ranks return the result to their even partner.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      p2p.recv(r + 1, recv, bytes);
    } else {
      p2p.send(r - 1, recv, bytes);
    }
  }
}

void chain_broadcast(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     int root, size_t chunk_bytes) {
  const int n = p2p.size();
  const int r = p2p.rank();
  if (root < 0 || root >= n) {
    throw UsageError("chain_broadcast: root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(n));
  }
  check_buffers("chain_broadcast", r == root ? send : recv, recv, count);
  if (count == 0) return;
  const size_t bytes = bytes_of(count, type);
  if (r == root) copy_if_distinct(recv, send, bytes);
  if (n == 1) return;

  if (chunk_bytes == 0) chunk_bytes = kChainBroadcastChunkBytes;
  const size_t chunk_elements = std::max<size_t>(1, chunk_bytes / element_size(type));
  const size_t chunks = (count + chunk_elements - 1) / chunk_elements;
  auto chunk_data = [&](size_t k) { return at(recv, k * chunk_elements, type); };
  auto chunk_size = [&](size_t k) {
    return bytes_of(std::min(chunk_elements, count - k * chunk_elements), type);
  };

  // Position p in the chain (root = 0). In step t the link (p-1, p) carries
  // chunk t-p+1, so rank p receives chunk t-p+1 and forwards chunk t-p; both ends
  // of every link agree on the step, and the chain has no cycle to deadlock on.
  const size_t position = static_cast<size_t>(mod(r - root, n));
  const bool last = position == static_cast<size_t>(n - 1);
  const int right = mod(r + 1, n);
  const int left = mod(r - 1, n);
  if (position == 0) {
    for (size_t k = 0; k < chunks; ++k) p2p.send(right, chunk_data(k), chunk_size(k));
    return;
  }
  // Steps t = position-1 .. position-1+chunks (the last one only forwards).
  for (size_t i = 0; i <= chunks; ++i) {
    const bool receive = i < chunks;       // chunk i arrives
    const bool forward = !last && i >= 1;  // chunk i-1 leaves
    if (receive && forward) {
      p2p.send_recv(right, chunk_data(i - 1), chunk_size(i - 1), left, chunk_data(i),
                    chunk_size(i));
    } else if (receive) {
      p2p.recv(left, chunk_data(i), chunk_size(i));
    } else if (forward) {
      p2p.send(right, chunk_data(i - 1), chunk_size(i - 1));
    }
  }
}

void pairwise_all_to_all(PointToPoint& p2p, const void* send, void* recv, size_t count_per_peer,
                         DataType type) {
  check_buffers("pairwise_all_to_all", send, recv, count_per_peer);
  if (count_per_peer == 0) return;
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t block_bytes = bytes_of(count_per_peer, type);
  std::vector<unsigned char> input_copy;
  if (send == recv) {
    const auto* first = static_cast<const unsigned char*>(send);
    input_copy.assign(first, first + block_bytes * static_cast<size_t>(n));
    send = input_copy.data();
  }
  auto block = [&](auto* base, int b) {
    return at(base, static_cast<size_t>(b) * count_per_peer, type);
  };
  std::memcpy(block(recv, r), block(send, r), block_bytes);
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n);
    const int from = mod(r - k, n);
    p2p.send_recv(to, block(send, to), block_bytes, from, block(recv, from), block_bytes);
  }
}

void pairwise_all_to_allv(PointToPoint& p2p, std::span<const void* const> send,
                          std::span<const size_t> send_counts, std::span<void* const> recv,
                          std::span<const size_t> recv_counts, DataType type) {
  const int n = p2p.size();
  const int r = p2p.rank();
  const size_t un = static_cast<size_t>(n);
  if (send.size() != un || send_counts.size() != un || recv.size() != un ||
      recv_counts.size() != un) {
    throw UsageError("pairwise_all_to_allv: " + std::to_string(send.size()) + " send blocks, " +
                     std::to_string(send_counts.size()) + " send counts, " +
                     std::to_string(recv.size()) + " receive blocks and " +
                     std::to_string(recv_counts.size()) + " receive counts for " +
                     std::to_string(n) + " ranks; each needs one per rank");
  }
  for (size_t p = 0; p < un; ++p) {
    if (send_counts[p] > 0 && send[p] == nullptr)
      throw UsageError("pairwise_all_to_allv: null send block for rank " + std::to_string(p));
    if (recv_counts[p] > 0 && recv[p] == nullptr)
      throw UsageError("pairwise_all_to_allv: null receive block for rank " + std::to_string(p));
  }
  const size_t ur = static_cast<size_t>(r);
  if (send_counts[ur] != recv_counts[ur]) {
    throw UsageError("pairwise_all_to_allv: rank " + std::to_string(r) + " sends " +
                     std::to_string(send_counts[ur]) + " elements to itself but receives " +
                     std::to_string(recv_counts[ur]));
  }
  copy_if_distinct(recv[ur], send[ur], bytes_of(send_counts[ur], type));
  for (int k = 1; k < n; ++k) {
    const size_t to = static_cast<size_t>(mod(r + k, n));
    const size_t from = static_cast<size_t>(mod(r - k, n));
    p2p.send_recv(static_cast<int>(to), send[to], bytes_of(send_counts[to], type),
                  static_cast<int>(from), recv[from], bytes_of(recv_counts[from], type));
  }
}

void binomial_reduce(PointToPoint& p2p, const void* send, void* recv, size_t count, DataType type,
                     ReduceOp op, int root) {
  const int n = p2p.size();
  const int r = p2p.rank();
  if (root < 0 || root >= n) {
    throw UsageError("binomial_reduce: root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(n));
  }
  check_buffers("binomial_reduce", send, r == root ? recv : send, count);
  if (count == 0) return;
  const size_t bytes = bytes_of(count, type);
  // The partial result: the root's own output, a scratch copy elsewhere (a
  // non-root's recv is not touched).
  std::vector<unsigned char> scratch;
  void* partial = recv;
  if (r != root) {
    scratch.resize(bytes);
    partial = scratch.data();
  }
  copy_if_distinct(partial, send, bytes);
  premultiply_own_input(partial, count, type, op, r);
  std::vector<unsigned char> incoming;
  const int distance = mod(r - root, n);
  for (int step = 1; step < n; step <<= 1) {
    if (distance & step) {
      p2p.send(mod(distance - step + root, n), partial, bytes);
      return;
    }
    if (distance + step < n) {
      incoming.resize(bytes);
      p2p.recv(mod(distance + step + root, n), incoming.data(), bytes);
      reduce_elements(partial, partial, incoming.data(), count, type, op);
    }
  }
  finish_average(partial, count, type, op, n);  // only the root gets here
}

void linear_gather(PointToPoint& p2p, const void* send, void* recv, size_t send_count,
                   DataType type, int root) {
  const int n = p2p.size();
  const int r = p2p.rank();
  if (root < 0 || root >= n) {
    throw UsageError("linear_gather: root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(n));
  }
  check_buffers("linear_gather", send, r == root ? recv : send, send_count);
  if (send_count == 0) return;
  const size_t block_bytes = bytes_of(send_count, type);
  if (r != root) return p2p.send(root, send, block_bytes);
  for (int from = 0; from < n; ++from) {
    void* block = at(recv, static_cast<size_t>(from) * send_count, type);
    if (from == root) {
      copy_if_distinct(block, send, block_bytes);
    } else {
      p2p.recv(from, block, block_bytes);
    }
  }
}

void linear_scatter(PointToPoint& p2p, const void* send, void* recv, size_t recv_count,
                    DataType type, int root) {
  const int n = p2p.size();
  const int r = p2p.rank();
  if (root < 0 || root >= n) {
    throw UsageError("linear_scatter: root " + std::to_string(root) + " is not a rank of " +
                     std::to_string(n));
  }
  check_buffers("linear_scatter", r == root ? send : recv, recv, recv_count);
  if (recv_count == 0) return;
  const size_t block_bytes = bytes_of(recv_count, type);
  if (r != root) return p2p.recv(root, recv, block_bytes);
  for (int to = 0; to < n; ++to) {
    const void* block = at(send, static_cast<size_t>(to) * recv_count, type);
    if (to == root) {
      copy_if_distinct(recv, block, block_bytes);
    } else {
      p2p.send(to, block, block_bytes);
    }
  }
}

}  // namespace ccscope
