#pragma once
// Files the user names on the command line: results read in, and outputs
// (--csv, --json, report -o, the baseline sidecar) written out. ccscope runs as
// root on shared nodes, so an output path never replaces what the user did not
// ask to write: a regular file (or a new path) is replaced whole through a
// temporary file renamed over it; a character device or FIFO (/dev/null,
// /dev/stdout, a pipe) is written in place; a symbolic link is followed to its
// target; a directory, a block device or a socket is refused.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ccscope::reports {

// What a path names now, with symbolic links followed.
enum class PathKind {
  kMissing,
  kRegular,
  kDirectory,
  kCharacterDevice,
  kFifo,
  kBlockDevice,
  kSocket,
  kOther
};

enum class WriteMethod {
  kReplace,  // write a temporary beside the target, then rename it over the target
  kInPlace,  // open the target itself and write to it (devices, FIFOs)
  kRefuse,
};

// The decision for one kind of target (pure). `refusal` says why, for kRefuse.
struct WritePlan {
  WriteMethod method;
  std::string refusal;
};
WritePlan plan_write(PathKind kind);

struct OutputTarget {
  std::string path;      // as the user gave it (for messages; opened for kInPlace)
  std::string resolved;  // symbolic links followed: the file that gets replaced
  PathKind kind = PathKind::kMissing;
  WriteMethod method = WriteMethod::kReplace;
};

// Classifies `path` and decides how to write it. Throws InputError (one line:
// what is wrong, what to do) for a directory, a device that must not be
// written, a missing parent directory, a symbolic-link loop or a path too long.
OutputTarget resolve_output(const std::string& path);

// The same file named twice, as two outputs or as an output and an input:
// throws InputError naming both uses. Each entry is (what, path), e.g.
// ("--csv", "run.csv"). Character devices (/dev/null) may repeat.
void refuse_same_file(const std::vector<std::pair<std::string, std::string>>& uses);

// Every output of one run, checked together before anything is read or
// measured (the one opener every verb's writers go through): an empty name, a
// file that an input or another output of the run also names, or a target
// resolve_output refuses throws InputError (one line). `outputs` and `inputs`
// are (what, path), e.g. ("--csv", "run.csv"), ("log file", "x.log"); "-"
// (standard input or output) is skipped. Returns the targets in `outputs`'
// order ("-" gives a target with an empty path).
std::vector<OutputTarget> resolve_outputs(
    const std::vector<std::pair<std::string, std::string>>& outputs,
    const std::vector<std::pair<std::string, std::string>>& inputs = {});

// An output that could not be written (a full disk, an I/O error): what() is
// one line, "cannot write 'F': REASON". Verbs exit 1 for it.
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// The system's reason for `err` on `path`, as WriteError's one line.
[[noreturn]] void throw_write_error(const std::string& path, int err);

// Creates the directory `path` (and its parents) for outputs; InputError (one
// line, what to do) when a part of it is a file, a dangling symbolic link or
// not permitted.
void create_output_directory(const std::string& path);

// Writes `content` as the whole of the target (see the file comment); throws
// WriteError with the system's reason. Leaves no temporary behind.
void write_whole_file(const OutputTarget& target, std::string_view content);

// Opens the target for a stream of rows (the CSV): regular files and new paths
// are created or truncated, devices and FIFOs opened in place (a FIFO without
// a reader is refused rather than waited on). Returns a file descriptor.
int open_stream_output(const OutputTarget& target);
// Writes all of `text` to `fd` (again after EINTR); false with errno set on failure.
bool write_all(int fd, std::string_view text);

// Reads a whole results file (at most `max_bytes`). Throws InputError for a
// directory, an unreadable path, a NUL byte (binary data, /dev/zero) with its
// line, or a file larger than max_bytes.
inline constexpr size_t kMaxInputBytes = size_t{1} << 30;
std::string read_input_file(const std::string& path, size_t max_bytes = kMaxInputBytes);

// A path or name for a one-line message: quoted, with control characters
// (a new line in a file name) shown as \n, \t, \xHH.
std::string quote_name(std::string_view text);
// `text` itself when it has no control characters, else quote_name(text).
std::string printable(std::string_view text);

}  // namespace ccscope::reports
