#include "ccscope/job/backend_registry.h"

#include <gtest/gtest.h>

#include "ccscope/collectives/error.h"
#include "ccscope/job/wait_policy.h"

namespace ccscope::job {
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

TEST(BackendChoice, SharedGpuNoteNamesTheLibraryThatRefuses) {
  const BackendChoice c =
      choose_default_backend({"a", "a"}, {"0000:01:00.0", "0000:01:00.0"}, false);
  EXPECT_NE(c.note.find(", which NCCL refuses, so the default backend is mpi; --backend nccl "
                        "--isolate-ranks lets ranks share a GPU"),
            std::string::npos)
      << c.note;
}

TEST(WaitPolicy, RanksOutnumberingTheCpusYield) {
  EXPECT_FALSE(choose_wait_policy(2, 2, nullptr).yield);
  EXPECT_FALSE(choose_wait_policy(1, 64, nullptr).yield);
  const WaitPolicy shared = choose_wait_policy(4, 2, nullptr);
  EXPECT_TRUE(shared.yield);
  EXPECT_EQ(shared.why, "4 ranks share this host's 2 CPUs");
  EXPECT_EQ(choose_wait_policy(2, 1, nullptr).why, "2 ranks share this host's 1 CPU");
}

TEST(WaitPolicy, TheVariableDecidesAndABadValueIsRefused) {
  EXPECT_TRUE(choose_wait_policy(1, 8, "1").yield);
  EXPECT_FALSE(choose_wait_policy(8, 1, "0").yield);
  EXPECT_EQ(choose_wait_policy(8, 1, "0").why, "CCSCOPE_YIELD_WHEN_IDLE=0");
  try {
    (void)choose_wait_policy(1, 8, "yes");
    FAIL() << "'yes' was taken";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "CCSCOPE_YIELD_WHEN_IDLE='yes': give 1 (waits yield the core) or 0 (they spin)");
  }
}

TEST(WaitPolicy, TheHostsCpusAreTheUnionOfItsRanksMasksWithinTheQuota) {
  EXPECT_EQ(host_cpus({{0}, {1}}, 0), 2u);  // bound to a core each: not shared
  EXPECT_EQ(host_cpus({{0, 1}, {0, 1}, {0, 1}}, 0), 2u);
  EXPECT_EQ(host_cpus({{0}, {0}}, 0), 1u);      // taskset -c 0
  EXPECT_EQ(host_cpus({{0, 1, 2, 3}}, 2), 2u);  // a container limited to 2 CPUs
  EXPECT_EQ(host_cpus({{}, {}}, 0), 1u);        // masks unknown: at least one
  EXPECT_EQ(host_cpus({{}, {}}, 3), 3u);
  EXPECT_FALSE(affinity_cpus().empty());  // this process runs somewhere
}

TEST(BackendRegistry, BuiltInBackendsSayWhatTheyAre) {
  const Backend* mpi = find_backend("mpi");
  const Backend* nccl = find_backend("nccl");
  const Backend* ring = find_backend("ring");
  ASSERT_NE(mpi, nullptr);
  ASSERT_NE(nccl, nullptr);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(mpi->capabilities.device, DeviceKind::kHost);
  EXPECT_EQ(ring->capabilities.device, DeviceKind::kHost);
  EXPECT_EQ(nccl->capabilities.device, DeviceKind::kDevice);
  EXPECT_TRUE(mpi->built());
  // mpi and ring run over MPI_COMM_WORLD; the default rule passes them over in a world
  // without MPI (a torchrun or Slurm environment launch, or thread ranks).
  EXPECT_TRUE(mpi->capabilities.needs_mpi_world);
  EXPECT_TRUE(ring->capabilities.needs_mpi_world);
  EXPECT_FALSE(nccl->capabilities.needs_mpi_world);
  EXPECT_EQ(choose_default_backend({"a", "a"}, {"", ""}, false, true).backend, "mpi");
  if (const Backend* gloo = find_backend("gloo"); gloo && gloo->built()) {
    EXPECT_FALSE(gloo->capabilities.needs_mpi_world);
    EXPECT_EQ(choose_default_backend({"a", "a"}, {"", ""}, false, false).backend, "gloo");
    EXPECT_EQ(first_group_backend(DeviceKind::kHost, false), gloo);
  }
  // MPI and NCCL (one communicator per colour) split the world into groups; ccscope's ring
  // spans it whole.
  EXPECT_TRUE(mpi->capabilities.groups);
  EXPECT_TRUE(nccl->capabilities.groups);
  EXPECT_FALSE(ring->capabilities.groups);
}

// What a job whose backend spans the world only (the ring) uses for its groups: the first built
// host backend that makes them; of the device kind, NCCL where it is built.
TEST(BackendRegistry, TheFirstGroupBackendOfAKindIsBuiltAndMakesGroups) {
  const Backend* host = first_group_backend(DeviceKind::kHost);
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->name, "mpi");
  const Backend* nccl = find_backend("nccl");
  EXPECT_EQ(first_group_backend(DeviceKind::kDevice), nccl->built() ? nccl : nullptr);
  // A backend that makes groups serves itself; one that spans the world only (ring) or none
  // is served by the first host backend that does.
  EXPECT_EQ(group_backend("ring").name, "mpi");  // the ring spans the world only
  EXPECT_EQ(group_backend("mpi").name, "mpi");
  EXPECT_EQ(group_backend("nccl").name, "nccl");
  EXPECT_EQ(group_backend().name, "mpi");
}

TEST(BackendRegistry, ARegisteredBackendIsFoundAndReplacedByName) {
  const size_t before = registered_backends().size();
  Backend stub;
  stub.name = "stub";
  stub.library = "a test stand-in";
  stub.capabilities.in_place = false;
  stub.built = [] { return false; };
  stub.usable = [] { return false; };
  register_backend(stub);
  EXPECT_EQ(registered_backends().size(), before + 1);
  stub.capabilities.in_place = true;
  register_backend(stub);  // same name: replaced, not added
  EXPECT_EQ(registered_backends().size(), before + 1);
  ASSERT_NE(find_backend("stub"), nullptr);
  EXPECT_TRUE(find_backend("stub")->capabilities.in_place);
  // Not built: refused before any factory runs.
  EXPECT_THROW(make_backend("stub", World::from_hostnames(0, {"a"}), {}), UsageError);
  EXPECT_THROW(make_backend("no-such", World::from_hostnames(0, {"a"}), {}), UsageError);
}

}  // namespace
}  // namespace ccscope::job
