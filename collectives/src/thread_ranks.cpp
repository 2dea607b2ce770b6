#include "ccscope/collectives/thread_ranks.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "ccscope/collectives/error.h"
#include "gather_channel.h"

namespace ccscope {
namespace detail {

struct ThreadGroupState {
  const World& process_world;
  int threads = 1;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> parts;
  int arrived = 0;
  unsigned long long generation = 0;
  std::vector<std::string> result;  // every rank's part, of the last generation
  std::exception_ptr error;         // what the last generation's process call threw

  ThreadGroupState(const World& world, int count) : process_world(world), threads(count) {
    parts.resize(static_cast<size_t>(count));
  }
};

namespace {

class ThreadGroupChannel final : public GatherChannel {
 public:
  ThreadGroupChannel(std::shared_ptr<ThreadGroupState> state, int index)
      : state_(std::move(state)), index_(index) {}

  std::string name() const override {
    return "threads over " + state_->process_world.channel_name();
  }
  int channel_rank() const override {
    return state_->process_world.rank() * state_->threads + index_;
  }

  std::vector<std::string> gather(const std::string& part,
                                  std::chrono::milliseconds timeout) const override {
    ThreadGroupState& s = *state_;
    std::unique_lock lock(s.mutex);
    const unsigned long long generation = s.generation;
    s.parts[static_cast<size_t>(index_)] = part;
    if (++s.arrived == s.threads) {
      // The last thread of this process carries the process's parts; the
      // others wait for it (no other thread of this process is inside the
      // process's world meanwhile).
      s.arrived = 0;
      s.error = nullptr;
      try {
        const auto size = static_cast<size_t>(s.process_world.size());
        std::vector<std::string> processes;
        bool empty = true;
        for (const auto& p : s.parts) empty = empty && p.empty();
        if (empty && timeout.count() > 0) {
          s.process_world.sleeping_barrier(timeout);
          processes.assign(size, pack_parts(s.parts));
        } else {
          processes = s.process_world.all_gather(pack_parts(s.parts));
        }
        s.result.clear();
        for (const auto& packed : processes)
          for (auto& one : unpack_parts(packed, static_cast<size_t>(s.threads)))
            s.result.push_back(std::move(one));
      } catch (...) {
        s.error = std::current_exception();
      }
      ++s.generation;
      s.changed.notify_all();
    } else {
      const auto done = [&] { return s.generation != generation; };
      if (timeout.count() == 0) {
        s.changed.wait(lock, done);
      } else if (!s.changed.wait_for(lock, timeout, done)) {
        throw TimeoutError("threads of rank " + std::to_string(channel_rank()) +
                           "'s process did not all reach the barrier within " +
                           std::to_string(timeout.count()) + " ms");
      }
    }
    if (s.error) std::rethrow_exception(s.error);
    return s.result;
  }

  [[noreturn]] void abort(int exit_code) const override { state_->process_world.abort(exit_code); }

 private:
  std::shared_ptr<ThreadGroupState> state_;
  int index_;
};

}  // namespace
}  // namespace detail

ThreadRanks::ThreadRanks(const World& process_world, int threads)
    : state_(std::make_shared<detail::ThreadGroupState>(process_world, threads)) {
  if (threads < 1) throw UsageError("threads per process must be at least 1");
}

ThreadRanks::~ThreadRanks() = default;

int ThreadRanks::threads() const { return state_->threads; }

World ThreadRanks::world_of(int index) const {
  auto channel = std::make_shared<detail::ThreadGroupChannel>(state_, index);
  const int rank = state_->process_world.rank() * state_->threads + index;
  const int size = state_->process_world.size() * state_->threads;
  return World::from_channel(std::move(channel), rank, size, state_->process_world.hostname());
}

}  // namespace ccscope
