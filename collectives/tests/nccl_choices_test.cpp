// The NCCL backend's pure decisions (collectives/src/nccl_choices.h): they run
// without a GPU and without NCCL, so every build checks them.
#include "../src/nccl_choices.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace ccscope::nccl_choices {
namespace {

constexpr int v(int major, int minor, int patch) { return version_code(major, minor, patch); }

TEST(NcclChoices, VersionCodeMatchesNcclVersionMacro) {
  // NCCL_VERSION(X,Y,Z): X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  EXPECT_EQ(v(2, 8, 4), 2804);
  EXPECT_EQ(v(2, 9, 6), 20906);
  EXPECT_EQ(v(2, 28, 9), 22809);
  EXPECT_EQ(v(2, 28, 3), 22803);  // the GPU machine's library
  EXPECT_EQ(v(3, 0, 0), 30000);
  EXPECT_EQ(version_text(22809), "2.28.9");
  EXPECT_EQ(version_text(2804), "2.8.4");
  EXPECT_EQ(version_text(0), "");
  EXPECT_EQ(version_text(v(2, 19, 3)), "2.19.3");
}

TEST(NcclChoices, AllocatorIsNcclMemAllocFrom219WhenHeaderAndLibraryHaveIt) {
  EXPECT_EQ(choose_allocator(v(2, 28, 9), v(2, 28, 3)), Allocator::kNcclMemAlloc);
  EXPECT_EQ(choose_allocator(v(2, 19, 0), v(2, 19, 0)), Allocator::kNcclMemAlloc);
  EXPECT_EQ(choose_allocator(v(2, 18, 5), v(2, 28, 9)), Allocator::kCudaMalloc);
  EXPECT_EQ(choose_allocator(v(2, 28, 9), v(2, 18, 5)), Allocator::kCudaMalloc);
  EXPECT_STREQ(name(Allocator::kNcclMemAlloc), "ncclMemAlloc");
  EXPECT_STREQ(name(Allocator::kCudaMalloc), "cudaMalloc");
}

TEST(NcclChoices, AllToAllIsNcclAlltoAllFrom228) {
  EXPECT_EQ(choose_all_to_all(v(2, 28, 9), v(2, 28, 3)), AllToAll::kNcclAlltoAll);
  EXPECT_EQ(choose_all_to_all(v(2, 28, 0), v(2, 28, 0)), AllToAll::kNcclAlltoAll);
  EXPECT_EQ(choose_all_to_all(v(2, 27, 7), v(2, 27, 7)), AllToAll::kGroupedSendRecv);
  // Built against 2.28 but an older library loaded: as nccl-tests, fall back.
  EXPECT_EQ(choose_all_to_all(v(2, 28, 9), v(2, 27, 7)), AllToAll::kGroupedSendRecv);
  EXPECT_STREQ(name(AllToAll::kGroupedSendRecv), "grouped send/recv");
}

TEST(NcclChoices, ConfigAsNccltests219InitComms) {
  EXPECT_TRUE(uses_init_rank_config(v(2, 14, 0)));
  EXPECT_FALSE(uses_init_rank_config(v(2, 13, 4)));
  EXPECT_TRUE(sets_nvlink_centric_sched(v(2, 28, 9)));
  EXPECT_FALSE(sets_nvlink_centric_sched(v(2, 27, 7)));
}

TEST(NcclChoices, BlockingFollowsNcclCommBlocking) {
  EXPECT_EQ(effective_blocking(nullptr), 1);
  EXPECT_EQ(effective_blocking(""), 1);
  EXPECT_EQ(effective_blocking("0"), 0);
  EXPECT_EQ(effective_blocking("1"), 1);
  EXPECT_EQ(effective_blocking("yes"), 1);
  EXPECT_EQ(effective_blocking("0x"), 1);
}

TEST(NcclChoices, Fp8NeedsNccl224AndComputeCapability90) {
  EXPECT_EQ(fp8_unsupported_reason(v(2, 28, 9), v(2, 28, 3), 90), "");
  EXPECT_EQ(fp8_unsupported_reason(v(2, 24, 3), v(2, 24, 3), 100), "");
  const std::string old_header = fp8_unsupported_reason(v(2, 23, 4), v(2, 28, 3), 90);
  EXPECT_NE(old_header.find("NCCL >= 2.24 at build time"), std::string::npos) << old_header;
  EXPECT_NE(old_header.find("2.23.4"), std::string::npos) << old_header;
  const std::string old_library = fp8_unsupported_reason(v(2, 28, 9), v(2, 23, 4), 90);
  EXPECT_NE(old_library.find("at run time"), std::string::npos) << old_library;
  // A100 (8.0) and Ada (8.9) are refused, as nccl-tests drops fp8 below 9.0
  // and NCCL refuses fp8 reductions below sm_90.
  const std::string ampere = fp8_unsupported_reason(v(2, 28, 9), v(2, 28, 9), 80);
  EXPECT_NE(ampere.find("compute capability >= 9.0"), std::string::npos) << ampere;
  EXPECT_NE(ampere.find("is 8.0"), std::string::npos) << ampere;
  EXPECT_NE(fp8_unsupported_reason(v(2, 28, 9), v(2, 28, 9), 89), "");
  // One line each.
  EXPECT_EQ(ampere.find('\n'), std::string::npos);
}

TEST(NcclChoices, ResourcesSayWhatThisRunUses) {
  Resources r;
  r.header_code = v(2, 28, 9);
  r.library_code = v(2, 28, 3);
  r.allocator = Allocator::kNcclMemAlloc;
  r.all_to_all = AllToAll::kNcclAlltoAll;
  r.init_rank_config = true;
  r.nvlink_centric_sched = true;
  r.blocking = 1;
  r.min_compute_capability = 90;
  r.fp8 = true;
  r.isolate_ranks = true;
  EXPECT_EQ(resources_text(r),
            "nccl=2.28.3, nccl_header=2.28.9, alloc=ncclMemAlloc, alltoall=ncclAlltoAll, "
            "init=ncclCommInitRankConfig, nvlinkCentricSched=1, blocking=1, "
            "mulsum=ncclRedOpCreatePreMulSum, graph_capture=thread-local, min_cc=9.0, fp8=yes, "
            "hostid=per-rank");

  Resources old;
  old.header_code = v(2, 18, 5);
  old.library_code = v(2, 18, 5);
  old.blocking = 0;
  old.min_compute_capability = 80;
  const std::string text = resources_text(old);
  EXPECT_EQ(text,
            "nccl=2.18.5, nccl_header=2.18.5, alloc=cudaMalloc, alltoall=grouped send/recv, "
            "init=ncclCommInitRank, blocking=0, mulsum=ncclRedOpCreatePreMulSum, "
            "graph_capture=thread-local, min_cc=8.0, fp8=no");
  // Every pair is key=value.
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find(", ", start), text.size());
    const std::string pair = text.substr(start, end - start);
    EXPECT_NE(pair.find('='), std::string::npos) << pair;
    start = end + 2;
  }
}

}  // namespace
}  // namespace ccscope::nccl_choices
