// Adversarial interleaving: 8 ranks (2 nodes x 4 GPUs, the same pids on both
// nodes, as in containers) write NCCL 2.28's INFO lines (the format of the GPU
// machine's log, /work/shared/fixtures/nccl-logs) into one stream, as stdio
// does when stderr is a pipe: each rank's text leaves in chunks cut at random
// byte positions, and the chunks of different ranks follow each other in random
// order. However the stream is cut, the analysis must find what the clean log
// says: the same hosts and ranks, and the same findings (code, severity, role,
// host, rank, ranks, hosts, peer); only log.garbled_lines and log.truncated are
// added.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "ccscope/diag/nccl_log.h"

namespace ccscope::diag {
namespace {

constexpr int kRanks = 8;
constexpr int kPerNode = 4;

std::string host_of(int rank) { return rank < kPerNode ? "node-a" : "node-b"; }
long pid_of(int rank) { return 3401 + rank % kPerNode; }  // the same pids on both nodes
int device_of(int rank) { return rank % kPerNode; }
const char* bus_of(int rank) {
  static const char* kBus[] = {"1b000", "43000", "86000", "c1000"};
  return kBus[rank % kPerNode];
}

// What one rank prints, NCCL 2.28's lines in its order (init.cc, bootstrap.cc,
// transport/net_socket.cc, p2p.cc, init timings, destroy).
std::vector<std::string> rank_lines(int rank) {
  const std::string prefix = fmt::format("{}:{}:{} [{}] NCCL INFO ", host_of(rank), pid_of(rank),
                                         pid_of(rank), device_of(rank));
  const std::string address = fmt::format("eth0:10.0.0.{}<0>", rank < kPerNode ? 1 : 2);
  const std::string comm = fmt::format("0x55{:02x}fec057c0", rank);
  const int next = (rank + 1) % kRanks, prev = (rank + kRanks - 1) % kRanks;
  std::vector<std::string> body = {
      "Bootstrap: Using " + address,
      "cudaDriverVersion 12080",
      "NCCL version 2.28.3+cuda12.8",
      "NET/Plugin: Could not find: libnccl-net.so",
      "NET/IB : No device found.",
      "NET/IB : Using [RO]; OOB " + address,
      "Failed to initialize NET plugin IB",
      "NET/Socket : Using [0]" + address,
      "Initialized NET plugin Socket",
      "Assigned NET plugin Socket to comm",
      "Using network Socket",
      fmt::format("ncclCommInitRank comm {} rank {} nranks {} cudaDev {} nvmlDev {} busId {} "
                  "commId 0x8a143a0b90d98ea4 - Init START",
                  comm, rank, kRanks, device_of(rank), device_of(rank), bus_of(rank)),
      "NCCL_SOCKET_IFNAME set by environment to eth0",
      "RAS client listening socket at 127.0.0.1<28028>",
      "Bootstrap timings total 0.000986 (create 0.000055, send 0.000140, recv 0.000357, ring "
      "0.000026, delay 0.000001)",
      fmt::format("comm {} rank {} nRanks {} nNodes 2 localRanks {} localRank {} MNNVL 0", comm,
                  rank, kRanks, kPerNode, device_of(rank)),
      fmt::format("NVLS comm {} headRank {} nHeads {} buffSize 1048576 memSize 2097152 "
                  "nvlsPerRankSize 201326592 nvlsTotalSize 805306368",
                  comm, device_of(rank), kPerNode),
      fmt::format("Trees [0] {}/-1/-1->{}->{} [1] {}/-1/-1->{}->{}", next, rank, prev, prev, rank,
                  next),
      "P2P Chunksize set to 131072",
      "threadThresholds 8/8/64 | 64/8/64 | 512 | 512",
      "2 coll channels, 2 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per "
      "peer",
      fmt::format("ncclCommInitRank comm {} rank {} nranks {} cudaDev {} nvmlDev {} busId {} "
                  "commId 0x8a143a0b90d98ea4 - Init COMPLETE",
                  comm, rank, kRanks, device_of(rank), device_of(rank), bus_of(rank)),
      fmt::format("Init timings - ncclCommInitRank: rank {} nranks {} total 0.45 (kernels 0.41, "
                  "alloc 0.02, bootstrap 0.01, allgathers 0.00, topo 0.00, graphs 0.00, "
                  "connections 0.00, rest 0.00)",
                  rank, kRanks),
  };
  // The ring 0 -> 1 -> ... -> 7 -> 0: NET/Socket between the nodes, P2P inside.
  for (int channel = 0; channel < 2; ++channel) {
    const bool net_out = host_of(rank) != host_of(next), net_in = host_of(rank) != host_of(prev);
    if (net_in)
      body.push_back(fmt::format("Channel {:02}/0 : {}[{}] -> {}[{}] [receive] via NET/Socket/0",
                                 channel, prev, device_of(prev), rank, device_of(rank)));
    body.push_back(fmt::format("Channel {:02}/0 : {}[{}] -> {}[{}] {}via {}", channel, rank,
                               device_of(rank), next, device_of(next), net_out ? "[send] " : "",
                               net_out ? "NET/Socket/0" : "P2P/CUMEM/read"));
  }
  body.push_back("Connected all rings, use ring PXN 0 GDR 0");
  body.push_back(fmt::format("comm {} rank {} nranks {} cudaDev {} busId {} - Destroy COMPLETE",
                             comm, rank, kRanks, device_of(rank), bus_of(rank)));
  std::vector<std::string> out;
  for (const auto& line : body) out.push_back(prefix + line + "\n");
  if (rank == 0) out.insert(out.end() - 1, "allreduce n=8 4194304 B: 4542.4 us busbw 0.92 GB/s\n");
  return out;
}

// The clean log: whole lines, the ranks taking turns.
std::string clean_log() {
  std::vector<std::vector<std::string>> lines;
  for (int r = 0; r < kRanks; ++r) lines.push_back(rank_lines(r));
  std::string out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (const auto& l : lines)
      if (i < l.size()) {
        out += l[i];
        any = true;
      }
    if (!any) return out;
  }
}

// The same ranks' text, each cut at random byte positions into chunks of
// [min_chunk, max_chunk] bytes, the chunks merged in random order (each rank's
// own order kept).
std::string interleaved_log(unsigned seed, size_t min_chunk, size_t max_chunk) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(min_chunk, max_chunk);
  std::vector<std::string> texts;
  for (int r = 0; r < kRanks; ++r) {
    std::string t;
    for (const auto& l : rank_lines(r)) t += l;
    texts.push_back(t);
  }
  std::vector<size_t> at(kRanks, 0);
  std::string out;
  for (;;) {
    std::vector<int> left;
    for (int r = 0; r < kRanks; ++r)
      if (at[r] < texts[r].size()) left.push_back(r);
    if (left.empty()) return out;
    const int r = left[std::uniform_int_distribution<size_t>(0, left.size() - 1)(rng)];
    const size_t n = std::min(size(rng), texts[r].size() - at[r]);
    out += texts[r].substr(at[r], n);
    at[r] += n;
  }
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (const int x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}
std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ",") + x;
  return out;
}

