// See user_files.h: how ccscope reads and writes the files a user names.
#include "ccscope/reports/user_files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {
namespace {

namespace fs = std::filesystem;

PathKind kind_of(mode_t mode) {
  if (S_ISREG(mode)) return PathKind::kRegular;
  if (S_ISDIR(mode)) return PathKind::kDirectory;
  if (S_ISCHR(mode)) return PathKind::kCharacterDevice;
  if (S_ISFIFO(mode)) return PathKind::kFifo;
  if (S_ISBLK(mode)) return PathKind::kBlockDevice;
  if (S_ISSOCK(mode)) return PathKind::kSocket;
  return PathKind::kOther;
}

std::string parent_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Why a path cannot be used, from the errno of stat/open, as "what to do".
std::string path_problem(int err) {
  switch (err) {
    case ELOOP:
      return "a loop of symbolic links: point it at a real file";
    case ENAMETOOLONG:
      return "the path is too long: choose a shorter one";
    case ENOTDIR:
      return "a part of the path is not a directory: check the path";
    case EACCES:
      return "permission denied: choose a writable place";
    default:
      return std::string(std::strerror(err)) + ": check the path";
  }
}

// A path that does not exist may be a symbolic link to a file not created yet:
// follow the chain to the name the file will get.
std::string follow_dangling_link(std::string path) {
  for (int hop = 0; hop < 40; ++hop) {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
    std::vector<char> target(PATH_MAX + 1);
    const ssize_t n = ::readlink(path.c_str(), target.data(), PATH_MAX);
    if (n < 0) return path;
    std::string next(target.data(), static_cast<size_t>(n));
    path = next.front() == '/' ? next : parent_of(path) + "/" + next;
  }
  throw InputError(quote_name(path) + ": " + path_problem(ELOOP));
}

}  // namespace

bool write_all(int fd, std::string_view text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

namespace {

[[noreturn]] void fail_writing(const OutputTarget& target, int err, const std::string& how = "") {
  throw WriteError(
      fmt::format("cannot write {}{}: {}", quote_name(target.path), how, std::strerror(err)));
}

// Opens the target itself (a device or FIFO). A FIFO is opened without
// blocking: with no reader, open() would wait forever.
int open_in_place(const OutputTarget& target) {
  const int flags = O_WRONLY | O_CLOEXEC | (target.kind == PathKind::kFifo ? O_NONBLOCK : 0);
  const int fd = ::open(target.path.c_str(), flags);
  if (fd < 0) {
    if (errno == ENXIO)
      throw InputError(quote_name(target.path) +
                       ": a FIFO that nobody reads: start its reader first");
    fail_writing(target, errno);
  }
  if (target.kind == PathKind::kFifo) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  // close() reports the last write error on some file systems (NFS).
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

}  // namespace

WritePlan plan_write(PathKind kind) {
  switch (kind) {
    case PathKind::kMissing:
    case PathKind::kRegular:
      return {WriteMethod::kReplace, ""};
    case PathKind::kCharacterDevice:
    case PathKind::kFifo:
      return {WriteMethod::kInPlace, ""};
    case PathKind::kDirectory:
      return {WriteMethod::kRefuse, "is a directory: name a file inside it"};
    case PathKind::kBlockDevice:
      return {WriteMethod::kRefuse, "is a block device (a disk): name a regular file"};
    case PathKind::kSocket:
      return {WriteMethod::kRefuse, "is a socket: name a regular file"};
    case PathKind::kOther:
      break;
  }
  return {WriteMethod::kRefuse, "is not a regular file: name a regular file"};
}

OutputTarget resolve_output(const std::string& path) {
  if (path.empty()) throw InputError("an empty output path: name a file");
  OutputTarget target;
  target.path = path;
  target.resolved = path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    target.kind = kind_of(st.st_mode);
    if (target.kind == PathKind::kRegular) {
      std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr),
                                                       &std::free);
      if (real) target.resolved = real.get();
    }
  } else {
    const int err = errno;
    if (err != ENOENT) throw InputError(quote_name(path) + ": " + path_problem(err));
    target.kind = PathKind::kMissing;
    target.resolved = follow_dangling_link(path);
    const std::string parent = parent_of(target.resolved);
    struct stat dir;
    if (::stat(parent.c_str(), &dir) != 0)
      throw InputError(quote_name(path) + ": directory " + quote_name(parent) + ": " +
                       (errno == ENOENT ? std::string(std::strerror(ENOENT)) + ": create it first"
                                        : path_problem(errno)));
    if (!S_ISDIR(dir.st_mode))
      throw InputError(quote_name(path) + ": " + quote_name(parent) + " is not a directory");
    if (base_of(target.resolved).size() > NAME_MAX)
      throw InputError(quote_name(path) + ": " + path_problem(ENAMETOOLONG));
  }
  const WritePlan plan = plan_write(target.kind);
  if (plan.method == WriteMethod::kRefuse) throw InputError(quote_name(path) + " " + plan.refusal);
  target.method = plan.method;
  return target;
}

void refuse_same_file(const std::vector<std::pair<std::string, std::string>>& uses) {
  // Identity: device and inode for what exists, the normalised absolute path
  // (links followed) for what is yet to be created.
  std::vector<std::string> ids;
  for (const auto& [what, path] : uses) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      ids.push_back(S_ISCHR(st.st_mode) ? std::string()
                                        : fmt::format("inode {}:{}", st.st_dev, st.st_ino));
    } else {
      std::error_code ec;
      std::string resolved = path;
      try {
        resolved = follow_dangling_link(path);
      } catch (const InputError&) {
      }
      const fs::path absolute = fs::absolute(resolved, ec);
      ids.push_back("path " + (ec ? resolved : absolute.lexically_normal().string()));
    }
  }
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!ids[i].empty() && ids[i] == ids[j])
        throw InputError(uses[j].first + " and " + uses[i].first + " name the same file " +
                         quote_name(uses[i].second) + ": give each its own file");
}

