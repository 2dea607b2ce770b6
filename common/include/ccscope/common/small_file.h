#pragma once
// Reading a small system file (sysfs attributes, /proc entries) that may be
// absent, unreadable or answer a read with an error.
#include <cstddef>
#include <optional>
#include <string>

namespace ccscope {

// Up to `limit` bytes of the file at `path`; "" when it cannot be opened or a
// read fails (sysfs answers EINVAL for the speed of a down interface). POSIX
// reads, not streams: libstdc++'s filebuf throws on such a read error.
std::string read_small_file(const std::string& path, size_t limit = 1 << 20);

// MemAvailable from /proc/meminfo (bytes), or nullopt when it cannot be read.
std::optional<size_t> host_available_memory();

// `text` without leading and trailing white space.
std::string trim_blanks(const std::string& text);

}  // namespace ccscope
