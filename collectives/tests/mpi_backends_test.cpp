// The host backends over real MPI (run it under mpiexec with any number of ranks,
// e.g. `mpiexec -n 3 collectives_mpi_backends_test`): the mpi backend (MPI's own
// collectives, with ccscope's MPI_Ops for half/bfloat16/fp8 and the premultiplied
// sum) and the ring backend (the reference algorithms over MPI point-to-point),
// every type x every op, in place and out of place, against expected_values.h.
// Every rank runs the same tests in the same order; each test agrees on its
// verdict over all ranks, so every rank reports the same result.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/types.h"
#include "ccscope/collectives/world.h"
#include "expected_values.h"

namespace ccscope {
namespace {

const World* g_world = nullptr;

std::string describe(const Communicator& comm, const char* what, DataType type, ReduceOp op,
                     size_t count, bool in_place) {
  return comm.backend_name() + " " + what + " type=" + std::string(name(type)) +
         " op=" + std::string(name(op)) + " count=" + std::to_string(count) +
         (in_place ? " in-place" : " out-of-place") + " ranks=" + std::to_string(comm.size()) +
         " rank=" + std::to_string(comm.rank());
}

// Number of elements of `output` that differ from `expected`; the first is
// reported as a test failure on this rank.
size_t count_wrong(const unsigned char* output, const std::vector<unsigned char>& expected,
                   DataType type, const std::string& what) {
  const size_t es = element_size(type);
  size_t wrong = 0;
  for (size_t i = 0; i < expected.size() / es; ++i) {
    if (std::memcmp(output + i * es, expected.data() + i * es, es) == 0) continue;
    if (wrong++ == 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << test::get(output + i * es, type)
                    << ", expected " << test::get(expected.data() + i * es, type);
    }
  }
  return wrong;
}

// all_reduce and reduce_scatter of every type and op; returns the wrong elements
// of this rank.
// Whether this MPI library compares `T` as signed in MPI_MIN/MPI_MAX (MPICH
// 4.0: pmodels/mpich#6083), asked directly with MPI_Reduce_local.
template <typename T>
bool mpi_min_max_signed(MPI_Datatype type) {
  T in = std::numeric_limits<T>::max(), inout = 1;
  MPI_Reduce_local(&in, &inout, 1, type, MPI_MAX);
  return inout != std::numeric_limits<T>::max();
}

bool library_bug(const Communicator& comm, DataType type, ReduceOp op) {
  if (comm.backend_name() != "mpi" || (op != ReduceOp::kMin && op != ReduceOp::kMax)) return false;
  switch (type) {
    case DataType::kUInt8:
      return mpi_min_max_signed<uint8_t>(MPI_UINT8_T);
    case DataType::kUInt32:
      return mpi_min_max_signed<uint32_t>(MPI_UINT32_T);
    case DataType::kUInt64:
      return mpi_min_max_signed<uint64_t>(MPI_UINT64_T);
    default:
      return false;
  }
}

// count_wrong, except where the library itself is known to be wrong: there the
// mpi backend must hand MPI's result through unchanged (the bench reports it),
// so a 1000-element reduction must show the defect.
size_t judge(const Communicator& comm, const unsigned char* output,
             const std::vector<unsigned char>& expected, DataType type, ReduceOp op, size_t count,
             const std::string& what) {
  if (!library_bug(comm, type, op)) return count_wrong(output, expected, type, what);
  const size_t es = element_size(type);
  size_t differ = 0;
  for (size_t i = 0; i < expected.size() / es; ++i)
    differ += std::memcmp(output + i * es, expected.data() + i * es, es) != 0;
  // uint64 inputs with the top bit set are wrong under a signed comparison too.
  if (count == 1000 && comm.size() > 1 && differ == 0)
    ADD_FAILURE() << what << ": MPI's known unsigned min/max defect did not show: is the "
                  << "result still MPI's own?";
  return 0;
}

size_t check_reductions(Communicator& comm) {
  const int n = comm.size();
  const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(comm.rank());
  size_t wrong = 0;
  for (DataType type : all_data_types()) {
    if (!comm.unsupported_reason(type).empty()) continue;  // gloo: no bfloat16, no fp8
    const size_t es = element_size(type);
    for (ReduceOp op : all_reduce_ops()) {
      for (size_t count : {size_t{1}, un + 1, size_t{1000}}) {
        for (bool in_place : {false, true}) {
          // all_reduce
          std::vector<unsigned char> input(count * es), expected(count * es);
          for (size_t i = 0; i < count; ++i) {
            test::put(input, type, i, test::input_value(type, op, comm.rank(), i));
            test::put_expected(expected, i, type, op, n, i);
          }
          const std::vector<unsigned char> original = input;
          std::vector<unsigned char> output(count * es);
          unsigned char* out = in_place ? input.data() : output.data();
          comm.all_reduce(input.data(), out, count, type, op);
          comm.wait(std::chrono::milliseconds(0));
          const std::string what = describe(comm, "all_reduce", type, op, count, in_place);
          wrong += judge(comm, out, expected, type, op, count, what);
          if (!in_place && input != original) {
            ADD_FAILURE() << what << ": modified its input";
            ++wrong;
          }

          // reduce_scatter: block r of the reduction of size() blocks
          std::vector<unsigned char> whole(un * count * es), block(count * es);
          for (size_t i = 0; i < un * count; ++i) {
            test::put(whole, type, i, test::input_value(type, op, comm.rank(), i));
          }
          for (size_t i = 0; i < count; ++i) {
            test::put_expected(block, i, type, op, n, ur * count + i);
          }
          const std::vector<unsigned char> whole_original = whole;
          unsigned char* scattered = in_place ? whole.data() + ur * count * es : output.data();
          comm.reduce_scatter(whole.data(), scattered, count, type, op);
          comm.wait(std::chrono::milliseconds(0));
          const std::string rs_what = describe(comm, "reduce_scatter", type, op, count, in_place);
          wrong += judge(comm, scattered, block, type, op, count, rs_what);
          if (!in_place && whole != whole_original) {
            ADD_FAILURE() << rs_what << ": modified its input";
            ++wrong;
          }
        }
      }
    }
  }
  return wrong;
}

// The data movers carry every type bit for bit (fp8 has ccscope's own MPI type).
size_t check_data_movement(Communicator& comm) {
  const int n = comm.size();
  const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(comm.rank());
  size_t wrong = 0;
  for (DataType type : all_data_types()) {
    if (!comm.unsupported_reason(type).empty()) continue;
    const size_t es = element_size(type);
    const size_t count = 37;
    std::vector<unsigned char> mine(count * es), gathered(un * count * es),
        expected(un * count * es);
    for (size_t i = 0; i < count; ++i)
      test::put(mine, type, i, test::input_value(type, ReduceOp::kMin, comm.rank(), i));
    for (size_t p = 0; p < un; ++p)
      for (size_t i = 0; i < count; ++i)
        test::put(expected, type, p * count + i,
                  test::input_value(type, ReduceOp::kMin, static_cast<int>(p), i));
    comm.all_gather(mine.data(), gathered.data(), count, type);
    comm.wait(std::chrono::milliseconds(0));
    wrong += count_wrong(gathered.data(), expected, type,
                         describe(comm, "all_gather", type, ReduceOp::kSum, count, false));

    std::vector<unsigned char> broadcast = ur == 0 ? mine : std::vector<unsigned char>(count * es);
    std::vector<unsigned char> from_root(
        expected.begin(), expected.begin() + static_cast<std::ptrdiff_t>(count * es));
    comm.broadcast(broadcast.data(), broadcast.data(), count, type, 0);
    comm.wait(std::chrono::milliseconds(0));
    wrong += count_wrong(broadcast.data(), from_root, type,
                         describe(comm, "broadcast", type, ReduceOp::kSum, count, true));
  }
  return wrong;
}

// Every rank must see the same verdict: sum the wrong counts over the ranks.
void expect_all_ranks_right(size_t wrong_here, const char* what) {
  const int64_t total = g_world->all_reduce_sum(static_cast<int64_t>(wrong_here));
  EXPECT_EQ(total, 0) << what << ": " << wrong_here << " wrong elements on rank " << g_world->rank()
                      << ", " << total << " on all ranks";
}

}  // namespace

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                   result.file_name() ? result.file_name() : "?", result.line_number(),
                   result.message());
    }
  }

 private:
  int rank_;
};

