#pragma once
// The NCCL backend's decisions that depend only on version codes, the GPUs'
// compute capability and the environment: which allocator, which all-to-all
// call, whether fp8 is usable, what the communicator config sets, and the
// resources() text. Pure functions, header-only and free of CUDA/NCCL headers,
// so that unit tests check them on machines without a GPU or NCCL.
//
// Version codes are NCCL_VERSION_CODE values: X*10000+Y*100+Z from NCCL 2.9 on,
// X*1000+Y*100+Z before (what NCCL_VERSION(X,Y,Z) gives).
#include <cstdlib>
#include <string>

#include "ccscope/common/nccl_version.h"

namespace ccscope::nccl_choices {

// Version codes and their text (ccscope/common/nccl_version.h).
constexpr int version_code(int major, int minor, int patch) {
  return nccl_version_code(major, minor, patch);
}
inline std::string version_text(int code) { return nccl_version_text(code); }

// Releases that added what the backend uses (nccl.h of each release):
//  ncclCommInitRankConfig, ncclConfig_t:      2.14
//  ncclMemAlloc / ncclMemFree:                2.19 (nccl-tests 2.19 allocates with them from 2.19)
//  ncclFloat8e4m3 / ncclFloat8e5m2:           2.24
//  ncclAlltoAll, ncclConfig_t::nvlinkCentricSched: 2.28
constexpr int kInitRankConfigSince = version_code(2, 14, 0);
constexpr int kMemAllocSince = version_code(2, 19, 0);
constexpr int kFp8Since = version_code(2, 24, 0);
constexpr int kAlltoAllSince = version_code(2, 28, 0);
constexpr int kNvlinkCentricSchedSince = version_code(2, 28, 0);
// NCCL refuses fp8 reductions below sm_90 ("FP8 reduction support begins with
// sm90 capable devices", enqueue.cc); nccl-tests drops fp8 entirely below 9.0.
constexpr int kFp8MinComputeCapability = 90;  // major*10 + minor

// A feature is used when both the header the backend was compiled with and the
// library loaded at run time have it (nccl-tests checks both for ncclAlltoAll).
constexpr bool available(int since, int header_code, int library_code) {
  return header_code >= since && library_code >= since;
}

enum class Allocator { kNcclMemAlloc, kCudaMalloc };
constexpr Allocator choose_allocator(int header_code, int library_code) {
  return available(kMemAllocSince, header_code, library_code) ? Allocator::kNcclMemAlloc
                                                              : Allocator::kCudaMalloc;
}
inline const char* name(Allocator allocator) {
  return allocator == Allocator::kNcclMemAlloc ? "ncclMemAlloc" : "cudaMalloc";
}

enum class AllToAll { kNcclAlltoAll, kGroupedSendRecv };
constexpr AllToAll choose_all_to_all(int header_code, int library_code) {
  return available(kAlltoAllSince, header_code, library_code) ? AllToAll::kNcclAlltoAll
                                                              : AllToAll::kGroupedSendRecv;
}
inline const char* name(AllToAll all_to_all) {
  return all_to_all == AllToAll::kNcclAlltoAll ? "ncclAlltoAll" : "grouped send/recv";
}

// What ncclConfig_t gets, as nccl-tests 2.19 initComms sets it: everything at
// NCCL_CONFIG_INITIALIZER's defaults (blocking included) except
// nvlinkCentricSched = 1 from NCCL 2.28 on (a header-only guard there: older
// libraries ignore fields past their config version).
constexpr bool uses_init_rank_config(int header_code) {
  return header_code >= kInitRankConfigSince;
}
constexpr bool sets_nvlink_centric_sched(int header_code) {
  return header_code >= kNvlinkCentricSchedSince;
}

// The communicator's blocking mode when the config leaves `blocking` undefined:
// NCCL's default 1 unless NCCL_COMM_BLOCKING is 0 or 1 (init.cc, envConfigOverride).
inline int effective_blocking(const char* nccl_comm_blocking) {
  if (nccl_comm_blocking == nullptr || *nccl_comm_blocking == '\0') return 1;
  char* end = nullptr;
  const long value = std::strtol(nccl_comm_blocking, &end, 0);
  if (end == nccl_comm_blocking || *end != '\0') return 1;
  return value == 0 ? 0 : 1;
}

// "" when fp8 (e4m3/e5m2) can be used; otherwise one line saying what is
// needed. min_compute_capability is major*10+minor of the oldest GPU of the
// communicator (0: unknown).
inline std::string fp8_unsupported_reason(int header_code, int library_code,
                                          int min_compute_capability) {
  if (header_code < kFp8Since) {
    return "fp8 needs NCCL >= 2.24 at build time (this ccscope was built with NCCL " +
           version_text(header_code) + "); use another -d/--datatype";
  }
  if (library_code < kFp8Since) {
    return "fp8 needs NCCL >= 2.24 at run time (the NCCL library loaded is " +
           version_text(library_code) + "); use another -d/--datatype";
  }
  if (min_compute_capability < kFp8MinComputeCapability) {
    return "fp8 needs GPUs of compute capability >= 9.0 (Hopper) on every rank; the oldest GPU "
           "here is " +
           std::to_string(min_compute_capability / 10) + "." +
           std::to_string(min_compute_capability % 10) + "; use another -d/--datatype";
  }
  return "";
}

// What the backend uses, for the run record ("key=value" pairs, ", " between;
// values never contain ", ").
struct Resources {
  int header_code = 0;
  int library_code = 0;
  Allocator allocator = Allocator::kCudaMalloc;
  AllToAll all_to_all = AllToAll::kGroupedSendRecv;
  bool init_rank_config = false;
  bool nvlink_centric_sched = false;
  int blocking = 1;
  int min_compute_capability = 0;  // major*10+minor, over all ranks
  bool fp8 = false;
  bool isolate_ranks = false;
};

inline std::string resources_text(const Resources& r) {
  std::string text = "nccl=" + version_text(r.library_code);
  text += ", nccl_header=" + version_text(r.header_code);
  text += std::string(", alloc=") + name(r.allocator);
  text += std::string(", alltoall=") + name(r.all_to_all);
  text +=
      std::string(", init=") + (r.init_rank_config ? "ncclCommInitRankConfig" : "ncclCommInitRank");
  if (r.nvlink_centric_sched) text += ", nvlinkCentricSched=1";
  text += ", blocking=" + std::to_string(r.blocking);
  text += ", mulsum=ncclRedOpCreatePreMulSum";
  text += ", graph_capture=thread-local";
  if (r.min_compute_capability > 0) {
    text += ", min_cc=" + std::to_string(r.min_compute_capability / 10) + "." +
            std::to_string(r.min_compute_capability % 10);
  }
  text += std::string(", fp8=") + (r.fp8 ? "yes" : "no");
  if (r.isolate_ranks) text += ", hostid=per-rank";
  return text;
}

}  // namespace ccscope::nccl_choices
