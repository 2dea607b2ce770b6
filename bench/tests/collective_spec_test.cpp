#include "collective_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_calls.h"

namespace ccscope::bench {
namespace {

TEST(CollectiveSpec, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kSendRecv, 4), 1.0);
}

TEST(CollectiveSpec, AllReduceUsesTheWholeSize) {
  const Layout l = layout_for(Collective::kAllReduce, 1024, 4, 3, 1);
  EXPECT_EQ(l.param_count, 256u);
  EXPECT_EQ(l.send_count, 256u);
  EXPECT_EQ(l.recv_count, 256u);
  EXPECT_EQ(l.size_bytes, 1024u);
}

// nccl-tests 2.19: each rank's block is (count / ranks) & ~(16 / element size - 1)
// elements, i.e. a multiple of 16 bytes. Expected values worked out by hand:
struct SizeCase {
  Collective collective;
  size_t element_bytes;  // 1 int8, 2 half/bfloat16, 4 float, 8 double
  int ranks;
  size_t requested;
  size_t count;       // the "count" column (param_count)
  size_t size_bytes;  // the "size" column
};
const SizeCase kSizeTable[] = {
    // allgather: size = ranks x block x element size
    {Collective::kAllGather, 1, 2, 1000, 496, 992},            // 1000/2 = 500 -> 496
    {Collective::kAllGather, 2, 3, 1000, 160, 960},            // 500/3 = 166 -> 160 (x8)
    {Collective::kAllGather, 2, 6, 1048576, 87376, 1048512},   // 524288/6 = 87381 -> 87376
    {Collective::kAllGather, 4, 8, 1000, 28, 896},             // 250/8 = 31 -> 28 (x4)
    {Collective::kAllGather, 8, 3, 1000, 40, 960},             // 125/3 = 41 -> 40 (x2)
    {Collective::kAllGather, 2, 2, 8, 0, 0},                   // 4/2 = 2 -> 0
    {Collective::kAllGather, 4, 2, 1048576, 131072, 1048576},  // exact
    // reducescatter: size = ranks x block x element size (the input)
    {Collective::kReduceScatter, 4, 3, 1048576, 87380, 1048560},  // 262144/3 = 87381 -> 87380
    {Collective::kReduceScatter, 1, 6, 100, 16, 96},              // 100/6 = 16 -> 16
    {Collective::kReduceScatter, 2, 8, 100, 0, 0},                // 50/8 = 6 -> 0 (x8)
    {Collective::kReduceScatter, 8, 6, 1000, 20, 960},            // 125/6 = 20 -> 20
    {Collective::kReduceScatter, 1, 3, 1000, 320, 960},           // 333 -> 320
    // alltoall: size = ranks x per-peer block x element size
    {Collective::kAllToAll, 4, 3, 1000, 80, 960},            // 250/3 = 83 -> 80
    {Collective::kAllToAll, 8, 6, 1048576, 21844, 1048512},  // 131072/6 = 21845 -> 21844
    {Collective::kAllToAll, 1, 2, 40, 16, 32},               // 20 -> 16
    {Collective::kAllToAll, 2, 8, 1000, 56, 896},            // 500/8 = 62 -> 56
    // allreduce, broadcast, sendrecv: whole elements of the requested size
    {Collective::kAllReduce, 2, 3, 1001, 500, 1000},
    {Collective::kAllReduce, 1, 6, 7, 7, 7},
    {Collective::kBroadcast, 8, 8, 1000, 125, 1000},
    {Collective::kSendRecv, 4, 6, 10, 2, 8},
};

TEST(CollectiveSpec, SizesAreNcclTests219) {
  for (const SizeCase& c : kSizeTable) {
    const Layout l = layout_for(c.collective, c.requested, c.element_bytes, c.ranks, 1);
    const std::string what = std::string(name(c.collective)) + " " +
                             std::to_string(c.element_bytes) + " B x " + std::to_string(c.ranks) +
                             " ranks, " + std::to_string(c.requested) + " B requested";
    EXPECT_EQ(l.param_count, c.count) << what;
    EXPECT_EQ(l.size_bytes, c.size_bytes) << what;
    EXPECT_EQ(
        l.param_count * c.element_bytes %
            (c.collective == Collective::kAllReduce || c.collective == Collective::kBroadcast ||
                     c.collective == Collective::kSendRecv
                 ? 1
                 : 16),
        0u)
        << what;
  }
}