namespace {

TEST(MpiBackend, EveryTypeAndOpMatchesTheSerialReduction) {
  auto comm = make_mpi_communicator(*g_world);
  expect_all_ranks_right(check_reductions(*comm), "mpi reductions");
}

TEST(MpiBackend, EveryTypeMovesBitForBit) {
  auto comm = make_mpi_communicator(*g_world);
  expect_all_ranks_right(check_data_movement(*comm), "mpi data movement");
}

TEST(MpiBackend, TwoCommunicatorsAliveAtOnceShareTheOpaqueTypes) {
  // The opaque MPI types outlive the first communicator while a second uses them.
  auto first = make_mpi_communicator(*g_world);
  auto second = make_mpi_communicator(*g_world);
  first.reset();
  expect_all_ranks_right(check_data_movement(*second), "mpi after another communicator ended");
}

TEST(RingBackend, EveryTypeAndOpMatchesTheSerialReduction) {
  auto comm = make_ring_communicator(*g_world);
  expect_all_ranks_right(check_reductions(*comm), "ring reductions");
}

TEST(RingBackend, EveryTypeMovesBitForBit) {
  auto comm = make_ring_communicator(*g_world);
  expect_all_ranks_right(check_data_movement(*comm), "ring data movement");
}

// --- batch_send_recv and colour-split communicators ---

// Elements rank `from` sends to rank `to` in the all-to-all-v: 0, 3, 6 or 9.
size_t v_count(int from, int to) { return static_cast<size_t>((from * 5 + to * 3 + 1) % 4) * 3; }
int64_t v_value(DataType type, int from, int to, size_t i) {
  return test::input_value(type, ReduceOp::kMin, from, static_cast<size_t>(to) * 1000 + i);
}

// All-to-all-v as one batch (blocks packed back to back, the sends listed
// downwards, the receives rotated); returns the wrong elements of this rank.
size_t check_all_to_allv(Communicator& comm, DataType type) {
  const int n = comm.size(), r = comm.rank();
  const size_t es = element_size(type), un = static_cast<size_t>(n);
  std::vector<size_t> send_offset(un + 1, 0), recv_offset(un + 1, 0);
  for (int p = 0; p < n; ++p) {
    send_offset[p + 1] = send_offset[p] + v_count(r, p);
    recv_offset[p + 1] = recv_offset[p] + v_count(p, r);
  }
  std::vector<unsigned char> input(send_offset[un] * es + 1), expected(recv_offset[un] * es),
      output(recv_offset[un] * es + 1);
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < v_count(r, p); ++i)
      test::put(input, type, send_offset[p] + i, v_value(type, r, p, i));
    for (size_t i = 0; i < v_count(p, r); ++i)
      test::put(expected, type, recv_offset[p] + i, v_value(type, p, r, i));
  }
  std::vector<PeerSend> sends;
  std::vector<PeerRecv> recvs;
  for (int p = n - 1; p >= 0; --p)
    sends.push_back({p, input.data() + send_offset[p] * es, v_count(r, p)});
  for (int k = 0; k < n; ++k) {
    const int p = (r + k) % n;
    recvs.push_back({p, output.data() + recv_offset[p] * es, v_count(p, r)});
  }
  comm.batch_send_recv(sends, recvs, type);
  comm.wait(std::chrono::seconds(60));
  return count_wrong(
      output.data(), expected, type,
      describe(comm, "batch_send_recv all-to-all-v", type, ReduceOp::kSum, recv_offset[un], false));
}

