// The whole sweep (timing passes, rotation, checks, cross-rank reduction,
// records) over the in-process transport: 1-4 ranks as threads, the ring
// backend's algorithms, the control plane over the same point-to-point links.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "adaptive.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/in_process_transport.h"
#include "collective_spec.h"
#include "sweep_runner.h"

namespace ccscope::bench {
namespace {

class Collector : public records::Reporter {
 public:
  void begin(const records::RunMetadata&) override {}
  void add(const records::BenchRecord& record) override { records.push_back(record); }
  void end(const records::RunMetadata&) override {}
  std::vector<records::BenchRecord> records;
};

class NoWatchdog : public SweepMonitor {
 public:
  void begin_phase(const std::string&) override {}
  void operation_started() override {}
  void end_phase() override {}
};

// Forwards to the ring backend and remembers where every all-reduce read from,
// as an offset into the buffer it lies in.
class RecordingCommunicator : public Communicator {
 public:
  explicit RecordingCommunicator(std::unique_ptr<Communicator> inner) : inner_(std::move(inner)) {}
  std::string backend_name() const override { return inner_->backend_name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  MemoryKind memory_kind() const override { return inner_->memory_kind(); }
  std::string device_name() const override { return inner_->device_name(); }
  std::unique_ptr<Buffer> allocate(size_t bytes) override {
    auto buffer = inner_->allocate(bytes);
    buffers_.emplace_back(static_cast<const char*>(buffer->data()), bytes);
    return buffer;
  }
  void copy_from_host(Buffer& dst, size_t offset, const void* src, size_t bytes) override {
    inner_->copy_from_host(dst, offset, src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, size_t offset, size_t bytes) override {
    inner_->copy_to_host(dst, src, offset, bytes);
  }
  void all_reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    const char* at = static_cast<const char*>(send);
    for (const auto& [begin, bytes] : buffers_)
      if (at >= begin && at < begin + bytes)
        send_offsets.push_back(static_cast<size_t>(at - begin));
    inner_->all_reduce(send, recv, count, type, op);
  }
  void all_gather(const void* send, void* recv, size_t count, DataType type) override {
    inner_->all_gather(send, recv, count, type);
  }
  void reduce_scatter(const void* send, void* recv, size_t count, DataType type,
                      ReduceOp op) override {
    inner_->reduce_scatter(send, recv, count, type, op);
  }
  void broadcast(const void* send, void* recv, size_t count, DataType type, int root) override {
    inner_->broadcast(send, recv, count, type, root);
  }
  void all_to_all(const void* send, void* recv, size_t count, DataType type) override {
    inner_->all_to_all(send, recv, count, type);
  }
  void send_recv(const void* send, int to, void* recv, int from, size_t count,
                 DataType type) override {
    inner_->send_recv(send, to, recv, from, count, type);
  }
  void batch_send_recv(std::span<const PeerSend> sends, std::span<const PeerRecv> recvs,
                       DataType type) override {
    inner_->batch_send_recv(sends, recvs, type);
  }
  void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
              int root) override {
    inner_->reduce(send, recv, count, type, op, root);
  }
  void gather(const void* send, void* recv, size_t count, DataType type, int root) override {
    inner_->gather(send, recv, count, type, root);
  }
  void scatter(const void* send, void* recv, size_t count, DataType type, int root) override {
    inner_->scatter(send, recv, count, type, root);
  }
  void all_to_all_v(const void* send, std::span<const size_t> send_counts,
                    std::span<const size_t> send_displacements, void* recv,
                    std::span<const size_t> recv_counts, std::span<const size_t> recv_displacements,
                    DataType type) override {
    inner_->all_to_all_v(send, send_counts, send_displacements, recv, recv_counts,
                         recv_displacements, type);
  }
  void wait(std::chrono::milliseconds timeout) override { inner_->wait(timeout); }
  std::unique_ptr<StampClock> make_clock(size_t stamps) override {
    return inner_->make_clock(stamps);
  }
  std::vector<size_t> send_offsets;