TEST(CollectiveSpec, InPlaceOffsetsAreTheRanksBlock) {
  const Layout gather = layout_for(Collective::kAllGather, 1000, 4, 3, 2);
  EXPECT_EQ(gather.send_count, 80u);
  EXPECT_EQ(gather.recv_count, 240u);
  EXPECT_EQ(gather.send_in_place_offset, 160u);
  const Layout scatter = layout_for(Collective::kReduceScatter, 1 << 20, 4, 4, 3);
  EXPECT_EQ(scatter.send_count, 262144u);
  EXPECT_EQ(scatter.recv_count, 65536u);
  EXPECT_EQ(scatter.recv_in_place_offset, 3u * 65536u);
}

// nccl-tests 2.19 for `-b 8 -e 128M -f 2` (float, its default) at 2, 3 and 4
// ranks: its size column is max(sendcount, recvcount) x 4 and its count column
// paramcount. Worked out by hand from reduce.cu, gather.cu, scatter.cu and
// alltoallv.cu (count = size / 4):
//  reduce:  paramcount = count; size = the requested size.
//  gather, scatter: paramcount = (count / n) & ~3 (16-byte blocks of floats);
//           size = n x paramcount x 4.
//  alltoallv (no traffic matrix, spread 1.0): paramcount as gather; total
//           T = n x paramcount x 4 bytes; rank i sends rank j
//           floor(d x T / (n(n-1)/2)) & ~15 bytes, d = (j - i) mod n; size is a
//           rank's sum over j (the same for every rank).
struct NcclTestsRow {
  Collective collective;
  int ranks;
  size_t requested;
  size_t count;       // nccl-tests' "count" column
  size_t size_bytes;  // its "size" column
};
constexpr size_t k128M = size_t{128} << 20;
const NcclTestsRow kNcclTestsRows[] = {
    {Collective::kReduce, 2, 8, 2, 8},
    {Collective::kReduce, 3, 1024, 256, 1024},
    {Collective::kReduce, 4, k128M, 33554432, k128M},
    // 8 B: 2 floats / n -> 0 elements at every rank count.
    {Collective::kGather, 2, 8, 0, 0},
    {Collective::kGather, 2, 32, 4, 32},                   // 8 / 2 = 4
    {Collective::kGather, 3, 32, 0, 0},                    // 8 / 3 = 2 -> 0
    {Collective::kGather, 3, 64, 4, 48},                   // 16 / 3 = 5 -> 4
    {Collective::kGather, 3, 1024, 84, 1008},              // 256 / 3 = 85 -> 84
    {Collective::kGather, 3, k128M, 11184808, 134217696},  // 33554432 / 3 = 11184810 -> ..808
    {Collective::kGather, 4, 32, 0, 0},                    // 8 / 4 = 2 -> 0
    {Collective::kGather, 4, k128M, 8388608, k128M},
    {Collective::kScatter, 2, 16, 0, 0},  // 4 / 2 = 2 -> 0
    {Collective::kScatter, 3, 1024, 84, 1008},
    {Collective::kScatter, 4, 64, 4, 64},
    {Collective::kScatter, 4, k128M, 8388608, k128M},
    // n = 2: rank i sends its partner all of T (d = 1, sum of distances 1).
    {Collective::kAllToAllV, 2, 16, 0, 0},
    {Collective::kAllToAllV, 2, 32, 4, 32},
    {Collective::kAllToAllV, 2, k128M, 16777216, k128M},
    // n = 3: T/3 = 4 x paramcount and 2T/3 = 8 x paramcount, multiples of 16.
    {Collective::kAllToAllV, 3, 64, 4, 48},
    {Collective::kAllToAllV, 3, 1024, 84, 1008},
    {Collective::kAllToAllV, 3, k128M, 11184808, 134217696},
    // n = 4, sum of distances 6:
    //   64 B:   T = 64:   10 -> 0, 21 -> 16, 32 -> 32: 48
    {Collective::kAllToAllV, 4, 64, 4, 48},
    //   128 B:  T = 128:  21 -> 16, 42 -> 32, 64: 112
    {Collective::kAllToAllV, 4, 128, 8, 112},
    //   1 KiB:  T = 1024: 170 -> 160, 341 -> 336, 512: 1008
    {Collective::kAllToAllV, 4, 1024, 64, 1008},
    //   128 MiB: T = 2^27: 22369621 -> 22369616, 44739242 -> 44739232, 67108864
    {Collective::kAllToAllV, 4, k128M, 8388608, 134217712},
};