// A pipeline stage's exchange: send to rank+1 while receiving from rank-1 in
// one batch (rank q sends q+2 elements).
size_t check_ring_pass(Communicator& comm, DataType type) {
  const int n = comm.size(), r = comm.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = element_size(type);
  const size_t out_count = static_cast<size_t>(r) + 2, in_count = static_cast<size_t>(left) + 2;
  std::vector<unsigned char> out(out_count * es), in(in_count * es), expected(in_count * es);
  for (size_t i = 0; i < out_count; ++i) test::put(out, type, i, v_value(type, r, right, i));
  for (size_t i = 0; i < in_count; ++i) test::put(expected, type, i, v_value(type, left, r, i));
  const PeerSend send{right, out.data(), out_count};
  const PeerRecv recv{left, in.data(), in_count};
  comm.batch_send_recv({&send, 1}, {&recv, 1}, type);
  comm.wait(std::chrono::seconds(60));
  return count_wrong(
      in.data(), expected, type,
      describe(comm, "batch_send_recv ring pass", type, ReduceOp::kSum, in_count, false));
}

// Two sends and two receives with different peers in one batch: 3 elements to
// rank+1 and 5 to rank-1, received from rank-1 and rank+1, listed in opposite
// orders. With 1 or 2 ranks both go to the same peer: then they are matched in
// the order listed (sends: first the 3, then the 5; receives likewise).
size_t check_two_and_two(Communicator& comm, DataType type) {
  const int n = comm.size(), r = comm.rank();
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  const size_t es = element_size(type);
  std::vector<unsigned char> to_right(3 * es), to_left(5 * es), from_left(3 * es),
      from_right(5 * es), expect_left(3 * es), expect_right(5 * es);
  for (size_t i = 0; i < 3; ++i) {
    test::put(to_right, type, i, v_value(type, r, right, i));
    test::put(expect_left, type, i, v_value(type, left, r, i));
  }
  for (size_t i = 0; i < 5; ++i) {
    test::put(to_left, type, i, v_value(type, r, left, i + 100));
    test::put(expect_right, type, i, v_value(type, right, r, i + 100));
  }
  const PeerSend sends[] = {{right, to_right.data(), 3}, {left, to_left.data(), 5}};
  // In a 2-rank or 1-rank job left == right: listed in the senders' order.
  const bool same_peer = left == right;
  std::vector<PeerRecv> recvs;
  if (same_peer) {
    recvs = {{left, from_left.data(), 3}, {right, from_right.data(), 5}};
  } else {
    recvs = {{right, from_right.data(), 5}, {left, from_left.data(), 3}};
  }
  comm.batch_send_recv(sends, recvs, type);
  comm.wait(std::chrono::seconds(60));
  const std::string what =
      describe(comm, "batch_send_recv two and two", type, ReduceOp::kSum, 8, false);
  return count_wrong(from_left.data(), expect_left, type, what + " from-left") +
         count_wrong(from_right.data(), expect_right, type, what + " from-right");
}