// "host:pid [device] rank" of every rank.
std::vector<std::string> processes(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  for (const auto& r : a.ranks)
    out.push_back(fmt::format("{}:{} [{}] rank {}", r.host, r.pid, r.cuda_device, r.rank));
  return out;
}

// Every finding but the two about damaged input, as what it concludes.
std::vector<std::string> conclusions(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  for (const auto& f : a.findings) {
    if (f.code == "log.garbled_lines" || f.code == "log.truncated") continue;
    out.push_back(fmt::format("{} {} {} host={} rank={} ranks={} hosts={} peer={}", f.code,
                              nccl_severity_name(f.severity), nccl_role_name(f.role), f.host,
                              f.rank, join(f.ranks), join(f.hosts), f.peer));
  }
  return out;
}

TEST(NcclLogInterleaving, TheCleanLogIsReadWhole) {
  const auto a = analyze_nccl_logs({{"clean.log", clean_log()}});
  EXPECT_EQ(a.hosts, (std::vector<std::string>{"node-a", "node-b"}));
  ASSERT_EQ(a.ranks.size(), size_t{kRanks});
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(a.ranks[r].rank, r);
  EXPECT_EQ(a.nodes, 2);
  EXPECT_EQ(a.inputs[0].garbled_lines, 0u);
  EXPECT_EQ(conclusions(a),
            (std::vector<std::string>{
                "net.socket_between_nodes warn  host= rank=-1 ranks=0,1,2,3,4,5,6,7 "
                "hosts=node-a,node-b peer=",
                "net.plugin_not_loaded info  host= rank=-1 ranks=0,1,2,3,4,5,6,7 "
                "hosts=node-a,node-b peer="}));
}

// "code severity" of every finding but the two about damaged input.
std::vector<std::string> codes_but_damage(const NcclLogAnalysis& a) {
  std::vector<std::string> out;
  for (const auto& f : a.findings)
    if (f.code != "log.garbled_lines" && f.code != "log.truncated")
      out.push_back(f.code + " " + nccl_severity_name(f.severity));
  return out;
}

struct Range {
  size_t min, max;
};

// Chunks from 60 bytes to a stdio buffer (a line in ten to one in a hundred
// cut): 100 streams of each size range.
TEST(NcclLogInterleaving, NoFindingChangesHoweverTheRanksAreInterleaved) {
  const auto clean = analyze_nccl_logs({{"clean.log", clean_log()}});
  const auto expected = conclusions(clean);
  size_t garbled = 0, streams = 0;
  for (const Range range : {Range{200, 4096}, Range{60, 1000}}) {
    for (unsigned seed = 1; seed <= 100; ++seed) {
      const auto text = interleaved_log(seed, range.min, range.max);
      const auto a = analyze_nccl_logs({{"mixed.log", text}});
      SCOPED_TRACE(fmt::format("seed {} chunks {}-{}", seed, range.min, range.max));
      ASSERT_EQ(a.hosts, clean.hosts) << text;
      ASSERT_EQ(processes(a), processes(clean)) << text;
      ASSERT_EQ(conclusions(a), expected) << text;
      garbled += a.inputs[0].garbled_lines;
      ++streams;
    }
  }
  // The streams were damaged: on average more than one line in each.
  EXPECT_GT(garbled, streams);
}

// Chunks of 1 to 400 bytes (half the lines cut): some ranks' numbers are
// lost with every line that said them, but no host is made up and no finding
// is added or dropped.
TEST(NcclLogInterleaving, HalfTheLinesCutGiveNoOtherFinding) {
  const auto clean = analyze_nccl_logs({{"clean.log", clean_log()}});
  for (unsigned seed = 1; seed <= 100; ++seed) {
    const auto a = analyze_nccl_logs({{"mixed.log", interleaved_log(seed, 1, 400)}});
    SCOPED_TRACE(fmt::format("seed {}", seed));
    ASSERT_EQ(a.hosts, clean.hosts);
    ASSERT_EQ(codes_but_damage(a), codes_but_damage(clean)) << nccl_log_text(a);
  }
}

}  // namespace
}  // namespace ccscope::diag
