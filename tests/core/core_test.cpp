#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/check.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/units.h"

namespace laconic {
namespace {

TEST(Check, MessageNamesFileConditionAndValues) {
  try {
    const int x = 3;
    LC_CHECK(x == 4, "x is ", x);
    FAIL() << "no throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("core_test.cpp:"), std::string::npos) << m;
    EXPECT_NE(m.find("`x == 4`"), std::string::npos) << m;
    EXPECT_NE(m.find("x is 3"), std::string::npos) << m;
  }
}

// Names from files reach one-line messages escaped: a newline cannot split the line, and the
// name stays readable.
TEST(Check, PrintableEscapesWhatWouldBreakTheLine) {
  EXPECT_EQ(printable("fc1.weight"), "fc1.weight");
  EXPECT_EQ(printable(std::string("a\nb\r\tc\\d\x07\0e\xc3\xbc", 13)), "a\\nb\\r\\tc\\\\d\\x07\\x00e\\xc3\\xbc");
  EXPECT_EQ(printable(std::string(100, 'x'), 4), "xxxx...");
  EXPECT_EQ(printable("\n\n\n").find('\n'), std::string::npos);
}

// Bytes in units; whole bytes without a fraction.
TEST(Units, FormatBytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(750), "750 B");
  EXPECT_EQ(format_bytes(1070000), "1.07 MB");
  EXPECT_EQ(format_bytes(126344144), "126.3 MB");
}

TEST(ParamStore, ViewsAreContiguousAndZeroed) {
  ParamStore s;
  const auto a = s.add("a.weight", {3, 4}, ParamGroup::decay);
  const auto b = s.add("a.bias", {3}, ParamGroup::no_decay);
  s.finalize();
  EXPECT_EQ(s.size(), 15u);
  EXPECT_EQ(s.view(a).offset, 0u);
  EXPECT_EQ(s.view(b).offset, 12u);
  EXPECT_EQ(s.param(b), s.params().data() + 12);
  EXPECT_EQ(s.grad(b), s.grads().data() + 12);
  for (float v : s.params()) EXPECT_EQ(v, 0.0f);
  s.grads()[5] = 1.0f;
  s.zero_grad();
  EXPECT_EQ(s.grads()[5], 0.0f);
}

TEST(ParamStore, RejectsDuplicatesAndLateAdds) {
  ParamStore s;
  s.add("w", {2}, ParamGroup::decay);
  EXPECT_THROW(s.add("w", {2}, ParamGroup::decay), Error);
  EXPECT_THROW(s.add("z", {0}, ParamGroup::decay), Error);
  s.finalize();
  EXPECT_THROW(s.add("v", {1}, ParamGroup::decay), Error);
}

TEST(Rng, PureFunctionOfKeyAndCounter) {
  const auto k = rng::key({1, 2, 3});
  EXPECT_EQ(rng::bits(k, 7), rng::bits(k, 7));
  EXPECT_NE(rng::bits(k, 7), rng::bits(k, 8));
  EXPECT_NE(rng::key({1, 2, 3}), rng::key({1, 2, 4}));
  EXPECT_NE(rng::key({1, 2}), rng::key({2, 1}));
}

TEST(Rng, UniformAndNormalMoments) {
  const auto k = rng::key({42, rng::kTest});
  constexpr int n = 200000;
  double su = 0, sn = 0, sn2 = 0;
  for (int i = 0; i < n; ++i) {
    const float u = rng::uniform(k, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    su += u;
    const double z = rng::normal(k, i);
    sn += z;
    sn2 += z * z;
  }
  EXPECT_NEAR(su / n, 0.5, 0.005);  // sd of the mean ~ 0.29/sqrt(n) = 0.00065
  EXPECT_NEAR(sn / n, 0.0, 0.01);
  EXPECT_NEAR(sn2 / n, 1.0, 0.02);
}

TEST(Rng, BelowIsInRangeAndCoversIt) {
  const auto k = rng::key({9});
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto v = rng::below(k, i, 7);
    ASSERT_LT(v, 7u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
}

}  // namespace
}  // namespace laconic