// Runs one check; an exception counts as a wrong element, so that this rank
// still reaches the verdict the other ranks wait in.
template <typename Check>
size_t without_throwing(Check check) {
  try {
    return check();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "rank " << g_world->rank() << ": " << error.what();
    return 1;
  }
}

const DataType kBatchTypes[] = {DataType::kInt32, DataType::kFloat64, DataType::kFloat16,
                                DataType::kFloat8E4M3, DataType::kUInt8};

TEST(MpiBackend, BatchSendRecvWithAndWithoutYieldingWaits) {
  for (bool yielding : {false, true}) {
    MpiOptions options;
    options.yielding_waits = yielding;
    auto comm = make_mpi_communicator(*g_world, options);
    size_t wrong = 0;
    for (DataType type : kBatchTypes) {
      wrong += without_throwing([&] { return check_all_to_allv(*comm, type); });
      wrong += without_throwing([&] { return check_ring_pass(*comm, type); });
      wrong += without_throwing([&] { return check_two_and_two(*comm, type); });
    }
    expect_all_ranks_right(wrong, yielding ? "mpi batch_send_recv, yielding waits"
                                           : "mpi batch_send_recv, blocking waits");
  }
}

TEST(RingBackend, BatchSendRecvAllToAllvAndRingPass) {
  auto comm = make_ring_communicator(*g_world);
  size_t wrong = 0;
  for (DataType type : kBatchTypes) {
    wrong += without_throwing([&] { return check_all_to_allv(*comm, type); });
    wrong += without_throwing([&] { return check_ring_pass(*comm, type); });
  }
  expect_all_ranks_right(wrong, "ring batch_send_recv");
}

TEST(MpiBackend, BatchSendRecvRejectsABadPeerBeforePostingAnything) {
  auto comm = make_mpi_communicator(*g_world);
  int32_t value = 0;
  const PeerRecv recv{comm->size(), &value, 1};
  EXPECT_THROW(comm->batch_send_recv({}, {&recv, 1}, DataType::kInt32), UsageError);
  // Nothing was left posted: the communicator still works.
  expect_all_ranks_right(without_throwing([&] { return check_ring_pass(*comm, DataType::kInt32); }),
                         "mpi after a rejected batch");
}

