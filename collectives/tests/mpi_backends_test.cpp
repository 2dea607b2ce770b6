// The host backends over real MPI (run it under mpiexec with any number of ranks,
// e.g. `mpiexec -n 3 collectives_mpi_backends_test`): the mpi backend (MPI's own
// collectives, with ccscope's MPI_Ops for half/bfloat16/fp8 and the premultiplied
// sum) and the ring backend (the reference algorithms over MPI point-to-point),
// every type x every op, in place and out of place, against expected_values.h.
// Every rank runs the same tests in the same order; each test agrees on its
// verdict over all ranks, so every rank reports the same result.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/collectives/backends.h"
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
