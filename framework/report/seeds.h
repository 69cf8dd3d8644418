// The statistics behind honest comparisons (`trainer compare --seeds N --budget ...`): several
// seeds per variant summarised as mean +- standard deviation, a loss read off each run's curve
// at an equal budget (examples, bytes, or simulated time), and the Pareto front of loss against
// cost. Pure functions: framework/report/compare.cpp runs the variants and writes the tables.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/stats.h"  // Stat, stat_of
#include "framework/report/runs.h"

namespace laconic {

// "4.8120 ± 0.0123" (digits after the point), "4.8120" for one value, "—" for none.
std::string format_stat(const Stat& s, int digits);

// Budget (runs.h) from "--budget KIND=VALUE": examples=E, bytes=B ("25MB", "1.5e9", "3GiB"),
// sim_time=T ("90s", "2min").
// Throws InputError (one line naming --budget) for another kind, a bad or non-positive value.
Budget parse_budget(const std::string& spec);
const char* budget_axis(BudgetKind k);  // "examples", "bytes", "simulated seconds"

// The loss (eval or training, as `series`) where the run's curve crosses the budget: linear
// interpolation between the two records around it on the budget's axis. nullopt when the run
// never reaches the budget, has no record of the series before it, or lacks the axis (bytes_inter
// or sim_time_s absent). global_batch converts steps to examples.
std::optional<double> loss_at_budget(const std::vector<MetricPoint>& metrics, LossSeries series, const Budget& budget,
                                     std::int64_t global_batch);

// Examples per step: train.micro_batch x train.grad_accum x distributed.world_size, from the
// run's resolved recipe (0 when it has none).
std::int64_t global_batch_of(const RunResult& r);

// Which points are on the Pareto front of (loss, cost), both lower-is-better: not dominated by
// another point at most as high on both and lower on one. Points with a NaN are never on it.
std::vector<bool> pareto_front(std::span<const double> loss, std::span<const double> cost);

// The runs of one variant over its seeds.
struct SeedGroup {
  std::string name;                  // the variant's
  std::vector<std::size_t> runs;     // indices into the runs, one per seed, in seed order
  Stat eval_loss, final_loss, time_s, bytes_sent, bytes_inter, at_budget;
};

// Groups runs named "<variant>/seed<k>" (compare's --seeds layout) by variant, in first-seen
// order, with their statistics (at_budget only with a budget).
std::vector<SeedGroup> group_by_variant(const std::vector<RunResult>& runs, const Comparison& c,
                                        const std::optional<Budget>& budget);

// A variant against the baseline (the first group), seed k of one paired with seed k of the other
// (they share the initialisation and the data order): the difference of the final loss (the
// comparison's series) and, with a budget, of the loss at the budget, with 95% intervals.
struct PairedRow {
  std::string name;
  Interval loss, at_budget;   // this variant's minus the baseline's
  double baseline_loss = kAbsent;  // the baseline's mean over the pairs' seeds, for relative figures
  std::string verdict;        // paired_verdict(loss)
};
// An ordering is claimed only from kMinSeedsForOrdering pairs up.
constexpr int kMinSeedsForOrdering = 3;
// "lower", "higher", "no difference measured" (the interval contains zero), "too few seeds (2) to
// claim an ordering", or "one seed: no interval".
std::string paired_verdict(const Interval& d);
std::vector<PairedRow> paired_rows(const std::vector<RunResult>& runs, const std::vector<SeedGroup>& groups,
                                   const Comparison& c, const std::optional<Budget>& budget);

// The report's "Across seeds", "Against the baseline", "At equal budget" and "Pareto front"
// sections (markdown).
std::string seeds_markdown(const std::vector<RunResult>& runs, const std::vector<SeedGroup>& groups, const Comparison& c,
                           const std::optional<Budget>& budget);

}  // namespace laconic
