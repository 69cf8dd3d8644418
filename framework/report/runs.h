// What `trainer compare` reads and computes per run: a finished run directory read back
// (RunResult), the time it first reached a target loss, the report's rows, verdict and budget
// types. The comparison (compare.h) and the seeds' statistics (seeds.h) both build on these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/train/metrics.h"

namespace laconic {

// ---- run directories -------------------------------------------------------------------------

// One line of metrics.jsonl, as the trainer writes it (framework/train/metrics.h).
using MetricPoint = MetricsRecord;

// summary.json, plus what recipe.resolved.toml says (when it is there and readable).
struct RunResult {
  std::string name;  // report row / legend label
  std::string dir;
  std::int64_t steps = 0;
  double final_loss = kAbsent, eval_loss = kAbsent, eval_accuracy = kAbsent;
  double bytes_sent = 0, bytes_inter = kAbsent;  // bytes_inter: from the last metrics record
  double compression_ratio = kAbsent, wall_s = kAbsent, sim_time_s = kAbsent;
  double peak_inter_bytes_per_s = kAbsent;  // summary.json's (or the replay's on another network)
  double bytes_inter_start = kAbsent;       // summary.json's: inter-tier bytes of the start
  // --as-params: message bytes and compute of the replay x this (N / the run's parameters; 1: as
  // measured). Times, bytes_sent, bytes_inter (totals and records) are the projected ones.
  double projection = 1;
  std::vector<MetricPoint> metrics;
  // From recipe.resolved.toml: every key flattened ("sync.topk.ratio" -> "0.01"), empty if absent.
  std::vector<std::pair<std::string, std::string>> recipe;
  // Why the run stopped without a summary (a tuning configuration that diverged: compare --tune
  // records it and goes on); "" for a finished run.
  std::string failed;
  std::string recipe_value(const std::string& key) const;  // "" when unknown
};

// Reads DIR/summary.json and DIR/metrics.jsonl (both required: InputError naming the directory
// and the missing or malformed file) and DIR/recipe.resolved.toml (optional). The one way both
// modes of `trainer compare` get a run: variants trained in this process are read back too.
RunResult read_run(const std::string& dir, const std::string& name);

// ---- the comparison's values ------------------------------------------------------------------

enum class CompareClock { simulated, wall };  // simulated when every run has sim_time_s
enum class LossSeries { eval, train };        // eval when every run has evaluation records

// Where a run first reached the target loss. The crossing is interpolated linearly between the
// last record above the target and the first at or below it (step, time and bytes alike); when
// the very first record is already at or below, it is that record.
struct TargetHit {
  double step = 0, time_s = 0, bytes = 0;
};
std::optional<TargetHit> time_to_target(const std::vector<MetricPoint>& metrics, LossSeries series,
                                        CompareClock clock, double target);

struct CompareRow {
  std::string name;
  double eval_loss = kAbsent, eval_accuracy = kAbsent, final_loss = kAbsent;
  double bytes_sent = 0, bytes_inter = kAbsent, compression_ratio = kAbsent;
  double peak_inter_bytes_per_s = kAbsent;  // metrics.h
  double bytes_inter_training = kAbsent;    // bytes_inter less the start's broadcast
  double time_s = kAbsent;                // total time on the comparison's clock
  std::optional<TargetHit> hit;        // nullopt: target not reached
  double speedup = kAbsent;               // baseline time-to-target / this run's (NaN: either missed)
  double bytes_ratio = kAbsent;           // bytes_sent / the baseline's
};

// The report's answer in one line, over variants (a variant run with several seeds: its means;
// its time to target only when every seed reached the target).
struct Verdict {
  std::string first;                 // reaches the target first on the comparison's clock ("": none does)
  double first_time_s = kAbsent;
  // Sends least across the slow tier: inter-tier bytes per rank with a [network], else bytes sent.
  std::string least;
  double least_bytes = kAbsent;
  double least_loss_cost = kAbsent;  // its final loss less the lowest final loss of any variant
  std::string lowest;                // the variant with the lowest final loss
  double lowest_loss = kAbsent;
  std::string text;                  // one markdown line; "" with fewer than two variants
};

// A variant whose dense warm-up covers at least half its steps: the comparison then measures the
// warm-up more than the strategy. The warm-up is the strategy's own key in the resolved recipe,
// [sync.<strategy>] warmup_steps or start_iter (PowerSGD's name for it), so a registered strategy
// that declares either is covered too; a run with sync.phases is not examined.
constexpr double kWarmupWarnFraction = 0.5;

struct Comparison {
  CompareClock clock = CompareClock::wall;
  LossSeries series = LossSeries::train;
  double target = kAbsent;
  bool default_target = false;  // target = the baseline's final loss x kDefaultTargetSlack
  bool simulated_network = false;  // some run has bytes_inter
  std::vector<CompareRow> rows;    // rows[0] is the baseline
  Verdict verdict;
  std::vector<std::string> warnings;  // one line each: dense warm-ups (kWarmupWarnFraction)
  std::int64_t as_params = 0;         // --as-params: times and bytes projected onto N parameters
};

constexpr double kDefaultTargetSlack = 1.02;

// The steps a run averaged densely before its strategy's own scheme began, and the recipe key
// that says so ("sync.powersgd.start_iter"); nullopt when the resolved recipe names none (or 0).
struct DenseWarmup {
  std::string key;
  std::int64_t steps = 0;
};
std::optional<DenseWarmup> dense_warmup(const RunResult& run);

// --budget KIND=VALUE (seeds.h parses it): examples=E (every rank's examples, step x
// global batch), bytes=B (bytes crossing the inter tier per rank when the run simulates a
// network, else bytes sent per rank), sim_time=T (simulated seconds).
enum class BudgetKind { examples, bytes, sim_time };
struct Budget {
  BudgetKind kind = BudgetKind::examples;
  double value = 0;
  std::string text;  // as given, for the report
};

}  // namespace laconic
