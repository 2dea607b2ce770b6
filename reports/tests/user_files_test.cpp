// How ccscope writes and reads the files a user names (user_files.h): the
// decision per kind of target, then real files, links, FIFOs and device nodes
// made in a scratch directory (never a system one).
#include "ccscope/reports/user_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

#include "ccscope/reports/loaded_results.h"
#include "compare_test_util.h"

namespace ccscope::reports {
namespace {

using testing::slurp;
using testing::spit;
using testing::TempDir;
namespace fs = std::filesystem;

std::string refusal_of(const std::string& path) {
  try {
    resolve_output(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(UserFiles, PlanPerKind) {
  EXPECT_EQ(plan_write(PathKind::kMissing).method, WriteMethod::kReplace);
  EXPECT_EQ(plan_write(PathKind::kRegular).method, WriteMethod::kReplace);
  EXPECT_EQ(plan_write(PathKind::kCharacterDevice).method, WriteMethod::kInPlace);
  EXPECT_EQ(plan_write(PathKind::kFifo).method, WriteMethod::kInPlace);
  for (PathKind refused :
       {PathKind::kDirectory, PathKind::kBlockDevice, PathKind::kSocket, PathKind::kOther}) {
    EXPECT_EQ(plan_write(refused).method, WriteMethod::kRefuse);
    EXPECT_FALSE(plan_write(refused).refusal.empty());
  }
}

TEST(UserFiles, RegularFileIsReplacedWholeKeepingItsPermissions) {
  TempDir dir;
  const std::string path = dir.file("run.json");
  spit(path, "old content that is longer than the new one");
  ::chmod(path.c_str(), 0640);
  spit(path + ".tmp", "the user's own file");
  const OutputTarget target = resolve_output(path);
  EXPECT_EQ(target.kind, PathKind::kRegular);
  write_whole_file(target, "new");
  EXPECT_EQ(slurp(path), "new");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(slurp(path + ".tmp"), "the user's own file");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 2u) << "a temporary was left behind";
}

TEST(UserFiles, SymbolicLinksAreFollowedNotReplaced) {
  TempDir dir;
  spit(dir.file("target.json"), "old");
  fs::create_symlink("target.json", dir.file("link.json"));
  write_whole_file(resolve_output(dir.file("link.json")), "through the link");
  EXPECT_TRUE(fs::is_symlink(dir.file("link.json")));
  EXPECT_EQ(slurp(dir.file("target.json")), "through the link");
  // A dangling link: the file is created where it points.
  fs::create_symlink("later.json", dir.file("dangling.json"));
  write_whole_file(resolve_output(dir.file("dangling.json")), "created");
  EXPECT_TRUE(fs::is_symlink(dir.file("dangling.json")));
  EXPECT_EQ(slurp(dir.file("later.json")), "created");
}

TEST(UserFiles, RefusedTargetsSayWhyInOneLine) {
  TempDir dir;
  fs::create_directory(dir.file("sub"));
  EXPECT_NE(refusal_of(dir.file("sub")).find("is a directory"), std::string::npos);
  EXPECT_NE(refusal_of(dir.file("missing/x.json")).find("No such file or directory"),
            std::string::npos);
  fs::create_symlink("b", dir.file("a"));
  fs::create_symlink("a", dir.file("b"));
  EXPECT_NE(refusal_of(dir.file("a")).find("symbolic links"), std::string::npos);
  EXPECT_NE(refusal_of(dir.file(std::string(5000, 'x'))).find("too long"), std::string::npos);
  fs::create_directory(dir.file("d\nir"));
  const std::string message = refusal_of(dir.file("d\nir"));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("d\\nir"), std::string::npos) << message;
}

TEST(UserFiles, FifoIsWrittenInPlaceAndRefusedWithoutAReader) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const OutputTarget target = resolve_output(fifo);
  EXPECT_EQ(target.method, WriteMethod::kInPlace);
  try {
    write_whole_file(target, "x");
    ADD_FAILURE() << "wrote to a FIFO nobody reads";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("FIFO"), std::string::npos);
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(UserFiles, CharacterDeviceIsWrittenInPlaceAndStaysADevice) {
  TempDir dir;
  const std::string null_device = dir.file("null"), full_device = dir.file("full");
  if (::mknod(null_device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod(full_device.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
    GTEST_SKIP() << "mknod needs root";
  write_whole_file(resolve_output(null_device), "discarded");
  EXPECT_TRUE(fs::is_character_file(null_device));
  EXPECT_THROW(write_whole_file(resolve_output(full_device), "no room"), std::runtime_error);
  EXPECT_TRUE(fs::is_character_file(full_device));
}

TEST(UserFiles, SameFileTwiceIsRefused) {
  TempDir dir;
  spit(dir.file("a.csv"), "x");
  fs::create_symlink("a.csv", dir.file("link.csv"));
  EXPECT_THROW(refuse_same_file({{"--csv", dir.file("new")}, {"--json", dir.file("new")}}),
               InputError);
  EXPECT_THROW(
      refuse_same_file({{"-o", dir.file("link.csv")}, {"results file", dir.file("a.csv")}}),
      InputError);
  EXPECT_THROW(refuse_same_file({{"--csv", dir.file("./a.csv")}, {"--json", dir.file("a.csv")}}),
               InputError);
  EXPECT_NO_THROW(refuse_same_file({{"--csv", dir.file("a.csv")}, {"--json", dir.file("b")}}));
  EXPECT_NO_THROW(refuse_same_file({{"--csv", "/dev/null"}, {"--json", "/dev/null"}}));
  try {
    refuse_same_file({{"--csv", dir.file("x")}, {"--json", dir.file("x")}});
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--csv and --json name the same file"), std::string::npos);
  }
}

// The one opener every verb's outputs go through: an empty name, an output
// that is an input of the run or another output, all refused before anything
// is written (nccl-log --json-file X X replaced its input log).
TEST(UserFiles, ResolveOutputsRefusesEmptyNamesAndInputs) {
  TempDir dir;
  const std::string log = dir.file("x.log");
  spit(log, "input\n");
  const auto refusal = [](const std::vector<std::pair<std::string, std::string>>& outputs,
                          const std::vector<std::pair<std::string, std::string>>& inputs) {
    try {
      resolve_outputs(outputs, inputs);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal({{"--csv", ""}}, {}),
            "--csv: an empty file name: name a file, or leave --csv out");
  EXPECT_EQ(refusal({{"--json-file", log}}, {{"log file", log}}),
            "--json-file and log file name the same file '" + log + "': give each its own file");
  fs::create_symlink(log, dir.file("link.json"));
  EXPECT_EQ(refusal({{"--json-file", dir.file("link.json")}}, {{"log file", log}}),
            "--json-file and log file name the same file '" + log + "': give each its own file");
  EXPECT_EQ(refusal({{"--csv", dir.file("s.csv")}, {"--runs-csv", dir.file("s.csv")}}, {}),
            "--csv and --runs-csv name the same file '" + dir.file("s.csv") +
                "': give each its own file");
  EXPECT_EQ(slurp(log), "input\n");
  const auto targets = resolve_outputs({{"-o", "-"}, {"--csv", dir.file("a.csv")}}, {{"in", log}});
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].path, "");
  EXPECT_EQ(targets[1].path, dir.file("a.csv"));
}

// A write failure is one line naming the file once, and a WriteError (exit 1).
TEST(UserFiles, WriteFailureIsAWriteErrorNamingTheFileOnce) {
  if (::access("/dev/full", W_OK) != 0) GTEST_SKIP() << "no writable /dev/full here";
  try {
    write_whole_file(resolve_output("/dev/full"), "x");
    FAIL() << "/dev/full took the text";
  } catch (const WriteError& e) {
    EXPECT_STREQ(e.what(), "cannot write '/dev/full': No space left on device");
  }
}

// train --export onto a dangling link said "filesystem error: cannot create
// directories: File exists [...]".
TEST(UserFiles, OutputDirectoryProblemsAreOneLineWithoutTheLibrarysText) {
  TempDir dir;
  const std::string link = dir.file("gone");
  fs::create_symlink(dir.file("missing/target"), link);
  const auto refusal = [](const std::string& path) {
    try {
      create_output_directory(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal(link), "'" + link +
                               "' is a symbolic link to a place that does not exist: create its "
                               "target or name another directory");
  spit(dir.file("file"), "x");
  EXPECT_EQ(refusal(dir.file("file")),
            "'" + dir.file("file") + "' exists and is not a directory: name a directory");
  EXPECT_EQ(refusal(dir.file("file/sub")), "'" + dir.file("file/sub") +
                                               "': cannot create the directory: Not a directory; "
                                               "check the path and permissions");
  EXPECT_EQ(refusal(dir.file("new/sub")), "");
  EXPECT_TRUE(fs::is_directory(dir.file("new/sub")));
}

TEST(UserFiles, ReadingRefusesBinaryDirectoriesAndHugeFiles) {
  TempDir dir;
  spit(dir.file("nul.txt"), std::string("line 1\nline 2\nab\0cd\n", 20));
  try {
    read_input_file(dir.file("nul.txt"));
    ADD_FAILURE() << "a NUL byte was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nul.txt:3: a NUL byte"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_input_file(dir.path().string()), InputError);
  spit(dir.file("big.txt"), std::string(3000, 'x'));
  EXPECT_THROW(read_input_file(dir.file("big.txt"), 2048), InputError);
  EXPECT_EQ(read_input_file(dir.file("big.txt"), 3000).size(), 3000u);
  EXPECT_THROW(read_input_file("/dev/zero"), InputError);  // NUL in the first chunk
}

TEST(UserFiles, NamesInMessagesShowControlCharacters) {
  EXPECT_EQ(quote_name("a\nb\tc\x01"), "'a\\nb\\tc\\x01'");
  EXPECT_EQ(printable("plain.csv"), "plain.csv");
  EXPECT_EQ(printable("new\nline.csv"), "'new\\nline.csv'");
}

}  // namespace
}  // namespace ccscope::reports