// Colour c = world rank / 2: 4 ranks make two groups of 2 (3 ranks: {0,1}, {2}).
TEST(MpiBackend, ColorSplitsTheWorldIntoGroupsOrderedByWorldRank) {
  const int world_rank = g_world->rank(), world_size = g_world->size();
  MpiOptions options;
  options.color = world_rank / 2;
  auto comm = make_mpi_communicator(*g_world, options);
  size_t wrong = 0;
  const int first = world_rank / 2 * 2;
  const int group_size = std::min(2, world_size - first);
  if (comm == nullptr) {
    ADD_FAILURE() << "rank " << world_rank << ": no communicator for color " << *options.color;
    ++wrong;
  } else {
    if (comm->rank() != world_rank - first || comm->size() != group_size) {
      ADD_FAILURE() << "world rank " << world_rank << " is rank " << comm->rank() << " of "
                    << comm->size() << ", expected " << world_rank - first << " of " << group_size;
      ++wrong;
    }
    // The all-reduce stays inside the group: the sum of its world ranks (+1).
    int64_t mine = world_rank + 1, sum = 0;
    comm->all_reduce(&mine, &sum, 1, DataType::kInt64, ReduceOp::kSum);
    comm->wait(std::chrono::seconds(60));
    int64_t expected = 0;
    for (int q = first; q < first + group_size; ++q) expected += q + 1;
    if (sum != expected) {
      ADD_FAILURE() << "world rank " << world_rank << ": all_reduce in its group gave " << sum
                    << ", expected " << expected;
      ++wrong;
    }
    wrong += without_throwing([&] { return check_all_to_allv(*comm, DataType::kInt32); });
  }
  expect_all_ranks_right(wrong, "color split");
}

TEST(MpiBackend, NegativeColorJoinsNoneAndFirstRanksWithColorIsAUsageError) {
  const int world_rank = g_world->rank(), world_size = g_world->size();
  MpiOptions options;
  options.color = world_rank == world_size - 1 ? -1 : 7;  // the last rank sits out
  auto comm = make_mpi_communicator(*g_world, options);
  size_t wrong = 0;
  if (world_rank == world_size - 1) {
    if (comm != nullptr) {
      ADD_FAILURE() << "rank " << world_rank << " passed a negative color but got a communicator";
      ++wrong;
    }
  } else if (comm == nullptr || comm->size() != world_size - 1 || comm->rank() != world_rank) {
    ADD_FAILURE() << "rank " << world_rank << ": expected rank " << world_rank << " of "
                  << world_size - 1;
    ++wrong;
  } else {
    int64_t one = 1, ranks = 0;
    comm->all_reduce(&one, &ranks, 1, DataType::kInt64, ReduceOp::kSum);
    if (ranks != world_size - 1) {
      ADD_FAILURE() << "all_reduce over color 7 counted " << ranks << " ranks";
      ++wrong;
    }
  }
  expect_all_ranks_right(wrong, "negative color");

  MpiOptions both;
  both.first_ranks = 1;
  both.color = 0;
  EXPECT_THROW(make_mpi_communicator(*g_world, both), UsageError);
}

// --- the gloo backend: the same checks, and what only it has ---

#define SKIP_WITHOUT_GLOO() \
  if (!gloo_backend_compiled()) GTEST_SKIP() << "this ccscope was built without gloo"

