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

std::optional<size_t> host_available_memory() {
  const std::string text = read_small_file("/proc/meminfo");
  const size_t at = text.find("MemAvailable:");
  if (at == std::string::npos) return std::nullopt;
  size_t kib = 0;
  bool digits = false;
  for (size_t i = at + 13; i < text.size() && text[i] != '\n'; ++i) {
    if (std::isdigit(static_cast<unsigned char>(text[i]))) {
      kib = kib * 10 + static_cast<size_t>(text[i] - '0');
      digits = true;
    } else if (digits) {
      break;
    }
  }
  if (!digits) return std::nullopt;
  return kib * 1024;
}

std::string trim_blanks(const std::string& text) { return std::string(trimmed(text)); }

}  // namespace ccscope
