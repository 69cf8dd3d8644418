// The statistics of `trainer compare --seeds/--budget`: mean and sample standard deviation
// against hand-computed values, budget parsing, the loss at a budget by interpolation on a known
// curve, the Pareto front, and grouping seed runs by variant.
#include "framework/report/seeds.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/check.h"

namespace laconic {
namespace {

TEST(Seeds, MeanAndSampleStdByHand) {
  // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum 32, sample variance 32/7.
  const double v[] = {2, 4, 4, 4, 5, 5, 7, 9};
  const Stat s = stat_of(v);
  EXPECT_EQ(s.n, 8);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(32.0 / 7.0));
  const double with_nan[] = {1.0, kAbsent, 3.0};
  const Stat t = stat_of(with_nan);
  EXPECT_EQ(t.n, 2);
  EXPECT_DOUBLE_EQ(t.mean, 2.0);
  EXPECT_DOUBLE_EQ(t.std, std::sqrt(2.0));
  EXPECT_EQ(format_stat(t, 3), "2.000 ± 1.414");
  const double one[] = {4.25};
  EXPECT_EQ(format_stat(stat_of(one), 2), "4.25");
  EXPECT_EQ(format_stat(Stat{}, 2), "—");
}

TEST(Seeds, ParseBudget) {
  EXPECT_EQ(parse_budget("examples=1e5").kind, BudgetKind::examples);
  EXPECT_DOUBLE_EQ(parse_budget("examples=1e5").value, 1e5);
  EXPECT_DOUBLE_EQ(parse_budget("bytes=25MB").value, 25e6);
  EXPECT_DOUBLE_EQ(parse_budget("bytes=2GiB").value, 2.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_budget("sim_time=2min").value, 120.0);
  for (const char* bad : {"examples", "steps=10", "examples=-3", "examples=abc", "bytes=12 furlongs", "sim_time=0s"}) {
    try {
      parse_budget(bad);
      ADD_FAILURE() << bad;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("--budget ") + bad + ":", 0), 0u) << e.what();
    }
  }
}

std::vector<MetricPoint> curve() {
  // loss 4, 3, 2 at steps 10, 20, 30; bytes 100 per step; simulated 0.5 s per step; eval at 20, 30.
  std::vector<MetricPoint> m;
  for (int k = 1; k <= 3; ++k) {
    MetricPoint p;
    p.step = 10 * k;
    p.loss = 5.0 - k;
    p.bytes_sent = 1000 * k;
    p.sim_time_s = 5.0 * k;
    if (k >= 2) p.eval_loss = 6.0 - k;
    m.push_back(p);
  }
  return m;
}

TEST(Seeds, LossAtBudgetInterpolatesOnTheCurve) {
  const auto m = curve();
  // Global batch 8: step 15 = 120 examples, halfway between the first two records.
  EXPECT_DOUBLE_EQ(*loss_at_budget(m, LossSeries::train, parse_budget("examples=120"), 8), 3.5);
  EXPECT_DOUBLE_EQ(*loss_at_budget(m, LossSeries::train, parse_budget("bytes=2500"), 8), 2.5);
  EXPECT_DOUBLE_EQ(*loss_at_budget(m, LossSeries::train, parse_budget("sim_time=10s"), 8), 3.0);
  // Eval: records at steps 20 (10 s, loss 4) and 30 (15 s, loss 3); 11.25 s is a quarter of the way.
  EXPECT_DOUBLE_EQ(*loss_at_budget(m, LossSeries::eval, parse_budget("sim_time=11.25s"), 8), 3.75);
  // Before the first record of the series, or beyond the last: no value.
  EXPECT_FALSE(loss_at_budget(m, LossSeries::eval, parse_budget("sim_time=6s"), 8));
  EXPECT_FALSE(loss_at_budget(m, LossSeries::train, parse_budget("examples=1000"), 8));
  // Exactly at the first record counts.
  EXPECT_DOUBLE_EQ(*loss_at_budget(m, LossSeries::train, parse_budget("examples=80"), 8), 4.0);
}