 private:
  std::unique_ptr<Communicator> inner_;
  std::vector<std::pair<const char*, size_t>> buffers_;
};

struct Result {
  SweepOutcome outcome;  // rank 0's
  std::vector<records::BenchRecord> records;
  std::vector<size_t> send_offsets;  // rank 0's all-reduce send offsets, in order
};

Result run_in_process(int ranks, const std::function<BenchOptions(int rank)>& options_of) {
  Result result;
  std::mutex mutex;
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    auto control = point_to_point_control(p2p);
    RecordingCommunicator comm(make_ring_communicator(p2p));
    NoWatchdog monitor;
    Collector collector;
    const JobShape shape{1, ranks, "threads"};
    const BenchOptions options = options_of(p2p.rank());
    const SweepOutcome outcome =
        run_sweep(options, *control, shape, comm, monitor, p2p.rank() == 0 ? &collector : nullptr,
                  0, [] { return 0; });
    if (p2p.rank() != 0) return;
    std::lock_guard<std::mutex> lock(mutex);
    result.outcome = outcome;
    result.records = collector.records;
    result.send_offsets = comm.send_offsets;
  });
  return result;
}

Result run_in_process(int ranks, const BenchOptions& options) {
  return run_in_process(ranks, [&](int) { return options; });
}

BenchOptions small_sweep(Collective collective, DataType type, ReduceOp op) {
  BenchOptions o;
  o.collectives = {collective};
  o.collective = collective;
  o.type = type;
  o.op = op;
  o.min_bytes = 8;
  o.max_bytes = 20000;
  o.step_factor = 11;  // 8, 88, 968, 10648 B: tiny, uneven and a few KiB
  o.iterations = 3;
  o.warmup_iterations = 1;
  o.check_iterations = 2;
  o.progress = false;
  o.timeout_seconds = 20;
  return o;
}

TEST(Sweep, EveryCollectiveTypeAndOpChecksCleanAtOneToFourRanks) {
  for (int ranks = 1; ranks <= 4; ++ranks) {
    for (const CollectiveDescription& d : all_collectives()) {
      const Collective c = d.id;
      // Every type and op at 3 ranks (not a power of two); at 1, 2 and 4 ranks
      // a float and a narrow type with every op (the layouts change with the
      // rank count, the element arithmetic does not).
      const std::vector<DataType> types =
          ranks == 3
              ? std::vector<DataType>{DataType::kFloat32, DataType::kBFloat16, DataType::kInt8,
                                      DataType::kUInt64, DataType::kFloat8E5M2}
              : std::vector<DataType>{DataType::kFloat32, DataType::kFloat8E5M2};
      for (DataType t : types) {
        const std::vector<ReduceOp> ops =
            has_reduction(c) ? all_reduce_ops() : std::vector<ReduceOp>{ReduceOp::kSum};
        for (ReduceOp op : ops) {
          BenchOptions o = small_sweep(c, t, op);
          o.root = ranks - 1;
          const std::string what = std::string(name(c)) + " " + std::string(name(t)) + " " +
                                   std::string(name(op)) + " x" + std::to_string(ranks);
          const Result r = run_in_process(ranks, o);
          const size_t placements = supports_in_place(c) ? 2 : 1;
          ASSERT_EQ(r.records.size(), 4 * placements) << what;
          EXPECT_EQ(r.outcome.wrong_elements, 0) << what;
          for (const auto& record : r.records) {
            EXPECT_EQ(record.wrong, 0) << what << " " << record.size_bytes;
            EXPECT_EQ(record.failed_checks, 0) << what;
            EXPECT_EQ(record.check_iterations, 2) << what;
            EXPECT_EQ(record.ranks, ranks) << what;
            EXPECT_TRUE(record.rotated) << what;
            EXPECT_GT(record.time_s, 0) << what;
            EXPECT_LE(record.rank_time_min_s, record.rank_time_max_s) << what;
          }
        }
      }
    }
  }
}

TEST(Sweep, InjectedFaultsAreCaught) {
  for (Collective c : {Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
                       Collective::kAllToAll, Collective::kReduce, Collective::kGather,
                       Collective::kScatter, Collective::kAllToAllV}) {
    for (int fault = 0; fault < 4; ++fault) {
      BenchOptions o = small_sweep(c, DataType::kFloat32, ReduceOp::kSum);
      o.min_bytes = o.max_bytes = 4096;
      o.root = 2;
      if (fault == 0) o.corrupt_rank = 1;  // not the root: reduce and gather leave its output alone
      if (fault == 1) o.stale_output = true;
      if (fault == 2) o.shift_block_rank = 2;
      if (fault == 3) o.corrupt_rank = 2;
      const std::string what = std::string(name(c)) + " fault " + std::to_string(fault);
      const Result r = run_in_process(3, o);
      ASSERT_FALSE(r.records.empty()) << what;
      EXPECT_GT(r.outcome.wrong_elements, 0) << what;
      for (const auto& record : r.records) {
        EXPECT_GT(record.wrong, 0) << what << (record.in_place ? " in place" : "");
        // nccl-tests stops at the first failing check: one per failing rank.
        EXPECT_GE(record.failed_checks, 1) << what;
        EXPECT_LE(record.failed_checks, 3) << what;
      }
    }
  }
}

