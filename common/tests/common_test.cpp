#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/common/environment.h"
#include "ccscope/common/json_text.h"
#include "ccscope/common/nccl_version.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/small_file.h"
#include "ccscope/common/statistics.h"
#include "ccscope/common/text.h"
#include "ccscope/common/utc_time.h"

namespace ccscope {
namespace {

TEST(Sizes, ParsesBinarySuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("64M"), 64u << 20);
  EXPECT_EQ(parse_size("2G"), size_t{2} << 30);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("16MiB"), 16u << 20);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_EQ(parse_size("0"), 0u);  // rejected later by the options, with its own message
}

TEST(Sizes, FractionsTruncateToWholeBytesAsNcclTests) {
  EXPECT_EQ(parse_size("0.5M"), size_t{524288});
  EXPECT_EQ(parse_size("1.5K"), size_t{1536});
  EXPECT_EQ(parse_size("0.3K"), size_t{307});  // 307.2 truncated
  EXPECT_EQ(parse_size("2.25G"), size_t{2415919104});
  EXPECT_EQ(parse_size("0.5T"), size_t{549755813888});
  EXPECT_EQ(parse_size("10.9"), size_t{10});
  EXPECT_EQ(parse_size("1g"), size_t{1} << 30);
  EXPECT_FALSE(parse_size("1."));
  EXPECT_FALSE(parse_size(".5M"));
  EXPECT_FALSE(parse_size("1.2.3"));
  EXPECT_FALSE(parse_size("16777216T"));                                       // 2^64
  EXPECT_EQ(parse_size("16777215.999999T"), size_t{18446744073708452104ULL});  // floor(x * 2^40)
}

TEST(Sizes, RejectsGarbage) {
  for (const char* bad :
       {"", "-8", "M", "1X", "1MM", "1.5.M", "99999999999999999999999", "16777216T"})
    EXPECT_FALSE(parse_size(bad)) << bad;
}

TEST(Sizes, Formats) {
  EXPECT_EQ(format_size(8), "8 B");
  EXPECT_EQ(format_size(1024), "1 KiB");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(size_t{64} << 20), "64 MiB");
  EXPECT_EQ(format_size(1234567), "1.18 MiB");
  EXPECT_EQ(format_size(std::numeric_limits<size_t>::max()), "16 EiB");
}

TEST(Statistics, MedianOfOddAndEvenCountsInAnyOrder) {
  EXPECT_EQ(median(std::vector<double>{}), 0);
  EXPECT_EQ(median(std::vector<double>{3, 1, 2}), 2);
  EXPECT_EQ(median(std::vector<double>{4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median(std::vector<double>{9, 9, 1, 9}), 9);
}

TEST(Sizes, ExactFormsNameEachSizeExactly) {
  EXPECT_EQ(format_exact_size(1536), "1536 B");
  EXPECT_EQ(format_exact_size(65536), "64 KiB");
  EXPECT_EQ(format_exact_size(size_t{3} << 30), "3 GiB");
  EXPECT_EQ(format_exact_size(0), "0 B");
  EXPECT_EQ(format_exact_sizes({8, 1024, 1536}), "8 B, 1 KiB, 1536 B");
}

TEST(Statistics, MedianAbsoluteDeviation) {
  EXPECT_EQ(median_absolute_deviation(std::vector<double>{}), 0);
  EXPECT_EQ(median_absolute_deviation(std::vector<double>{7}), 0);
  EXPECT_EQ(median_absolute_deviation(std::vector<double>{5, 5, 5}), 0);
  // median 2, deviations {1, 1, 0, 0, 2, 4, 7} -> 1; the 9 does not move it.
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{1, 1, 2, 2, 4, 6, 9}), 1);
  // Even count: median 2.5, deviations {1.5, 0.5, 0.5, 1.5} -> 1.
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{1, 2, 3, 4}), 1);
  // One wild value among a tight cluster leaves it small.
  EXPECT_DOUBLE_EQ(median_absolute_deviation(std::vector<double>{10, 10, 10, 11, 1000}), 0);
}

TEST(UtcTime, Iso8601) {
  EXPECT_EQ(utc_iso8601(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_iso8601(1795872670), "2026-11-28T13:31:10Z");
  EXPECT_EQ(utc_now_iso8601().size(), 20u);
}

TEST(Environment, RecordsWhatChangesCollectives) {
  std::string a = "NCCL_DEBUG=INFO", b = "HOME=/root", c = "UCX_TLS=rc,sm", d = "NOEQUALS",
              e = "CUDA_VISIBLE_DEVICES=0,1", f = "MY_NCCL_X=1", g = "FI_PROVIDER=efa";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), e.data(), f.data(), g.data(), nullptr};
  const auto found = recorded_environment(env);
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[0], (std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", "0,1"}));
  EXPECT_EQ(found[1].first, "FI_PROVIDER");
  EXPECT_EQ(found[2].first, "NCCL_DEBUG");
  EXPECT_EQ(found[3], (std::pair<std::string, std::string>{"UCX_TLS", "rc,sm"}));
  EXPECT_TRUE(is_recorded_variable("OMPI_COMM_WORLD_SIZE"));
  EXPECT_FALSE(is_recorded_variable("PATH"));
}

TEST(NcclVersion, BothCodeLayouts) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21803), "2.18.3");
  EXPECT_EQ(nccl_version_text(2804), "2.8.4");  // before 2.9: X*1000+Y*100+Z
  EXPECT_EQ(nccl_version_text(0), "");
  EXPECT_EQ(nccl_version_code(2, 8, 4), 2804);
  EXPECT_EQ(nccl_version_code(2, 28, 9), 22809);
}