TEST(CollectiveSpec, ReduceGatherScatterAllToAllVSizesAreNcclTests219) {
  for (const NcclTestsRow& row : kNcclTestsRows) {
    const std::string what = std::string(name(row.collective)) + " x" + std::to_string(row.ranks) +
                             " " + std::to_string(row.requested) + " B";
    for (int rank = 0; rank < row.ranks; ++rank) {
      const Layout l = layout_for(row.collective, row.requested, 4, row.ranks, rank);
      EXPECT_EQ(l.param_count, row.count) << what;
      EXPECT_EQ(l.size_bytes, row.size_bytes) << what << " rank " << rank;
    }
  }
}

// The whole sweep -b 8 -e 128M -f 2 at 2, 3, 4 ranks against nccl-tests'
// alltoallv arithmetic as it writes it (in double, then truncated and rounded
// down to 16 bytes), and the per-peer blocks against the receivers'.
TEST(CollectiveSpec, AllToAllVPerPeerBlocksAreNcclTestsDistanceWeighted) {
  for (int n : {2, 3, 4}) {
    const size_t un = static_cast<size_t>(n);
    for (size_t size = 8; size <= k128M; size *= 2) {
      const size_t block = (size / 4 / un) & ~size_t{3};
      const double total = static_cast<double>(block * un * 4);
      const double sum_of_distances = n * (n - 1) / 2.0;
      auto peer_bytes = [&](size_t from, size_t to) {
        const double distance = static_cast<double>((to + un - from) % un);
        return static_cast<size_t>(distance * total / sum_of_distances) & ~size_t{15};
      };
      std::vector<Layout> layouts;
      for (int r = 0; r < n; ++r)
        layouts.push_back(layout_for(Collective::kAllToAllV, size, 4, n, r));
      for (size_t r = 0; r < un; ++r) {
        const Layout& l = layouts[r];
        size_t sent = 0;
        for (size_t p = 0; p < un; ++p) {
          EXPECT_EQ(l.send_counts[p] * 4, peer_bytes(r, p)) << n << " ranks, " << size << " B";
          EXPECT_EQ(l.recv_counts[p], layouts[p].send_counts[r]);
          EXPECT_EQ(l.send_displacements[p], sent);
          // Where p's block for r starts in p's send buffer.
          EXPECT_EQ(l.source_offsets[p], layouts[p].send_displacements[r]);
          sent += l.send_counts[p];
        }
        EXPECT_EQ(l.size_bytes, sent * 4);
        EXPECT_EQ(l.param_count, block);
      }
    }
  }
}

TEST(CollectiveSpec, NewCollectivesBusFactorsAndRoots) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kScatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAllV, 2), 0.5);
  EXPECT_TRUE(has_root(Collective::kReduce));
  EXPECT_TRUE(has_root(Collective::kGather));
  EXPECT_TRUE(has_root(Collective::kScatter));
  EXPECT_FALSE(has_root(Collective::kAllToAllV));
  EXPECT_TRUE(has_reduction(Collective::kReduce));
  EXPECT_FALSE(supports_in_place(Collective::kAllToAllV));
  EXPECT_TRUE(supports_in_place(Collective::kScatter));
  // In place (nccl-tests' offsets x rank): gather's input at the rank's block of
  // the output, scatter's output at the rank's block of the input.
  const Layout gather = layout_for(Collective::kGather, 1000, 4, 3, 2);
  EXPECT_EQ(gather.send_in_place_offset, 2u * 80u);
  const Layout scatter = layout_for(Collective::kScatter, 1000, 4, 3, 2);
  EXPECT_EQ(scatter.recv_in_place_offset, 2u * 80u);
}

// Every described collective has bench's call (adding one without it fails here).
TEST(CollectiveSpec, EveryCollectiveHasItsCall) {
  for (const CollectiveDescription& d : all_collectives())
    EXPECT_NE(collective_call(d.id), nullptr) << d.name;
}

TEST(CollectiveSpec, Names) {
  EXPECT_EQ(parse_collective("allreduce"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("all_reduce_perf"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("reduce_scatter"), Collective::kReduceScatter);
  EXPECT_FALSE(parse_collective("gossip"));
  EXPECT_FALSE(supports_in_place(Collective::kAllToAll));
  EXPECT_TRUE(supports_in_place(Collective::kAllGather));
}

}  // namespace
}  // namespace ccscope::bench