// A backend that does not override an optional collective: the
// Communicator's default says so in one line, a UsageError (exit 2).
TEST(Sweep, ACollectiveTheBackendLacksIsAUsageErrorNamingBoth) {
  class WithoutReduce : public RecordingCommunicator {
   public:
    using RecordingCommunicator::RecordingCommunicator;
    void reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                int root) override {
      Communicator::reduce(send, recv, count, type, op, root);  // the default
    }
  };
  std::string message;
  InProcessTransport::run(1, [&](PointToPoint& p2p) {
    auto control = point_to_point_control(p2p);
    WithoutReduce comm(make_ring_communicator(p2p));
    NoWatchdog monitor;
    try {
      run_sweep(small_sweep(Collective::kReduce, DataType::kFloat32, ReduceOp::kSum), *control,
                {1, 1, "threads"}, comm, monitor, nullptr, 0, [] { return 0; });
    } catch (const UsageError& e) {
      message = e.what();
    }
  });
  EXPECT_EQ(message, "reduce is not supported by the ring backend; choose another --backend");
}

TEST(Sweep, KnownLibraryIssueNamesTheUnsignedMinMaxBug) {
  EXPECT_NE(known_library_issue("mpi", DataType::kUInt8, ReduceOp::kMax).find("mpich#6083"),
            std::string::npos);
  EXPECT_FALSE(known_library_issue("mpi", DataType::kUInt64, ReduceOp::kMin).empty());
  EXPECT_EQ(known_library_issue("mpi", DataType::kInt8, ReduceOp::kMax), "");
  EXPECT_EQ(known_library_issue("mpi", DataType::kUInt32, ReduceOp::kSum), "");
  EXPECT_EQ(known_library_issue("ring", DataType::kUInt32, ReduceOp::kMax), "");
}

TEST(Sweep, RotationOffsetsAreNcclTests) {
  EXPECT_EQ(rotation_offset(1024, 8192, 0, true), 0u);
  EXPECT_EQ(rotation_offset(1024, 8192, 3, true), 3072u);
  EXPECT_EQ(rotation_offset(1024, 8192, 8, true), 0u);
  EXPECT_EQ(rotation_offset(1024, 8192, 11, true), 3072u);
  EXPECT_EQ(rotation_offset(3000, 8192, 1, true), 3000u);  // 2 steps fit
  EXPECT_EQ(rotation_offset(3000, 8192, 2, true), 0u);
  EXPECT_EQ(rotation_offset(8192, 8192, 5, true), 0u);  // the largest size never moves
  EXPECT_EQ(rotation_offset(0, 8192, 5, true), 0u);
  EXPECT_EQ(rotation_offset(1024, 8192, 3, false), 0u);
}

TEST(Sweep, TimedIterationsRotateThroughTheBuffer) {
  BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
  o.min_bytes = 1024;
  o.max_bytes = 4096;
  o.step_factor = 4;
  o.iterations = 6;
  o.warmup_iterations = 2;
  o.check_iterations = 1;
  const Result on = run_in_process(2, o);
  // 1 KiB in 4 KiB: out of place, the offsets cycle 0, 1K, 2K, 3K; checks at 0.
  std::set<size_t> seen(on.send_offsets.begin(), on.send_offsets.end());
  EXPECT_TRUE(seen.count(1024) && seen.count(2048) && seen.count(3072));
  for (size_t offset : on.send_offsets) EXPECT_EQ(offset % 1024, 0u);
  o.rotate_buffers = false;
  const Result off = run_in_process(2, o);
  for (size_t offset : off.send_offsets) EXPECT_EQ(offset, 0u);  // recv buffer is in place
  ASSERT_FALSE(off.records.empty());
  EXPECT_FALSE(off.records[0].rotated);
}

TEST(Sweep, AggregatedIterationsCountEveryOperation) {
  BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
  o.min_bytes = o.max_bytes = 256;
  o.iterations = 4;
  o.warmup_iterations = 1;
  o.check_iterations = 1;
  o.aggregate_iterations = 3;
  const Result r = run_in_process(2, o);
  // Per placement: warm-up 1x3, timed 4x3, distribution 4x3, check 1 = 28.
  EXPECT_EQ(r.send_offsets.size(), 2u * 28u);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].aggregate_iterations, 3);
}

