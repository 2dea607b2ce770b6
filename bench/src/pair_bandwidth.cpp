#include "ccscope/bench/pair_bandwidth.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "statistics.h"

namespace ccscope::bench {

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
    // Every rank learns of a wrong exchange and fails alike: none is left waiting.
    std::string problems;
    for (const std::string& text : control.all_gather(problem))
      if (!text.empty()) problems += (problems.empty() ? "" : "; ") + text;
    if (!problems.empty()) throw std::runtime_error("pair bandwidth: " + problems);
    control.all_reduce_max(seconds);
    for (size_t i = 0; i < pairs.size(); ++i)
      results.push_back({pairs[i].first, pairs[i].second, round,
                         algorithm_bandwidth_GBps(bytes, seconds[i])});
  }
  return results;
}

}  // namespace ccscope::bench
