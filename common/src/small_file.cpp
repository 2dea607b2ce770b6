#include "ccscope/common/small_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <vector>

#include "ccscope/common/text.h"

namespace ccscope {

std::string read_small_file(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  std::vector<char> chunk(4096);
  while (text.size() < limit) {
    const ssize_t got = ::read(fd, chunk.data(), std::min(chunk.size(), limit - text.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) text.clear();
    if (got <= 0) break;
    text.append(chunk.data(), static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

std::string trim_blanks(const std::string& text) { return std::string(trimmed(text)); }

}  // namespace ccscope
