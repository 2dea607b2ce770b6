// The CUDA runtime stand-in is strict where real GPUs are: these tests are
// the proof, and each fails when the stand-in is made lax (docs/standin.md).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <vector>

namespace {

// Each operation on a stream then waits 20 ms on its worker: a program that
// does not synchronise reads what was there before, every time.
void slow_streams() { setenv("CCSCOPE_STANDIN_STREAM_DELAY_US", "20000", 1); }
void fast_streams() { unsetenv("CCSCOPE_STANDIN_STREAM_DELAY_US"); }

TEST(StandinStrictnessDeathTest, HostReadOfDeviceMemoryDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4096), cudaSuccess);
  EXPECT_DEATH(
      {
        volatile char c = *static_cast<volatile char*>(device);
        (void)c;
      },
      "");
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

TEST(StandinStrictness, MissingSynchronizeReadsStaleData) {
  slow_streams();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  fast_streams();
  void* device = nullptr;
  int* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  const int value = 42;
  *pinned = -1;
  ASSERT_EQ(cudaMemcpyAsync(device, &value, sizeof(int), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, device, sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_EQ(*pinned, -1) << "the copy ran before the call returned";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(*pinned, 42);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  cudaFreeHost(pinned);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

TEST(StandinStrictness, EventsCompleteWhenTheStreamReachesThem) {
  slow_streams();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  fast_streams();
  cudaEvent_t start = nullptr, end = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaErrorNotReady);
  float ms = 0;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  ASSERT_EQ(cudaEventSynchronize(end), cudaSuccess);
  ASSERT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 15.0f);  // the second record waited its 20 ms on the worker
  cudaEvent_t untimed = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, stream), cudaSuccess);
  cudaStreamSynchronize(stream);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  cudaStreamDestroy(stream);
}

TEST(StandinStrictness, CopyKindsMustMatchThePointers) {
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 64), cudaSuccess);
  std::vector<char> host(64);
  EXPECT_EQ(cudaMemcpy(host.data(), device, 64, cudaMemcpyHostToDevice), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // not sticky
  EXPECT_EQ(cudaMemcpy(device, host.data(), 64, cudaMemcpyDeviceToHost), cudaErrorInvalidMemcpyDirection);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 65, cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "a copy past the allocation's end";
  EXPECT_EQ(cudaMemcpy(device, host.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  cudaFree(device);
}

TEST(StandinStrictness, CapturedWorkReplaysAtEveryLaunchAndNotBefore) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  void* device = nullptr;
  int* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&device, sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int)), cudaSuccess);
  *pinned = 7;
  ASSERT_EQ(cudaMemsetAsync(device, 0, sizeof(int), stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, pinned, sizeof(int), cudaMemcpyHostToDevice, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated)
      << "a query during capture invalidates it, as CUDA does";
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device, pinned, sizeof(int), cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  int seen = -1;
  ASSERT_EQ(cudaMemcpy(&seen, device, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(&seen, device, sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(seen, 0) << "captured work ran during capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  for (int launch = 1; launch <= 2; ++launch) {
    *pinned = 100 + launch;
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(&seen, device, sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(seen, 100 + launch);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(pinned);
  cudaFree(device);
  cudaStreamDestroy(stream);
}

TEST(StandinStrictness, DeviceMemoryIsBudgeted) {
  size_t free_bytes = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total), cudaSuccess);
  void* too_much = nullptr;
  EXPECT_EQ(cudaMalloc(&too_much, total + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(too_much, nullptr);
  cudaGetLastError();
}

}  // namespace
