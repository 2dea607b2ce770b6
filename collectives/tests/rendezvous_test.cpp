// The TCP rendezvous of launches without MPI, with every rank a thread of this
// process on the loopback interface: the control collectives, the timeout that
// names the rank that did not arrive, and the refusals of inconsistent launches.
#include "ccscope/collectives/rendezvous.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "ccscope/collectives/error.h"
#include "ccscope/collectives/thread_ranks.h"
#include "ccscope/common/socket.h"

namespace ccscope {
namespace {

// A port nothing listens on now (the kernel's choice for an ephemeral bind).
int free_port() {
  Fd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof any;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&any), sizeof any);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&any), &length);
  return ntohs(any.sin_port);
}

RendezvousOptions options_for(int rank, int size, int port, int timeout_ms = 5000) {
  RendezvousOptions options;
  options.rank = rank;
  options.size = size;
  options.host = "127.0.0.1";
  options.port = port;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  options.source = "the test";
  return options;
}

// Runs `body(rank)` on `size` threads; returns what each threw ("" if nothing).
std::vector<std::string> run_ranks(int size, const std::function<void(int)>& body) {
  std::vector<std::future<std::string>> results;
  for (int rank = 0; rank < size; ++rank)
    results.push_back(std::async(std::launch::async, [&, rank]() -> std::string {
      try {
        body(rank);
        return "";
      } catch (const TimeoutError& e) {
        return std::string("timeout: ") + e.what();
      } catch (const UsageError& e) {
        return std::string("usage: ") + e.what();
      } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
      }
    }));
  std::vector<std::string> errors;
  for (auto& result : results) errors.push_back(result.get());
  return errors;
}

TEST(Rendezvous, ControlCollectivesAcrossRanks) {
  const int port = free_port();
  constexpr int kSize = 3;
  std::array<std::vector<std::string>, kSize> gathered;
  std::array<std::array<double, 2>, kSize> maxima{}, sums{};
  std::array<int64_t, kSize> counts{};
  std::array<std::vector<char>, kSize> broadcasts;
  const auto errors = run_ranks(kSize, [&](int rank) {
    const World world = World::from_channel(join_rendezvous(options_for(rank, kSize, port)), rank,
                                            kSize, "node" + std::to_string(rank % 2));
    EXPECT_EQ(world.channel_name(), "rendezvous");
    EXPECT_EQ(world.node_count(), 2);
    gathered[rank] = world.all_gather("r" + std::to_string(rank) + std::string(rank * 1000, 'x'));
    maxima[rank] = {static_cast<double>(rank), -static_cast<double>(rank)};
    world.all_reduce_max(maxima[rank]);
    sums[rank] = {1.5, static_cast<double>(rank)};
    world.all_reduce_sum(sums[rank]);
    counts[rank] = world.all_reduce_sum(int64_t{rank + 10});
    broadcasts[rank] = rank == 1 ? std::vector<char>{'i', 'd'} : std::vector<char>(5, 'z');
    world.broadcast(broadcasts[rank], 1);
    world.barrier();
    world.sleeping_barrier(std::chrono::seconds(5));
  });
  for (int rank = 0; rank < kSize; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    ASSERT_EQ(gathered[rank].size(), 3u);
    EXPECT_EQ(gathered[rank][2], "r2" + std::string(2000, 'x'));
    EXPECT_EQ(gathered[rank][0], "r0");
    EXPECT_EQ(maxima[rank][0], 2.0);
    EXPECT_EQ(maxima[rank][1], 0.0);
    EXPECT_EQ(sums[rank][0], 4.5);
    EXPECT_EQ(sums[rank][1], 3.0);
    EXPECT_EQ(counts[rank], 33);
    EXPECT_EQ(broadcasts[rank], (std::vector<char>{'i', 'd'}));
  }
}

TEST(Rendezvous, NamesTheRankThatDidNotArrive) {
  const int port = free_port();
  // Ranks 0 and 2 of 4 come; 1 and 3 never do.
  const auto errors = run_ranks(
      2, [&](int thread) { (void)join_rendezvous(options_for(thread * 2, 4, port, 600)); });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("timeout: ranks 1, 3 of 4 did not arrive within 0.6 s"), std::string::npos)
        << error;
  }
}

