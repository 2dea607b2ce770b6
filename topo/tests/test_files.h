#pragma once
// The topo tests' one way to read a file whole (fixtures under
// CCSCOPE_TOPO_TEST_DATA, files the tests wrote).
#include <fstream>
#include <sstream>
#include <string>

namespace ccscope::topo::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ccscope::topo::test