TEST(SmallFile, HostAvailableMemoryIsRead) {
  const auto available = host_available_memory();
  ASSERT_TRUE(available);  // Linux has MemAvailable since 3.14
  EXPECT_GT(*available, size_t{1} << 20);
}

TEST(SmallFile, ReadsUpToTheLimitAndNothingWhenUnreadable) {
  char path[] = "/tmp/ccscope-small-file-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  FILE* file = fdopen(fd, "w");
  std::fputs("  boot 1234\n", file);
  std::fclose(file);
  EXPECT_EQ(read_small_file(path), "  boot 1234\n");
  EXPECT_EQ(read_small_file(path, 6), "  boot");
  EXPECT_EQ(trim_blanks(read_small_file(path)), "boot 1234");
  std::remove(path);
  EXPECT_EQ(read_small_file(path), "");
  EXPECT_EQ(read_small_file("/tmp"), "");  // a directory: the read fails
  EXPECT_EQ(trim_blanks(" \t\n"), "");
}

}  // namespace
}  // namespace ccscope

namespace ccscope {
namespace {

std::string nested(const std::string& open, const std::string& close, size_t depth) {
  std::string text;
  for (size_t i = 0; i < depth; ++i) text += open;
  text += "1";
  for (size_t i = 0; i < depth; ++i) text += close;
  return text;
}

TEST(JsonText, RefusesDocumentsNestedDeeperThanTheLimitAtOnce) {
  EXPECT_EQ(parse_json_text(nested("[", "]", kMaxJsonDepth)).dump().size(),
            2 * static_cast<size_t>(kMaxJsonDepth) + 1);
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"[", "]"},
                                    std::pair<std::string, std::string>{"{\"a\":", "}"}}) {
    try {
      (void)parse_json_text(nested(open, close, 100000));
      FAIL() << open << " x 100000 was accepted";
    } catch (const JsonLimitError& e) {
      EXPECT_STREQ(e.what(), "nested deeper than 256 levels: not a JSON document ccscope reads");
    }
  }
  EXPECT_THROW((void)parse_json_text(nested("[", "]", kMaxJsonDepth + 1)), JsonLimitError);
}

TEST(JsonText, CountsOnlyTheBracketsOutsideStringsAndComments) {
  const std::string many(300, '[');
  // In a string (after an escaped quote) and in comments: not nesting.
  const auto doc = parse_json_text("{\"k\": \"\\\"" + many + "\"}");
  EXPECT_EQ(doc.at("k").get<std::string>(), "\"" + many);
  EXPECT_EQ(
      parse_json_text("// " + many + "\n/* " + many + " */ [1]", /*ignore_comments=*/true).dump(),
      "[1]");
  // Where comments are not allowed, the text is not a comment: its brackets count.
  EXPECT_THROW((void)parse_json_text("/* " + many + " */ [1]"), JsonLimitError);
}

TEST(JsonText, RefusesATextLargerThanTheLimitBeforeParsing) {
  // Untouched anonymous pages: the limit is checked before a byte is read.
  const size_t size = kMaxJsonBytes + 1;
  void* pages = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(pages, MAP_FAILED);
  const std::string_view big(static_cast<const char*>(pages), size);
  try {
    (void)parse_json_text(big);
    ::munmap(pages, size);
    FAIL() << "accepted";
  } catch (const JsonLimitError& e) {
    ::munmap(pages, size);
    EXPECT_STREQ(e.what(), "larger than 256 MiB: not a JSON document ccscope reads");
  }
}

TEST(JsonText, CallsTheCallersCallbackAndHonoursComments) {
  int keys = 0;
  const auto doc = parse_json_text<nlohmann::ordered_json>(
      "// a comment\n{\"b\": 1, \"a\": [2]}", /*ignore_comments=*/true,
      [&keys](int, nlohmann::ordered_json::parse_event_t event, nlohmann::ordered_json&) {
        keys += event == nlohmann::ordered_json::parse_event_t::key;
        return true;
      });
  EXPECT_EQ(keys, 2);
  EXPECT_EQ(doc.dump(), "{\"b\":1,\"a\":[2]}");
  EXPECT_THROW((void)parse_json_text("{\"a\": }"), nlohmann::json::parse_error);
}

TEST(Text, FoldsOnlyAsciiLettersAndTrimsEveryBlank) {
  EXPECT_EQ(ascii_lower("NVLink Gen4 \xC3\x84-Z"), "nvlink gen4 \xC3\x84-z");  // UTF-8 kept
  EXPECT_EQ(trimmed(" \t\r\n x y \v\f\n"), "x y");
  EXPECT_EQ(trimmed(" \t\n"), "");
  EXPECT_EQ(trimmed(""), "");
  EXPECT_EQ(trimmed("x"), "x");
  EXPECT_EQ(trim_blanks("  450 MHz\n"), "450 MHz");
}

TEST(Text, SplitKeepsEveryItemEmptyOnesIncluded) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(split(",", ','), (std::vector<std::string>{"", ""}));
  EXPECT_EQ(split("0-3 x", ' '), (std::vector<std::string>{"0-3", "x"}));
  EXPECT_EQ(split("mlx5_0:1", ','), (std::vector<std::string>{"mlx5_0:1"}));
}

}  // namespace
}  // namespace ccscope
