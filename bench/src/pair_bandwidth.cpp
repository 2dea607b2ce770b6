#include "ccscope/bench/pair_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "statistics.h"

namespace ccscope::bench {
namespace {

// Collective: every rank learns of any rank's wrong exchange and throws alike,
// so that none is left waiting for a peer that left.
void fail_together(const ControlPlane& control, const std::string& problem) {
  std::string problems;
  for (const std::string& text : control.all_gather(problem))
    if (!text.empty()) problems += (problems.empty() ? "" : "; ") + text;
  if (!problems.empty()) throw std::runtime_error("pair bandwidth: " + problems);
}

}  // namespace

std::vector<PairBandwidth> measure_pair_rounds(Communicator& comm, const ControlPlane& control,
                                               const std::vector<RankPairRound>& rounds,
                                               const PairBandwidthOptions& options) {
  // Bytes as uint8 elements: any size, no type to check.
  const size_t bytes = std::max<size_t>(options.bytes, 1);
  std::unique_ptr<Buffer> send = comm.allocate(bytes);
  std::unique_ptr<Buffer> recv = comm.allocate(bytes);
  {
    const std::vector<unsigned char> pattern(bytes, static_cast<unsigned char>(comm.rank() + 1));
    comm.copy_from_host(*send, 0, pattern.data(), bytes);
  }
  std::vector<PairBandwidth> results;
  for (size_t round = 0; round < rounds.size(); ++round) {
    const RankPairRound& pairs = rounds[round];
    int peer = -1;
    size_t slot = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (pairs[i].first != comm.rank() && pairs[i].second != comm.rank()) continue;
      peer = pairs[i].first == comm.rank() ? pairs[i].second : pairs[i].first;
      slot = i;
    }
    // The slower end's median time per pair: each end writes its own, max merges.
    std::vector<double> seconds(pairs.size(), 0.0);
    std::string problem;
    control.barrier();
    if (peer >= 0) {
      std::vector<double> samples;
      for (int i = 0; i < options.warmup + options.repetitions; ++i) {
        const auto start = std::chrono::steady_clock::now();
        comm.send_recv(send->data(), peer, recv->data(), peer, bytes, DataType::kUInt8);
        comm.wait(options.timeout);
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        if (i >= options.warmup) samples.push_back(took.count());
      }
      seconds[slot] = median(samples);
      // The exchange must have carried the peer's bytes (a check, not a benchmark shortcut).
      std::vector<unsigned char> got(bytes);
      comm.copy_to_host(got.data(), *recv, 0, bytes);
      const unsigned char want = static_cast<unsigned char>(peer + 1);
      for (size_t b = 0; b < bytes && problem.empty(); ++b)
        if (got[b] != want)
          problem = "rank " + std::to_string(comm.rank()) + " received a wrong byte from rank " +
                    std::to_string(peer) + " at offset " + std::to_string(b);
    }
    fail_together(control, problem);
    control.all_reduce_max(seconds);
    for (size_t i = 0; i < pairs.size(); ++i)
      results.push_back(
          {pairs[i].first, pairs[i].second, round, algorithm_bandwidth_GBps(bytes, seconds[i])});
  }
  return results;
}

namespace {

// `bytes` from `from` to `to` as a timed stream; returns GB/s on `from`, 0 elsewhere.
double one_way(PointToPoint& p2p, int from, int to, std::vector<unsigned char>& buffer,
               const PairBandwidthOptions& options, std::string& problem) {
  unsigned char ack = 0;
  const size_t bytes = buffer.size();
  if (p2p.rank() == from) {
    std::fill(buffer.begin(), buffer.end(), static_cast<unsigned char>(from + 1));
    for (int i = 0; i < options.warmup; ++i) p2p.send(to, buffer.data(), bytes);
    if (options.warmup > 0) p2p.recv(to, &ack, 1);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.repetitions; ++i) p2p.send(to, buffer.data(), bytes);
    p2p.recv(to, &ack, 1);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return algorithm_bandwidth_GBps(bytes * static_cast<size_t>(options.repetitions), took.count());
  }
  if (p2p.rank() == to) {
    // The last message is checked byte for byte; checking each one would stall
    // the stream (the next message cannot land while this rank compares).
    const unsigned char want = static_cast<unsigned char>(from + 1);
    const int messages = options.warmup + options.repetitions;
    for (int i = 0; i < messages; ++i) {
      if (i + 1 == messages)
        std::fill(buffer.begin(), buffer.end(), static_cast<unsigned char>(~want));
      p2p.recv(from, buffer.data(), bytes);
      if (i + 1 == options.warmup || i + 1 == messages) p2p.send(from, &ack, 1);
    }
    for (size_t b = 0; b < bytes && problem.empty(); ++b)
      if (buffer[b] != want)
        problem = "rank " + std::to_string(to) + " received a wrong byte from rank " +
                  std::to_string(from) + " at offset " + std::to_string(b);
  }
  return 0;
}

}  // namespace

std::vector<PairBandwidth> measure_pair_rounds_one_way(PointToPoint& p2p,
                                                       const ControlPlane& control,
                                                       const std::vector<RankPairRound>& rounds,
                                                       const PairBandwidthOptions& options) {
  std::vector<unsigned char> buffer(std::max<size_t>(options.bytes, 1));
  std::vector<PairBandwidth> results;
  for (size_t round = 0; round < rounds.size(); ++round) {
    const RankPairRound& pairs = rounds[round];
    // Per pair: a->b figure (written by a), b->a figure (written by b); sum merges.
    std::vector<double> figures(2 * pairs.size(), 0.0);
    std::string problem;
    control.barrier();
    for (size_t i = 0; i < pairs.size(); ++i) {
      const auto [a, b] = pairs[i];
      if (p2p.rank() != a && p2p.rank() != b) continue;
      figures[2 * i] = one_way(p2p, a, b, buffer, options, problem);
      figures[2 * i + 1] = one_way(p2p, b, a, buffer, options, problem);
    }
    fail_together(control, problem);
    control.all_reduce_sum(figures);
    for (size_t i = 0; i < pairs.size(); ++i) {
      PairBandwidth pair{pairs[i].first, pairs[i].second,   round, 0,
                         figures[2 * i], figures[2 * i + 1]};
      pair.GBps = std::min(pair.GBps_a_to_b, pair.GBps_b_to_a);
      results.push_back(pair);
    }
  }
  return results;
}

}  // namespace ccscope::bench
