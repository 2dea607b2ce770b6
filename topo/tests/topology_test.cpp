#include "ccscope/topo/topology.h"

#include <gtest/gtest.h>

namespace ccscope::topo {
namespace {

TEST(BusId, NormalizesNvmlAndShortForms) {
  EXPECT_EQ(normalize_bus_id("00000000:00:06.0"), "0000:00:06.0");
  EXPECT_EQ(normalize_bus_id("34:00.0"), "0000:34:00.0");
  EXPECT_EQ(normalize_bus_id("0000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(normalize_bus_id("eth0"), "");
  EXPECT_EQ(normalize_bus_id("0000:34:00.0x"), "");
  EXPECT_EQ(normalize_bus_id("0000:34:20.0"), "");  // device is 5 bits
}

TEST(Nic, EffectiveRateIsTheLowerOfLineRateAndShaper) {
  Nic nic;
  EXPECT_EQ(nic.effective_Gbps(), 0);
  nic.rate_Gbps = 10;
  EXPECT_EQ(nic.effective_Gbps(), 10);
  nic.shaped_Gbps = 1;
  EXPECT_EQ(nic.effective_Gbps(), 1);
  nic.rate_Gbps = 0;
  EXPECT_EQ(nic.effective_Gbps(), 1);
}

}  // namespace
}  // namespace ccscope::topo
