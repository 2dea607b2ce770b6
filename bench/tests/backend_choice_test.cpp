#include "backend_choice.h"

#include <gtest/gtest.h>

namespace ccscope::bench {
namespace {

TEST(BackendChoice, NoGpuAnywhereIsMpiWithoutANote) {
  const BackendChoice c = choose_default_backend({"a", "a"}, {"", ""}, false);
  EXPECT_EQ(c.backend, "mpi");
  EXPECT_EQ(c.note, "");
}

TEST(BackendChoice, OneGpuPerRankIsNccl) {
  // Two nodes of two GPUs; the same bus id on different hosts is fine.
  const BackendChoice c = choose_default_backend(
      {"a", "a", "b", "b"}, {"0000:01:00.0", "0000:02:00.0", "0000:01:00.0", "0000:02:00.0"},
      false);
  EXPECT_EQ(c.backend, "nccl");
}

TEST(BackendChoice, PerRankVisibleDevicesIsNccl) {
  // CUDA_VISIBLE_DEVICES per rank: each sees one GPU, but they differ.
  const BackendChoice c =
      choose_default_backend({"a", "a"}, {"0000:01:00.0", "0000:02:00.0"}, false);
  EXPECT_EQ(c.backend, "nccl");
}

TEST(BackendChoice, SharedGpuIsMpiUnlessIsolated) {
  const std::vector<std::string> hosts = {"a", "a", "a"};
  const std::vector<std::string> ids = {"0000:00:06.0", "0000:00:06.0", "0000:00:06.0"};
  const BackendChoice shared = choose_default_backend(hosts, ids, false);
  EXPECT_EQ(shared.backend, "mpi");
  EXPECT_NE(shared.note.find("ranks 0 and 1 on a would share GPU 0000:00:06.0"), std::string::npos)
      << shared.note;
  EXPECT_EQ(choose_default_backend(hosts, ids, true).backend, "nccl");
}

TEST(BackendChoice, ARankWithoutGpuMakesItMpi) {
  const BackendChoice c = choose_default_backend({"a", "b"}, {"0000:01:00.0", ""}, true);
  EXPECT_EQ(c.backend, "mpi");
  EXPECT_NE(c.note.find("rank 1 (b) sees no GPU"), std::string::npos) << c.note;
}

}  // namespace
}  // namespace ccscope::bench
