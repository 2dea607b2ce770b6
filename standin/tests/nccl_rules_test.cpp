// The NCCL stand-in keeps NCCL's rules and results; two ranks in one process
// through ncclCommInitAll (CCSCOPE_STANDIN_GPUS=2 in CTest).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace {

struct TwoRanks {
  ncclComm_t comms[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  void* send[2] = {nullptr, nullptr};
  void* recv[2] = {nullptr, nullptr};
  static constexpr size_t kCount = 1024;

  TwoRanks() {
    EXPECT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
    for (int r = 0; r < 2; ++r) {
      cudaSetDevice(r);
      cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking);
      cudaMalloc(&send[r], kCount * sizeof(float));
      cudaMalloc(&recv[r], kCount * sizeof(float));
      std::vector<float> values(kCount);
      for (size_t i = 0; i < kCount; ++i) values[i] = static_cast<float>((r + 1) * 1000 + i);
      cudaMemcpy(send[r], values.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
    }
  }
  ~TwoRanks() {
    for (int r = 0; r < 2; ++r) {
      if (comms[r] != nullptr) ncclCommAbort(comms[r]);
      cudaSetDevice(r);
      cudaFree(send[r]);
      cudaFree(recv[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
  std::vector<float> result(int r, size_t count = kCount) {
    std::vector<float> out(count);
    cudaSetDevice(r);
    cudaStreamSynchronize(streams[r]);
    cudaMemcpy(out.data(), recv[r], count * sizeof(float), cudaMemcpyDeviceToHost);
    return out;
  }
};

TEST(StandinNccl, AllReduceSumsEveryRank) {
  TwoRanks t;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ncclAllReduce(t.send[r], t.recv[r], TwoRanks::kCount, ncclFloat32, ncclSum, t.comms[r],
                            t.streams[r]),
              ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    const std::vector<float> out = t.result(r);
    EXPECT_EQ(out[0], 3000.0f);
    EXPECT_EQ(out[1023], 3000.0f + 2 * 1023);
  }
}

TEST(StandinNccl, ACountPastTheBufferIsAnInvalidArgument) {
  TwoRanks t;
  EXPECT_EQ(ncclAllReduce(t.send[0], t.recv[0], TwoRanks::kCount + 1, ncclFloat32, ncclSum, t.comms[0],
                          t.streams[0]),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(t.comms[0])).find("4096 bytes from it, 4100 needed"),
            std::string::npos)
      << ncclGetLastError(t.comms[0]);
  std::vector<float> host(4);
  EXPECT_EQ(ncclAllReduce(host.data(), t.recv[0], 4, ncclFloat32, ncclSum, t.comms[0], t.streams[0]),
            ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(t.send[0], t.recv[0], 4, ncclFloat32, static_cast<ncclRedOp_t>(17),
                          t.comms[0], t.streams[0]),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(t.send[0], t.recv[0], 4, ncclFloat32, 2, t.comms[0], t.streams[0]),
            ncclInvalidArgument);
}

TEST(StandinNccl, OnlyNcclsInPlaceLayoutMayOverlap) {
  TwoRanks t;
  char* base = static_cast<char*>(t.recv[1]);
  // all-gather in place on rank 1: sendbuff = recvbuff + 1 * sendcount.
  const size_t sendcount = 256;
  EXPECT_EQ(ncclAllGather(base + sendcount * sizeof(float), base, sendcount, ncclFloat32, t.comms[1],
                          t.streams[1]),
            ncclSuccess);
  EXPECT_EQ(ncclAllGather(base + 4, base, sendcount, ncclFloat32, t.comms[0], t.streams[0]),
            ncclInvalidArgument);
  // Let rank 1's all-gather finish with a matching one on rank 0.
  char* base0 = static_cast<char*>(t.recv[0]);
  EXPECT_EQ(ncclAllGather(base0, base0, sendcount, ncclFloat32, t.comms[0], t.streams[0]), ncclSuccess);
  const std::vector<float> out = t.result(1, 2 * sendcount);
  (void)out;
}

TEST(StandinNccl, MismatchedCollectivesFailAsynchronously) {
  TwoRanks t;
  ASSERT_EQ(ncclAllReduce(t.send[0], t.recv[0], 8, ncclFloat32, ncclSum, t.comms[0], t.streams[0]),
            ncclSuccess);
  ASSERT_EQ(ncclAllReduce(t.send[1], t.recv[1], 16, ncclFloat32, ncclSum, t.comms[1], t.streams[1]),
            ncclSuccess);
  ncclResult_t state = ncclSuccess;
  for (int i = 0; i < 2000 && state == ncclSuccess; ++i) {
    ASSERT_EQ(ncclCommGetAsyncError(t.comms[0], &state), ncclSuccess);
    ncclResult_t other = ncclSuccess;
    ncclCommGetAsyncError(t.comms[1], &other);
    if (state == ncclSuccess) state = other;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(state, ncclInvalidUsage);
  EXPECT_EQ(cudaStreamQuery(t.streams[0]), cudaErrorNotReady) << "a failed operation never completes";
  // Abort ends it.
  ncclCommAbort(t.comms[0]);
  ncclCommAbort(t.comms[1]);
  t.comms[0] = t.comms[1] = nullptr;
  EXPECT_EQ(cudaStreamSynchronize(t.streams[0]), cudaSuccess);
}

TEST(StandinNccl, ADestroyedCommunicatorIsRefused) {
  TwoRanks t;
  ncclComm_t gone = t.comms[0];
  ASSERT_EQ(ncclCommDestroy(gone), ncclSuccess);
  t.comms[0] = nullptr;
  EXPECT_EQ(ncclAllReduce(t.send[0], t.recv[0], 8, ncclFloat32, ncclSum, gone, t.streams[0]),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "a group end without a start";
}

TEST(StandinNccl, PreMulSumAndAvgAsNcclComputesThem) {
  TwoRanks t;
  ncclRedOp_t ops[2];
  for (int r = 0; r < 2; ++r) {
    float scalar = static_cast<float>(r + 2);  // rank 0 x2, rank 1 x3
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&ops[r], &scalar, ncclFloat32, ncclScalarHostImmediate, t.comms[r]),
              ncclSuccess);
  }
  EXPECT_EQ(ncclAllReduce(t.send[0], t.recv[0], 4, ncclFloat64, ops[0], t.comms[0], t.streams[0]),
            ncclInvalidArgument)
      << "an op made for float used with double";
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ncclAllReduce(t.send[r], t.recv[r], 4, ncclFloat32, ops[r], t.comms[r], t.streams[r]);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(t.result(0, 4)[1], 1001.0f * 2 + 2001.0f * 3);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ncclAllReduce(t.send[r], t.recv[r], 4, ncclFloat32, ncclAvg, t.comms[r], t.streams[r]);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(t.result(1, 4)[2], 1002.0f * 0.5f + 2002.0f * 0.5f);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ncclRedOpDestroy(ops[r], t.comms[r]), ncclSuccess);
  EXPECT_EQ(ncclRedOpDestroy(ops[0], t.comms[0]), ncclInvalidArgument) << "destroyed twice";
}

TEST(StandinNccl, SendAndReceiveSizesMustMatch) {
  TwoRanks t;
  ASSERT_EQ(ncclSend(t.send[0], 8, ncclFloat32, 1, t.comms[0], t.streams[0]), ncclSuccess);
  ASSERT_EQ(ncclRecv(t.recv[1], 4, ncclFloat32, 0, t.comms[1], t.streams[1]), ncclSuccess);
  ncclResult_t state = ncclSuccess;
  for (int i = 0; i < 2000 && state == ncclSuccess; ++i) {
    ncclCommGetAsyncError(t.comms[1], &state);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(state, ncclInvalidUsage);
  EXPECT_NE(std::string(ncclGetLastError(t.comms[1])).find("ncclSend(count 8, ncclFloat32) to rank 1"),
            std::string::npos)
      << ncclGetLastError(t.comms[1]);
}

TEST(StandinNccl, NonBlockingInitReportsInProgressThenSuccess) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(r);
    EXPECT_EQ(ncclCommInitRankConfig(&comms[r], 2, id, r, &config), ncclInProgress);
    ASSERT_NE(comms[r], nullptr);
  }
  for (int r = 0; r < 2; ++r) {
    ncclResult_t state = ncclInProgress;
    for (int i = 0; i < 5000 && state == ncclInProgress; ++i) {
      ncclCommGetAsyncError(comms[r], &state);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(state, ncclSuccess);
  }
  for (ncclComm_t c : comms) {
    EXPECT_EQ(ncclCommFinalize(c), ncclInProgress);
    EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
}

TEST(StandinNccl, SplitGroupsRanksByColorOrderedByKey) {
  TwoRanks t;
  // Both ranks in one color, rank 1 first by key: the new ranks swap.
  ncclComm_t split[2] = {nullptr, nullptr};
  std::vector<std::thread> threads;
  ncclResult_t results[2] = {ncclInternalError, ncclInternalError};
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      results[r] = ncclCommSplit(t.comms[r], 7, 1 - r, &split[r], nullptr);
    });
  }
  for (std::thread& th : threads) th.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(results[r], ncclSuccess) << ncclGetLastError(nullptr);
    int rank = -1, count = 0, device = -1;
    ncclCommUserRank(split[r], &rank);
    ncclCommCount(split[r], &count);
    ncclCommCuDevice(split[r], &device);
    EXPECT_EQ(rank, 1 - r);
    EXPECT_EQ(count, 2);
    EXPECT_EQ(device, r);
  }
  // The new communicator works: an all-reduce over it.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ncclAllReduce(t.send[r], t.recv[r], 4, ncclFloat32, ncclSum, split[r], t.streams[r]);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(t.result(0, 4)[0], 3000.0f);
  // Each its own color (one rank with none): rank 1 alone, rank 0 gets no communicator.
  ncclComm_t alone[2] = {nullptr, nullptr};
  threads.clear();
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      results[r] = ncclCommSplit(t.comms[r], r == 0 ? NCCL_SPLIT_NOCOLOR : 3, 0, &alone[r], nullptr);
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(results[0], ncclSuccess);
  EXPECT_EQ(alone[0], nullptr);
  ASSERT_EQ(results[1], ncclSuccess);
  int count = 0;
  ncclCommCount(alone[1], &count);
  EXPECT_EQ(count, 1);
  for (ncclComm_t c : split) ncclCommDestroy(c);
  ncclCommDestroy(alone[1]);
}

TEST(StandinNccl, AnUnfinishedUniqueIdIsRefused) {
  ncclUniqueId zero{};
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, zero, 0), ncclInvalidArgument);
  EXPECT_EQ(comm, nullptr);
}

}  // namespace
