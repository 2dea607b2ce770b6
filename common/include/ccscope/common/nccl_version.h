#pragma once
// NCCL version codes (NCCL_VERSION_CODE, ncclGetVersion, nccl-tests'
// "nccl-headers=22803"): X*10000+Y*100+Z from NCCL 2.9 on, X*1000+Y*100+Z
// before, what nccl.h's NCCL_VERSION(X,Y,Z) gives.
#include <string>

namespace ccscope {

constexpr int nccl_version_code(int major, int minor, int patch) {
  return (major <= 2 && minor <= 8) ? major * 1000 + minor * 100 + patch
                                    : major * 10000 + minor * 100 + patch;
}

// "2.28.9" for 22809, "2.8.4" for 2804; "" for a code <= 0.
inline std::string nccl_version_text(long long code) {
  if (code <= 0) return "";
  const long long major = code < 10000 ? code / 1000 : code / 10000;
  const long long minor = code < 10000 ? code % 1000 / 100 : code % 10000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

}  // namespace ccscope
