// `trainer compare --tune`'s pure half (framework/report/tune.h): the flags, which configurations
// a variant gets, the choice on the validation losses, and the report's section.
#include "framework/report/tune.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/check.h"

namespace laconic {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

const std::vector<Variant> kVariants = {{"allreduce", {"sync.strategy=allreduce"}}, {"diloco", {"sync.strategy=diloco"}}};
const std::vector<VaryAxis> kVary = {{"sync.strategy", {"allreduce", "diloco"}}};

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Tune, ParsesAnOptionalVariantPrefix) {
  const TuneAxis all = parse_tune("optimizer.lr=0.1,0.2");
  EXPECT_EQ(all.variant, "");
  EXPECT_EQ(all.axis.key, "optimizer.lr");
  EXPECT_EQ(all.axis.values, (std::vector<std::string>{"0.1", "0.2"}));
  const TuneAxis one = parse_tune("diloco:sync.diloco.outer_lr=0.4,0.7");
  EXPECT_EQ(one.variant, "diloco");
  EXPECT_EQ(one.axis.key, "sync.diloco.outer_lr");
  // A ':' inside a value is no prefix.
  const TuneAxis value = parse_tune("run.name=a:b,c");
  EXPECT_EQ(value.variant, "");
  EXPECT_EQ(value.axis.values, (std::vector<std::string>{"a:b", "c"}));
  EXPECT_EQ(input_error([] { parse_tune("diloco:sync.diloco.outer_lr"); }),
            "--tune diloco:sync.diloco.outer_lr: expected section.key=value1,value2,...");
}

TEST(Tune, RefusesAnUnknownVariantAKeyComparedByVaryAndAKeyTunedTwice) {
  EXPECT_EQ(input_error([] { check_tune_axes({parse_tune("topk:optimizer.lr=1,2")}, kVariants, kVary); }),
            "--tune topk:optimizer.lr: no variant is named topk (the variants: allreduce, diloco)");
  EXPECT_NE(input_error([] { check_tune_axes({parse_tune("sync.strategy=a,b")}, kVariants, kVary); })
                .find("compared by --vary"),
            std::string::npos);
  EXPECT_EQ(input_error([] {
              check_tune_axes({parse_tune("optimizer.lr=1,2"), parse_tune("diloco:optimizer.lr=3,4")}, kVariants, kVary);
            }),
            "--tune optimizer.lr: tuned twice for variant diloco");
  EXPECT_NO_THROW(check_tune_axes({parse_tune("optimizer.lr=1,2"), parse_tune("diloco:sync.diloco.outer_lr=3,4")},
                                  kVariants, kVary));
}

TEST(Tune, EachVariantGetsTheProductOfTheAxesThatApplyToIt) {
  const std::vector<TuneAxis> axes = {parse_tune("optimizer.lr=0.1,0.2"), parse_tune("diloco:sync.diloco.outer_lr=0.4,0.7")};
  const std::vector<Variant> a = tune_configs(kVariants[0], axes);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].name, "lr=0.1");
  EXPECT_EQ(a[1].assignments, (std::vector<std::string>{"optimizer.lr=0.2"}));
  const std::vector<Variant> d = tune_configs(kVariants[1], axes);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[1].name, "lr=0.1,outer_lr=0.7");
  EXPECT_EQ(d[3].assignments, (std::vector<std::string>{"optimizer.lr=0.2", "sync.diloco.outer_lr=0.7"}));
  // Nothing applies: one configuration that changes nothing.
  const std::vector<Variant> none = tune_configs(kVariants[0], {parse_tune("diloco:sync.diloco.outer_lr=0.4,0.7")});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(none[0].assignments.empty());
}

TunedVariant with_losses(const std::vector<std::vector<double>>& per_config) {
  TunedVariant t{"diloco", {"optimizer.lr"}, {}, 0, false};
  for (std::size_t i = 0; i < per_config.size(); ++i)
    t.configs.push_back({{"lr=" + std::to_string(i), {"optimizer.lr=" + std::to_string(i)}}, {}, stat_of(per_config[i]), ""});
  return t;
}

TEST(Tune, ChoosesTheLowestMeanAmongConfigurationsFiniteOnEverySeed) {
  // Config 1 has the lowest mean of what it has, but one seed diverged: it cannot win.
  TunedVariant t = with_losses({{3.0, 3.2}, {1.0, kNaN}, {2.9, 3.1}, {2.9, 3.1}});
  choose(t, 2);
  EXPECT_EQ(t.chosen, 2u);  // the first of equals
  EXPECT_FALSE(t.all_failed);
  TunedVariant failed = with_losses({{kNaN, kNaN}, {std::numeric_limits<double>::infinity(), 1.0}});
  choose(failed, 2);
  EXPECT_TRUE(failed.all_failed);
  EXPECT_EQ(failed.chosen, 0u);
}

TEST(Tune, ReportMarksTheChoiceShowsSensitivityAndWarnsAtTheGridsEdge) {
  TunedVariant t = with_losses({{3.0}, {2.0}, {2.5}});
  choose(t, 1);
  TunedVariant edge = with_losses({{1.0}, {2.0}, {2.5}});
  edge.name = "edge";
  choose(edge, 1);
  const std::string md = tuning_markdown({t, edge}, TuningCost{6, 1200, 3.5}, 1, "final eval loss");
  EXPECT_NE(md.find("| lr=1 | 2.0000 | **chosen** |"), std::string::npos) << md;
  EXPECT_NE(md.find("- optimizer.lr: 0 → 3.0000; 1 → 2.0000; 2 → 2.5000;"), std::string::npos) << md;
  EXPECT_NE(md.find("Tuning cost: 6 runs, 1200 examples, 3.5 s"), std::string::npos) << md;
  // Only edge's choice (the first value of three) is at the edge of its grid.
  EXPECT_EQ(md.find("chosen optimizer.lr = 1 is at the edge"), std::string::npos) << md;
  EXPECT_NE(md.find("chosen optimizer.lr = 0 is at the edge"), std::string::npos) << md;
}

}  // namespace
}  // namespace laconic