// The rooted collectives (every root, in place and out of place), all_to_all
// (both), all_to_all_v (packed and with gaps) and send_recv around the ring, on
// int32 and half; returns the wrong elements of this rank.
size_t check_rooted_and_variable(Communicator& comm) {
  const int n = comm.size(), r = comm.rank();
  const size_t un = static_cast<size_t>(n), ur = static_cast<size_t>(r);
  size_t wrong = 0;
  for (DataType type : {DataType::kInt32, DataType::kFloat16}) {
    const size_t es = element_size(type), count = 301;
    for (int root = 0; root < n; ++root) {
      for (bool in_place : {false, true}) {
        const std::string where = " root=" + std::to_string(root);
        // reduce (sum) and reduce (avg): only the root's output is written
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          std::vector<unsigned char> input(count * es), output(count * es), expected(count * es);
          for (size_t i = 0; i < count; ++i) {
            test::put(input, type, i, test::input_value(type, op, r, i));
            test::put_expected(expected, i, type, op, n, i);
          }
          unsigned char* out = in_place ? input.data() : output.data();
          comm.reduce(input.data(), out, count, type, op, root);
          comm.wait(std::chrono::seconds(60));
          if (r == root)
            wrong += count_wrong(out, expected, type,
                                 describe(comm, "reduce", type, op, count, in_place) + where);
        }
        // gather: block q from rank q on the root
        std::vector<unsigned char> blocks(un * count * es), expected(un * count * es);
        for (size_t q = 0; q < un; ++q)
          for (size_t i = 0; i < count; ++i)
            test::put(expected, type, q * count + i,
                      test::input_value(type, ReduceOp::kMin, static_cast<int>(q), i));
        std::vector<unsigned char> mine(count * es);
        for (size_t i = 0; i < count; ++i)
          test::put(mine, type, i, test::input_value(type, ReduceOp::kMin, r, i));
        const unsigned char* source = mine.data();
        if (in_place && r == root) {
          std::memcpy(blocks.data() + ur * count * es, mine.data(), count * es);
          source = blocks.data() + ur * count * es;
        }
        comm.gather(source, blocks.data(), count, type, root);
        comm.wait(std::chrono::seconds(60));
        if (r == root)
          wrong +=
              count_wrong(blocks.data(), expected, type,
                          describe(comm, "gather", type, ReduceOp::kSum, count, in_place) + where);
        // scatter: the root's blocks (the gathered ones) back to their ranks
        std::vector<unsigned char> own(count * es);
        unsigned char* target =
            in_place && r == root ? expected.data() + ur * count * es : own.data();
        comm.scatter(expected.data(), target, count, type, root);
        comm.wait(std::chrono::seconds(60));
        wrong +=
            count_wrong(target, mine, type,
                        describe(comm, "scatter", type, ReduceOp::kSum, count, in_place) + where);
      }
    }
    // all_to_all: block p of rank q's input is v_value(q, p, i)
    for (bool in_place : {false, true}) {
      std::vector<unsigned char> input(un * count * es), output(un * count * es),
          expected(un * count * es);
      for (size_t p = 0; p < un; ++p)
        for (size_t i = 0; i < count; ++i) {
          test::put(input, type, p * count + i, v_value(type, r, static_cast<int>(p), i));
          test::put(expected, type, p * count + i, v_value(type, static_cast<int>(p), r, i));
        }
      unsigned char* out = in_place ? input.data() : output.data();
      comm.all_to_all(input.data(), out, count, type);
      comm.wait(std::chrono::seconds(60));
      wrong += count_wrong(out, expected, type,
                           describe(comm, "all_to_all", type, ReduceOp::kSum, count, in_place));
    }
    // all_to_all_v: v_count(q, p) elements from q to p, packed or 2 elements apart
    for (size_t gap : {size_t{0}, size_t{2}}) {
      std::vector<size_t> sc(un), sd(un), rc(un), rd(un);
      size_t s_at = 0, r_at = 0;
      for (size_t p = 0; p < un; ++p) {
        sc[p] = v_count(r, static_cast<int>(p));
        rc[p] = v_count(static_cast<int>(p), r);
        sd[p] = s_at;
        rd[p] = r_at;
        s_at += sc[p] + gap;
        r_at += rc[p] + gap;
      }
      std::vector<unsigned char> input(s_at * es + 1), output(r_at * es + 1),
          expected(r_at * es + 1);
      for (size_t p = 0; p < un; ++p) {
        for (size_t i = 0; i < sc[p]; ++i)
          test::put(input, type, sd[p] + i, v_value(type, r, static_cast<int>(p), i));
        for (size_t i = 0; i < rc[p]; ++i)
          test::put(expected, type, rd[p] + i, v_value(type, static_cast<int>(p), r, i));
      }
      comm.all_to_all_v(input.data(), sc, sd, output.data(), rc, rd, type);
      comm.wait(std::chrono::seconds(60));
      wrong += count_wrong(output.data(), expected, type,
                           describe(comm, gap == 0 ? "all_to_all_v packed" : "all_to_all_v gaps",
                                    type, ReduceOp::kSum, r_at, false));
    }
    // send_recv: to the right, from the left
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    std::vector<unsigned char> out(count * es), in(count * es), expected(count * es);
    for (size_t i = 0; i < count; ++i) {
      test::put(out, type, i, v_value(type, r, right, i));
      test::put(expected, type, i, v_value(type, left, r, i));
    }
    comm.send_recv(out.data(), right, in.data(), left, count, type);
    comm.wait(std::chrono::seconds(60));
    wrong += count_wrong(in.data(), expected, type,
                         describe(comm, "send_recv", type, ReduceOp::kSum, count, false));
  }
  return wrong;
}