TEST(Seeds, ParetoFront) {
  const double loss[] = {3.0, 2.0, 2.5, 1.0, kAbsent, 1.0};
  const double cost[] = {1.0, 2.0, 3.0, 9.0, 0.5, 9.0};
  // (1,3) front; (2,2) front; (3,2.5) dominated by (2,2); (9,1) front (a tie with its twin is no
  // domination); NaN never.
  const std::vector<bool> on = pareto_front(loss, cost);
  EXPECT_EQ(on, (std::vector<bool>{true, true, false, true, false, true}));
}

TEST(Seeds, GroupsSeedRunsByVariant) {
  std::vector<RunResult> runs(4);
  const char* names[] = {"allreduce/seed0", "allreduce/seed1", "topk/seed0", "topk/seed1"};
  const double losses[] = {2.0, 4.0, 3.0, 3.0};
  Comparison c;
  c.series = LossSeries::eval;
  for (int i = 0; i < 4; ++i) {
    runs[i].name = names[i];
    runs[i].eval_loss = losses[i];
    runs[i].bytes_sent = 100.0 * (i + 1);
    CompareRow row;
    row.time_s = 10.0 + i;
    c.rows.push_back(row);
  }
  const auto groups = group_by_variant(runs, c, std::nullopt);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "allreduce");
  EXPECT_EQ(groups[0].runs, (std::vector<std::size_t>{0, 1}));
  EXPECT_DOUBLE_EQ(groups[0].eval_loss.mean, 3.0);
  EXPECT_DOUBLE_EQ(groups[0].eval_loss.std, std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(groups[1].time_s.mean, 12.5);
  EXPECT_DOUBLE_EQ(groups[1].eval_loss.std, 0.0);
  const std::string md = seeds_markdown(runs, groups, c, std::nullopt);
  EXPECT_NE(md.find("| allreduce | 2 | 3.0000 ± 1.4142 |"), std::string::npos) << md;
  // Pairs (2, 3) and (4, 3): differences +1 and -1, an interval around zero.
  EXPECT_NE(md.find("| topk | 2 | +0.0000 | [-12.7062, +12.7062] |"), std::string::npos) << md;
  EXPECT_NE(md.find("no difference measured"), std::string::npos) << md;
}

// Three variants of three seeds: one always 0.1 above the baseline (a shift the seeds share
// cancels in the pairs), one that is not distinguishable from it, and one below on two seeds only.
TEST(Seeds, PairedRowsGiveTheIntervalAndAnOrderingOnlyFromThreeSeeds) {
  const std::vector<std::pair<std::string, std::vector<double>>> variants = {
      {"base", {3.0, 3.5, 2.8}}, {"worse", {3.1, 3.6, 2.9}}, {"same", {3.1, 3.4, 2.8}}, {"two", {2.9, 3.4}}};
  std::vector<RunResult> runs;
  Comparison c;
  c.series = LossSeries::eval;
  for (const auto& [name, losses] : variants)
    for (std::size_t k = 0; k < losses.size(); ++k) {
      RunResult r;
      r.name = name + "/seed" + std::to_string(k);
      r.eval_loss = losses[k];
      runs.push_back(r);
      c.rows.emplace_back();
    }
  const auto groups = group_by_variant(runs, c, std::nullopt);
  const std::vector<PairedRow> rows = paired_rows(runs, groups, c, std::nullopt);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "worse");
  EXPECT_EQ(rows[0].loss.n, 3);
  EXPECT_NEAR(rows[0].loss.mean, 0.1, 1e-12);
  EXPECT_NEAR(rows[0].loss.hi - rows[0].loss.lo, 0.0, 1e-9);  // every pair differs by exactly 0.1
  EXPECT_EQ(rows[0].verdict, "higher");
  EXPECT_NEAR(rows[0].baseline_loss, 3.1, 1e-12);
  EXPECT_EQ(rows[1].verdict, "no difference measured");
  // Differences -0.1 and -0.1 over two pairs: the interval excludes zero, but two seeds claim nothing.
  EXPECT_EQ(rows[2].loss.n, 2);
  EXPECT_EQ(rows[2].verdict, "too few seeds (2) to claim an ordering");
  EXPECT_NEAR(rows[2].baseline_loss, 3.25, 1e-12);  // the baseline's first two seeds
}

}  // namespace
}  // namespace laconic
