#include "faults.h"

#include <gtest/gtest.h>

namespace ccscope::standin {
namespace {

TEST(StandinFaults, ParsesEveryKindAndField) {
  const FaultParse p = parse_faults("corrupt:rank=1:op=3:element=7;hang:rank=0:op=2;init_hang:rank=2");
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.faults.size(), 3u);
  EXPECT_EQ(p.faults[0].kind, FaultKind::kCorrupt);
  EXPECT_EQ(p.faults[0].rank, 1);
  EXPECT_EQ(p.faults[0].op, 3u);
  EXPECT_EQ(p.faults[0].element, 7u);
  EXPECT_EQ(p.faults[1].kind, FaultKind::kHang);
  EXPECT_EQ(p.faults[1].op, 2u);
  EXPECT_EQ(p.faults[2].kind, FaultKind::kInitHang);
  EXPECT_TRUE(find_fault(p.faults, FaultKind::kHang, 0, 2).has_value());
  EXPECT_FALSE(find_fault(p.faults, FaultKind::kHang, 0, 3).has_value());
  EXPECT_FALSE(find_fault(p.faults, FaultKind::kHang, 1, 2).has_value());
  EXPECT_TRUE(find_fault(p.faults, FaultKind::kInitHang, 2, 99).has_value());
}

TEST(StandinFaults, RefusesWhatItCannotRead) {
  EXPECT_NE(parse_faults("explode:rank=1").error, "");
  EXPECT_EQ(parse_faults("call_hang:rank=1:op=4").faults.at(0).kind, FaultKind::kCallHang);
  EXPECT_NE(parse_faults("hang:op=2").error.find("names no rank"), std::string::npos);
  EXPECT_NE(parse_faults("hang:rank=x").error, "");
  EXPECT_NE(parse_faults("hang:rank=1:op=0").error, "");
  EXPECT_EQ(parse_faults("").faults.size(), 0u);
}

}  // namespace
}  // namespace ccscope::standin