TEST(GlooBackend, EveryTypeAndOpMatchesTheSerialReduction) {
  SKIP_WITHOUT_GLOO();
  auto comm = make_gloo_communicator(*g_world, GlooOptions{});
  expect_all_ranks_right(without_throwing([&] { return check_reductions(*comm); }),
                         "gloo reductions");
}

TEST(GlooBackend, EveryTypeMovesBitForBit) {
  SKIP_WITHOUT_GLOO();
  auto comm = make_gloo_communicator(*g_world, GlooOptions{});
  expect_all_ranks_right(without_throwing([&] { return check_data_movement(*comm); }),
                         "gloo data movement");
}

TEST(GlooBackend, RootedAndVariableCollectivesAndSendRecv) {
  SKIP_WITHOUT_GLOO();
  auto comm = make_gloo_communicator(*g_world, GlooOptions{});
  expect_all_ranks_right(without_throwing([&] { return check_rooted_and_variable(*comm); }),
                         "gloo rooted and variable collectives");
}

TEST(GlooBackend, RefusesBFloat16AndFp8InOneLine) {
  SKIP_WITHOUT_GLOO();
  auto comm = make_gloo_communicator(*g_world, GlooOptions{});
  for (DataType type : all_data_types()) {
    const std::string reason = comm->unsupported_reason(type);
    const bool refused = type == DataType::kBFloat16 || type == DataType::kFloat8E4M3 ||
                         type == DataType::kFloat8E5M2;
    EXPECT_EQ(!reason.empty(), refused) << name(type) << ": '" << reason << "'";
    EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
  }
  int16_t value = 0;
  EXPECT_THROW(comm->all_reduce(&value, &value, 1, DataType::kBFloat16, ReduceOp::kSum),
               UsageError);
  EXPECT_NE(comm->resources().find("listen="), std::string::npos) << comm->resources();
}

TEST(GlooBackend, BatchSendRecvAllToAllvRingPassAndTwoAndTwo) {
  SKIP_WITHOUT_GLOO();
  auto comm = make_gloo_communicator(*g_world, GlooOptions{});
  size_t wrong = 0;
  for (DataType type : kBatchTypes) {
    if (!comm->unsupported_reason(type).empty()) continue;
    wrong += without_throwing([&] { return check_all_to_allv(*comm, type); });
    wrong += without_throwing([&] { return check_ring_pass(*comm, type); });
    wrong += without_throwing([&] { return check_two_and_two(*comm, type); });
  }
  expect_all_ranks_right(wrong, "gloo batch_send_recv");
  int32_t value = 0;
  const PeerRecv recv{comm->size(), &value, 1};
  EXPECT_THROW(comm->batch_send_recv({}, {&recv, 1}, DataType::kInt32), UsageError);
}

// The sum over `comm` of each rank's world rank + 1, through the
// communicator's own memory (a device buffer for NCCL).
int64_t sum_of_world_ranks(Communicator& comm, int world_rank) {
  auto buffer = comm.allocate(sizeof(int64_t));
  const int64_t mine = world_rank + 1;
  comm.copy_from_host(*buffer, 0, &mine, sizeof mine);
  comm.all_reduce(buffer->data(), buffer->data(), 1, DataType::kInt64, ReduceOp::kSum);
  comm.wait(std::chrono::seconds(60));
  int64_t sum = 0;
  comm.copy_to_host(&sum, *buffer, 0, sizeof sum);
  return sum;
}

