#include <gtest/gtest.h>

#include "core/units.h"

namespace laconic {
namespace {

TEST(Units, Bandwidths) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("100 Gbit/s"), 12.5e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1Gbit/s"), 125e6);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("450 GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth(" 2 GiB/s "), 2.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("800 Mbps"), 100e6);
  EXPECT_FALSE(parse_bandwidth("100"));          // a unit is required: bits or bytes?
  EXPECT_FALSE(parse_bandwidth("100 Gbit"));
  EXPECT_FALSE(parse_bandwidth("0 Gbit/s"));
  EXPECT_FALSE(parse_bandwidth("-1 GB/s"));
  EXPECT_FALSE(parse_bandwidth("fast"));
}

TEST(Units, Durations) {
  EXPECT_DOUBLE_EQ(*parse_duration("5 us"), 5e-6);
  EXPECT_DOUBLE_EQ(*parse_duration("30ms"), 30e-3);
  EXPECT_DOUBLE_EQ(*parse_duration("2 s"), 2.0);
  EXPECT_DOUBLE_EQ(*parse_duration("0 s"), 0.0);
  EXPECT_DOUBLE_EQ(*parse_duration("1.5 min"), 90.0);
  EXPECT_FALSE(parse_duration("5"));
  EXPECT_FALSE(parse_duration("-1 ms"));
  EXPECT_FALSE(parse_duration("5 parsecs"));
}

TEST(Units, FormatParsesBackExactly) {
  for (double b : {12.5e9, 125e6, 450e9 / 8, 1.0, 3e3}) EXPECT_DOUBLE_EQ(*parse_bandwidth(format_bandwidth(b)), b) << b;
  for (double s : {5e-6, 30e-3, 2.0, 0.0, 7e-9}) EXPECT_DOUBLE_EQ(*parse_duration(format_duration(s)), s) << s;
  EXPECT_EQ(format_bandwidth(12.5e9), "100 Gbit/s");
  EXPECT_EQ(format_duration(30e-3), "30 ms");
}

}  // namespace
}  // namespace laconic