TEST(Sweep, AdaptiveRecordsCarryTheirInterval) {
  BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
  o.min_bytes = o.max_bytes = 1024;
  o.target_ci_percent = 50;      // loose: threads on a loaded host still converge
  o.max_seconds_per_size = 0.5;  // a bound on the test, not its subject
  const Result r = run_in_process(2, o);
  ASSERT_EQ(r.records.size(), 2u);
  for (const auto& record : r.records) {
    EXPECT_EQ(record.target_ci_percent, 50);
    EXPECT_GE(record.timing_samples, 1u);
    EXPECT_EQ(static_cast<size_t>(record.iterations),
              record.timing_samples * record.iterations_per_sample);
    EXPECT_GT(record.time_s, 0);
    EXPECT_EQ(record.wrong, 0);
    // Converged means at least the minimum of samples and an interval within the target.
    if (record.converged) {
      EXPECT_GE(record.timing_samples, StoppingRule{}.min_samples);
      EXPECT_LE(record.ci_half_width_percent, 50);
    }
    EXPECT_NE(record.time_method.find("--target-ci"), std::string::npos);
  }
}

TEST(Sweep, RanksThatDisagreeOnStoppingStopTogether) {
  // Rank 1's budget is spent almost at once (1e-9 s, stretched to what the
  // fixed -n 20 -w 5 would spend on the row: row_budget_seconds), rank 0's
  // never is and its target cannot be met: alone, rank 0 would time batches
  // until the sample limit (100,000). The vote reduced with every batch stops
  // both together, once the row has an interval and rank 1's budget is spent.
  const auto options_of = [](int rank) {
    BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
    o.min_bytes = o.max_bytes = 256;
    o.target_ci_percent = 1e-9;
    o.max_seconds_per_size = rank == 1 ? 1e-9 : 1e6;
    return o;
  };
  const Result r = run_in_process(2, options_of);
  ASSERT_EQ(r.records.size(), 2u);
  for (const auto& record : r.records) {
    EXPECT_GE(record.timing_samples, StoppingRule{}.min_samples);
    EXPECT_LT(record.timing_samples, 2000u);  // far from the sample limit
    EXPECT_FALSE(record.converged);
  }
}

TEST(Sweep, WarmUpZeroStillIssuesOneUntimedOperation) {
  BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
  o.min_bytes = o.max_bytes = 256;
  o.iterations = 4;
  o.warmup_iterations = 0;
  o.check_iterations = 1;
  const Result r = run_in_process(2, o);
  // Per placement: warm-up 1 (nccl-tests' untimed first call), timed 4,
  // distribution 4, check 1 = 10.
  EXPECT_EQ(r.send_offsets.size(), 2u * 10u);
  ASSERT_EQ(r.records.size(), 2u);
  EXPECT_EQ(r.records[0].warmup_iterations, 1);
}

// nccl-tests differences ccscope keeps on purpose (docs/bench.md, "Differences
// from nccl-tests"): each held here.

TEST(Sweep, AllToAllAndSendRecvRunOutOfPlaceOnly) {
  // nccl-tests also times them in place (unchecked); ccscope reports only what
  // it checks, and an in-place all-to-all has no defined result in MPI.
  for (Collective c : {Collective::kAllToAll, Collective::kSendRecv}) {
    BenchOptions o = small_sweep(c, DataType::kFloat32, ReduceOp::kSum);
    o.min_bytes = o.max_bytes = 1024;
    const Result r = run_in_process(2, o);
    ASSERT_EQ(r.records.size(), 1u) << name(c);
    EXPECT_FALSE(r.records[0].in_place);
    EXPECT_EQ(r.records[0].op, "none");  // sendrecv runs once, whatever -o says
  }
}

TEST(Sweep, ReportCputimeReportsTheIssueTimeReducedOverRanks) {
  // -C 1: time_s and the bandwidths are the issue time's, by -a (nccl-tests
  // prints the printing rank's issue time and keeps the completion bandwidth).
  BenchOptions o = small_sweep(Collective::kAllReduce, DataType::kFloat32, ReduceOp::kSum);
  o.min_bytes = o.max_bytes = 4096;
  o.report_cputime = true;
  const Result r = run_in_process(2, o);
  ASSERT_EQ(r.records.size(), 2u);
  for (const auto& record : r.records) {
    EXPECT_EQ(record.time_s, record.rank_time_max_s);
    EXPECT_DOUBLE_EQ(record.algbw_GBps, 4096 / record.time_s / 1e9);
    EXPECT_NE(record.time_method.find("-C 1"), std::string::npos);
  }
}

}  // namespace
}  // namespace ccscope::bench