std::vector<OutputTarget> resolve_outputs(
    const std::vector<std::pair<std::string, std::string>>& outputs,
    const std::vector<std::pair<std::string, std::string>>& inputs) {
  std::vector<std::pair<std::string, std::string>> uses;
  for (const auto& [what, path] : outputs) {
    if (path.empty())
      throw InputError(what + ": an empty file name: name a file, or leave " + what + " out");
    if (path != "-") uses.emplace_back(what, path);
  }
  for (const auto& use : inputs)
    if (!use.second.empty() && use.second != "-") uses.push_back(use);
  refuse_same_file(uses);
  std::vector<OutputTarget> targets;
  for (const auto& use : outputs)
    targets.push_back(use.second == "-" ? OutputTarget{} : resolve_output(use.second));
  return targets;
}

void throw_write_error(const std::string& path, int err) {
  OutputTarget target;
  target.path = path;
  fail_writing(target, err);
}

void create_output_directory(const std::string& path) {
  if (path.empty()) throw InputError("an empty directory name: name a directory");
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(path, ec);
  if (fs::is_symlink(link) && !fs::exists(fs::status(path, ec)))
    throw InputError(quote_name(path) +
                     " is a symbolic link to a place that does not exist: create its target "
                     "or name another directory");
  if (fs::exists(fs::status(path, ec)) && !fs::is_directory(fs::status(path, ec)))
    throw InputError(quote_name(path) + " exists and is not a directory: name a directory");
  fs::create_directories(path, ec);
  if (ec)
    throw InputError(quote_name(path) + ": cannot create the directory: " + ec.message() +
                     "; check the path and permissions");
}

void write_whole_file(const OutputTarget& target, std::string_view content) {
  if (target.method == WriteMethod::kInPlace) {
    FileDescriptor fd(open_in_place(target));
    if (!write_all(fd.get(), content)) fail_writing(target, errno);
    if (!fd.close()) fail_writing(target, errno);
    return;
  }
  // A temporary in the target's directory (rename() cannot cross file systems),
  // created exclusively so that no existing file is ever truncated.
  const std::string dir = parent_of(target.resolved);
  const std::string base = base_of(target.resolved).substr(0, 200);
  std::string temporary;
  int raw_fd = -1;
  for (int attempt = 0; raw_fd < 0 && attempt < 100; ++attempt) {
    temporary = fmt::format("{}/.{}.ccscope-{}-{}.tmp", dir, base, ::getpid(), attempt);
    raw_fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (raw_fd < 0 && errno != EEXIST)
      fail_writing(target, errno, " (creating a temporary in " + quote_name(dir) + ")");
  }
  if (raw_fd < 0) fail_writing(target, EEXIST);
  FileDescriptor fd(raw_fd);
  const auto give_up = [&](int err) {
    ::unlink(temporary.c_str());
    fail_writing(target, err);
  };
  struct stat old;
  if (::stat(target.resolved.c_str(), &old) == 0 && S_ISREG(old.st_mode))
    ::fchmod(fd.get(), old.st_mode & 07777);  // the replaced file's permissions
  if (!write_all(fd.get(), content)) give_up(errno);
  // Durable before it replaces the previous version.
  if (::fsync(fd.get()) != 0 && errno != EINVAL && errno != EROFS) give_up(errno);
  if (!fd.close()) give_up(errno);
  if (std::rename(temporary.c_str(), target.resolved.c_str()) != 0) give_up(errno);
}

int open_stream_output(const OutputTarget& target) {
  if (target.method == WriteMethod::kInPlace) return open_in_place(target);
  const int fd = ::open(target.resolved.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail_writing(target, errno);
  return fd;
}

std::string read_input_file(const std::string& path, size_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw InputError(
        quote_name(path) + ": cannot open: " +
        (errno == ENOENT ? std::string("no such file; check the path") : path_problem(errno)));
  if (S_ISDIR(st.st_mode))
    throw InputError(quote_name(path) + " is a directory: name a results file");
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw InputError(quote_name(path) + ": cannot open: " + path_problem(errno));
  std::string text;
  std::vector<char> chunk(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(fd.get(), chunk.data(), chunk.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(quote_name(path) + ": cannot read: " + std::strerror(errno));
    }
    if (n == 0) break;
    const auto nul = std::find(chunk.begin(), chunk.begin() + n, '\0');
    if (nul != chunk.begin() + n) {
      const size_t line =
          1 + std::count(text.begin(), text.end(), '\n') + std::count(chunk.begin(), nul, '\n');
      throw InputError(fmt::format("{}:{}: a NUL byte: this is binary data, not a results file",
                                   printable(path), line));
    }
    if (text.size() + static_cast<size_t>(n) > max_bytes)
      throw InputError(fmt::format("{}: larger than {} MiB: not a results file", quote_name(path),
                                   max_bytes >> 20));
    text.append(chunk.data(), static_cast<size_t>(n));
  }
  return text;
}

std::string quote_name(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  return out + "'";
}

std::string printable(std::string_view text) {
  const bool clean = std::none_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == '\x7f';
  });
  return clean ? std::string(text) : quote_name(text);
}

}  // namespace ccscope::reports
