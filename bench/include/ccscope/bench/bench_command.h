#pragma once
// The `ccscope bench` verb. Returns the process exit code:
// 0 ok, 1 wrong results or a backend failure, 2 bad arguments, 3 timeout.
#include <string>
#include <vector>

namespace ccscope::bench {

// `args` are the words after "bench"; `command_line` the whole command for the record.
int bench_main(const std::vector<std::string>& args, const std::vector<std::string>& command_line);

}  // namespace ccscope::bench