// As the MPI backend's, for a backend whose options have `color` and
// `first_ranks` (gloo, NCCL): colour = world rank / 2; the last rank outside
// (negative colour); the first ranks; both set is a UsageError. `make` is the
// backend's factory.
template <class Options, class Make>
void check_color_groups(Make make, const char* what) {
  const int world_rank = g_world->rank(), world_size = g_world->size();
  size_t wrong = 0;
  {
    Options options;
    options.color = world_rank / 2;
    auto comm = make(*g_world, options);
    const int first = world_rank / 2 * 2, group_size = std::min(2, world_size - first);
    int64_t expected = 0;
    for (int q = first; q < first + group_size; ++q) expected += q + 1;
    if (comm == nullptr || comm->rank() != world_rank - first || comm->size() != group_size) {
      ADD_FAILURE() << what << ": world rank " << world_rank << ": expected rank "
                    << world_rank - first << " of " << group_size;
      ++wrong;
    } else if (const int64_t sum = sum_of_world_ranks(*comm, world_rank); sum != expected) {
      ADD_FAILURE() << what << ": world rank " << world_rank << ": group all_reduce gave " << sum
                    << ", expected " << expected;
      ++wrong;
    }
  }
  {
    Options options;
    options.color = world_rank == world_size - 1 ? -1 : 7;
    auto comm = make(*g_world, options);
    if (world_rank == world_size - 1) {
      if (comm != nullptr) {
        ADD_FAILURE() << what << ": rank " << world_rank << " passed a negative color but got one";
        ++wrong;
      }
    } else if (comm == nullptr || comm->size() != world_size - 1) {
      ADD_FAILURE() << what << ": rank " << world_rank << ": expected a communicator of "
                    << world_size - 1;
      ++wrong;
    } else {
      int64_t expected = 0;
      for (int q = 0; q < world_size - 1; ++q) expected += q + 1;
      wrong += sum_of_world_ranks(*comm, world_rank) != expected;
    }
  }
  {
    Options options;
    options.first_ranks = std::max(1, world_size - 1);
    auto comm = make(*g_world, options);
    const bool inside = world_rank < options.first_ranks;
    if ((comm != nullptr) != inside) {
      ADD_FAILURE() << what << ": rank " << world_rank << ": first_ranks=" << options.first_ranks
                    << (inside ? " gave no communicator" : " gave one");
      ++wrong;
    } else if (comm != nullptr) {
      int64_t one = 1, ranks = 0;
      auto buffer = comm->allocate(sizeof one);
      comm->copy_from_host(*buffer, 0, &one, sizeof one);
      comm->all_reduce(buffer->data(), buffer->data(), 1, DataType::kInt64, ReduceOp::kSum);
      comm->wait(std::chrono::seconds(60));
      comm->copy_to_host(&ranks, *buffer, 0, sizeof ranks);
      wrong += ranks != options.first_ranks;
    }
  }
  expect_all_ranks_right(wrong, what);
  Options both;
  both.first_ranks = 1;
  both.color = 0;
  EXPECT_THROW(make(*g_world, both), UsageError);
}

TEST(GlooBackend, ColorGroupsNegativeColorAndFirstRanks) {
  SKIP_WITHOUT_GLOO();
  check_color_groups<GlooOptions>(
      [](const World& w, const GlooOptions& o) { return make_gloo_communicator(w, o); },
      "gloo groups");
  // A group's variable collectives too.
  GlooOptions options;
  options.color = g_world->rank() / 2;
  auto comm = make_gloo_communicator(*g_world, options);
  expect_all_ranks_right(
      without_throwing([&] { return check_all_to_allv(*comm, DataType::kInt32); }),
      "gloo group all_to_all_v");
}

// One NCCL communicator per colour, its id from the group's first world rank
// (under the stand-in: collectives.nccl_groups.standin).
TEST(NcclBackend, ColorGroupsNegativeColorAndFirstRanks) {
  if (!nccl_backend_usable()) GTEST_SKIP() << "no GPU (or stand-in) visible";
  check_color_groups<NcclOptions>(
      [](const World& w, const NcclOptions& o) { return make_nccl_communicator(w, o); },
      "nccl groups");
}

}  // namespace
}  // namespace ccscope

int main(int argc, char** argv) {
  ccscope::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const ccscope::World world = ccscope::World::from_mpi();
  ccscope::g_world = &world;
  // One rank prints gtest's progress; the others report only their failures.
  if (world.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ccscope::FailurePrinter(world.rank()));
  }
  const int result = RUN_ALL_TESTS();
  return result;
}