TEST(Rendezvous, NamesAnUnreachableRankZero) {
  const int port = free_port();
  const auto errors =
      run_ranks(1, [&](int) { (void)join_rendezvous(options_for(1, 2, port, 500)); });
  EXPECT_NE(errors[0].find("timeout: rank 1 cannot reach the rendezvous at 127.0.0.1:" +
                           std::to_string(port)),
            std::string::npos)
      << errors[0];
}

TEST(Rendezvous, RefusesInconsistentLaunches) {
  const int port = free_port();
  // Rank 1 was told the world has 3 ranks; rank 0 that it has 2.
  auto errors = run_ranks(
      2, [&](int rank) { (void)join_rendezvous(options_for(rank, rank == 0 ? 2 : 3, port, 800)); });
  EXPECT_NE(errors[1].find("usage: rank 1 was told the world has 3 ranks, rank 0 that it has 2"),
            std::string::npos)
      << errors[1];
  EXPECT_NE(errors[0].find("rank 1 of 2 did not arrive"), std::string::npos) << errors[0];

  // Two processes claim rank 1.
  const int port2 = free_port();
  errors = run_ranks(3, [&](int thread) {
    (void)join_rendezvous(options_for(thread == 0 ? 0 : 1, 3, port2, 800));
  });
  int claimed_twice = 0;
  for (const auto& error : errors)
    claimed_twice += error.find("two processes claim rank 1") != std::string::npos;
  EXPECT_EQ(claimed_twice, 1);
}

TEST(Rendezvous, RefusesAPortInUse) {
  Fd holder(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  ASSERT_EQ(::bind(holder.get(), reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  ASSERT_EQ(::listen(holder.get(), 1), 0);
  ::getsockname(holder.get(), reinterpret_cast<sockaddr*>(&any), &length);
  const auto errors = run_ranks(
      1, [&](int) { (void)join_rendezvous(options_for(0, 2, ntohs(any.sin_port), 500)); });
  EXPECT_NE(errors[0].find("usage: rank 0 cannot listen on port"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace ccscope

namespace ccscope {
namespace {

// Two processes (threads here, meeting at the rendezvous) of three thread ranks
// each: rank p*3 + t, collectives across all six.
TEST(ThreadRanks, SpanProcessesAndThreads) {
  const int port = free_port();
  constexpr int kThreads = 3;
  std::array<std::vector<std::string>, 6> gathered;
  std::array<double, 6> sums{};
  std::array<std::vector<char>, 6> broadcasts;
  std::array<int, 6> ranks{}, sizes{}, local_ranks{};
  const auto errors = run_ranks(2, [&](int process) {
    const World process_world = World::from_channel(join_rendezvous(options_for(process, 2, port)),
                                                    process, 2, "host" + std::to_string(process));
    const ThreadRanks threads(process_world, kThreads);
    std::vector<std::thread> workers;
    for (int t = 0; t < kThreads; ++t)
      workers.emplace_back([&, t] {
        const World world = threads.world_of(t);
        const auto r = static_cast<size_t>(world.rank());
        ranks[r] = world.rank();
        sizes[r] = world.size();
        local_ranks[r] = world.local_rank();
        gathered[r] = world.all_gather(std::to_string(process) + "." + std::to_string(t));
        std::array<double, 1> one{static_cast<double>(r)};
        world.all_reduce_sum(one);
        sums[r] = one[0];
        broadcasts[r] = r == 4 ? std::vector<char>{'x'} : std::vector<char>{};
        world.broadcast(broadcasts[r], 4);
        world.sleeping_barrier(std::chrono::seconds(5));
      });
    for (auto& w : workers) w.join();
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (size_t r = 0; r < 6; ++r) {
    EXPECT_EQ(ranks[r], static_cast<int>(r));
    EXPECT_EQ(sizes[r], 6);
    EXPECT_EQ(local_ranks[r], static_cast<int>(r % 3));  // by the process's host
    EXPECT_EQ(gathered[r], (std::vector<std::string>{"0.0", "0.1", "0.2", "1.0", "1.1", "1.2"}));
    EXPECT_EQ(sums[r], 15.0);
    EXPECT_EQ(broadcasts[r], std::vector<char>{'x'});
  }
}

}  // namespace
}  // namespace ccscope
