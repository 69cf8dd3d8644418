// The registry's traits (framework/recipe/components.h): what the rest of Laconic asks a strategy
// or reducer instead of comparing its name, for the built-ins and for a component registered
// from outside.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "framework/recipe/registry.h"
#include "framework/sync/periodic.h"
#include "tests/support/input_error.h"

namespace laconic {
namespace {

// A recipe of `text` after two lines of [train] (so line numbers in messages are text's + 2).
Recipe parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_recipe("[train]\nsteps = 1\n" + text, "t.toml", overrides);
}

TEST(Registry, ThePeriodicBuiltinsSayTheirPeriodAndWarmupFromTheRecipe) {
  std::vector<std::string> periodic;
  for (const std::string& n : component_names(Component::strategy))
    if (strategy_traits(n).periodic) periodic.push_back(n);
  EXPECT_EQ(periodic, (std::vector<std::string>{"local_sgd", "diloco", "streaming_diloco", "sparseloco"}));
  EXPECT_EQ(periodic_strategy_names(), "local_sgd, diloco, streaming_diloco or sparseloco");
  const Recipe r = parse("", {"sync.diloco.period=7", "sync.diloco.warmup_steps=3", "sync.local_sgd.period=9",
                              "sync.streaming_diloco.period=11", "sync.sparseloco.period=13"});
  EXPECT_EQ(strategy_traits("diloco").periodic(r).period, 7);
  EXPECT_EQ(strategy_traits("diloco").periodic(r).warmup_steps, 3);
  EXPECT_EQ(strategy_traits("local_sgd").periodic(r).period, 9);
  EXPECT_EQ(strategy_traits("streaming_diloco").periodic(r).period, 11);
  EXPECT_EQ(strategy_traits("sparseloco").periodic(r).period, 13);
  EXPECT_EQ(strategy_traits("diloco").periodic(r).longest, 7);  // no schedule: the period
  // A schedule's longest segment bounds the steps between syncs (elastic training checks claims).
  const Recipe s = parse("[sync.diloco]\nperiod = 5\nperiod_schedule = [{steps = 40, period = 20}, {period = 10}]\n"
                         "[sync.sparseloco]\nperiod = 5\nperiod_schedule = [{steps = 6, period = 3}, {period = 2}]\n", {});
  EXPECT_EQ(strategy_traits("diloco").periodic(s).longest, 20);
  EXPECT_EQ(strategy_traits("sparseloco").periodic(s).longest, 5);
}

TEST(Registry, GradientStrategiesTakeTheirReducersTraits) {
  for (const char* n : {"allreduce", "topk", "powersgd", "onebit"}) {
    const StrategyTraits& t = strategy_traits(n);
    EXPECT_TRUE(t.momentum) << n;
    EXPECT_TRUE(t.cuda) << n;
    EXPECT_FALSE(t.periodic) << n;
    EXPECT_EQ(t.reducer(parse("")), n);
    EXPECT_EQ(t.exact_average, std::string(n) == "allreduce") << n;
  }
  EXPECT_FALSE(strategy_traits("demo").cuda);
  EXPECT_FALSE(strategy_traits("sparseloco").cuda);
}

TEST(Registry, HostOnlyUsesAreNamedFromTheTraits) {
  EXPECT_EQ(host_only_use(parse("[sync]\nstrategy = \"diloco\"\n")), "");
  EXPECT_EQ(host_only_use(parse("[sync]\nstrategy = \"diloco\"\n[sync.diloco]\ndtype = \"int8\"\n")),
            "sync.diloco.dtype other than fp32");
  EXPECT_EQ(host_only_use(parse("[sync]\nstrategy = \"diloco\"\n[sync.diloco]\nreducer = \"topk\"\n[sync.topk]\n"
                                "selection = \"sampled\"\n")),
            "sync.topk.selection = \"sampled\"");
  EXPECT_EQ(host_only_use(parse("[optimizer]\nmomentum = 0.0\n[sync]\nstrategy = \"demo\"\n")), "demo");
  EXPECT_EQ(host_only_use(parse("[sync]\nphases = [{strategy = \"allreduce\", steps = 5}, {strategy = \"sparseloco\"}]\n")),
            "sparseloco");
  // At parse time, one line naming the key.
  EXPECT_EQ(testing::input_error([] { parse("[distributed]\ndevice = \"cuda\"\n[sync]\nstrategy = \"sparseloco\"\n"); }),
            "t.toml:6:1: distributed.device: expected \"cpu\" with sparseloco (it runs on host buffers), got \"cuda\"");
}

// A strategy and a reducer registered the way a downstream project registers them.
struct EveryOptions {
  std::int64_t period = 6;
  bool operator==(const EveryOptions&) const = default;
};

TEST(Registry, AComponentRegisteredFromOutsideIsAskedLikeABuiltin) {
  StrategyTraits t;
  t.periodic = [](const Recipe& r) { return OuterPeriod{r.section<EveryOptions>("sync.every_test").period, 0, 0, {}}; };
  t.reducer = [](const Recipe&) { return std::string("half_test"); };
  registry().add_strategy(
      "every_test",
      [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
        return std::make_unique<PeriodicAveraging>(local_sgd_options(r.section<EveryOptions>("sync.every_test").period),
                                                   registry().make_reducer("allreduce", r, c.device));
      },
      Section<EveryOptions>().add<&EveryOptions::period>("period", at_least(1)), std::move(t));
  registry().add_reducer("half_test", [](const Recipe& r, Device d) { return registry().make_reducer("allreduce", r, d); });

  EXPECT_EQ(periodic_strategy_names(), "local_sgd, diloco, streaming_diloco, sparseloco or every_test");
  const Recipe r = parse("[sync]\nstrategy = \"every_test\"\n[sync.every_test]\nperiod = 4\n");
  EXPECT_EQ(strategy_traits("every_test").periodic(r).period, 4);
  // Its reducer, named by its traits, is used: its gradient strategy is host only (no traits).
  EXPECT_TRUE(uses_component(r, Component::reducer, "half_test"));
  EXPECT_FALSE(uses_component(r, Component::reducer, "allreduce"));
  EXPECT_EQ(host_only_use(r), "every_test");
  EXPECT_FALSE(strategy_traits("half_test").cuda);
  EXPECT_TRUE(strategy_traits("half_test").momentum);
  // sync.momentum does not apply to a periodic strategy, registered or not.
  EXPECT_EQ(testing::input_error([] { parse("[sync]\nstrategy = \"every_test\"\nmomentum = 0.9\n"); }),
            "t.toml:4:1: sync.momentum: expected 0 with local_sgd, diloco, streaming_diloco, sparseloco or every_test "
            "(momentum correction applies to gradient strategies; give the inner optimizer its momentum), got 0.9");
}

}  // namespace
}  // namespace laconic
