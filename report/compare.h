// `trainer compare`: variants of a recipe run side by side (same seeds, same data order), or
// finished run directories, summarised in one report. The pieces here are pure (no training):
// parse --vary specs into variants, read run directories, compute the report's rows, write
// report.md and the manifest scripts/plot reads. framework/cli/trainer.cpp runs the variants.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "framework/train/metrics.h"

namespace laconic {

// ---- variants --------------------------------------------------------------------------------

// One --vary flag: "section.key=v1,v2,...". Values are split on commas outside [] and quotes, so
// "model.hidden=[256,128],[64]" is two values.
struct VaryAxis {
  std::string key;                  // "sync.strategy"
  std::vector<std::string> values;  // {"allreduce", "topk"}
};

// Throws InputError (one line, naming the flag) for a missing '=', a key that is not
// "section.key", an empty value list or an empty value. Whether the key exists in the recipe
// schema is checked by load_recipe when the variants are resolved.
VaryAxis parse_vary(const std::string& spec);

struct Variant {
  std::string name;                     // also its run directory name under --out
  std::vector<std::string> assignments;  // "sync.strategy=topk": recipe overrides, in axis order
};

// The cartesian product of the axes, first axis outermost (the first variant is the baseline).
// Names: with one axis the value ("topk"); with several "key=value" pairs joined by ','
// ("strategy=topk,ratio=0.01"), key = its last component unless two axes share it. Characters
// other than [A-Za-z0-9_.+-] become '-', and duplicate names get "-2", "-3" appended. Throws
// InputError when two axes vary the same key.
std::vector<Variant> make_variants(const std::vector<VaryAxis>& axes);

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
  std::string recipe_value(const std::string& key) const;  // "" when unknown
};

// Reads DIR/summary.json and DIR/metrics.jsonl (both required: InputError naming the directory
// and the missing or malformed file) and DIR/recipe.resolved.toml (optional). The one way both
// modes of `trainer compare` get a run: variants trained in this process are read back too.
RunResult read_run(const std::string& dir, const std::string& name);

// ---- the comparison --------------------------------------------------------------------------

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

// The first run is the baseline. target: --target-loss, or nullopt for the default.
Comparison compare_runs(const std::vector<RunResult>& runs, std::optional<double> target);

// The steps a run averaged densely before its strategy's own scheme began, and the recipe key
// that says so ("sync.powersgd.start_iter"); nullopt when the resolved recipe names none (or 0).
struct DenseWarmup {
  std::string key;
  std::int64_t steps = 0;
};
std::optional<DenseWarmup> dense_warmup(const RunResult& run);

// What the report says about how it was made.
struct ReportContext {
  std::string command;                // the trainer command line, shell-quoted
  std::string recipe;                 // recipe path ("" for --runs)
  std::vector<std::string> overrides;  // shared --section.key=value overrides
  std::vector<VaryAxis> axes;         // empty for --runs
  std::vector<std::string> plots;     // PNG file names written next to report.md
  std::string plot_note;              // why there are no plots ("" when there are)
};

std::string report_markdown(const Comparison& c, const std::vector<RunResult>& runs, const ReportContext& ctx);

// compare.json: the runs (name, directory), clock, loss series, target and the rows, for
// scripts/plot and for tools that read results without parsing markdown.
std::string compare_json(const Comparison& c, const std::vector<RunResult>& runs);

// ---- the subcommand ----------------------------------------------------------------------------

// --budget KIND=VALUE (report/seeds.h parses it): examples=E (every rank's examples, step x
// global batch), bytes=B (bytes crossing the inter tier per rank when the run simulates a
// network, else bytes sent per rank), sim_time=T (simulated seconds).
enum class BudgetKind { examples, bytes, sim_time };
struct Budget {
  BudgetKind kind = BudgetKind::examples;
  double value = 0;
  std::string text;  // as given, for the report
};

struct CompareOptions {
  std::string out_dir;               // report.md, compare.json, the PNGs, and (variants) one run each
  std::optional<double> target;      // --target-loss
  std::string plot_script;           // scripts/plot; "" = no plots (plot_note says why)
  std::string plot_note;
  std::string command;               // for the report
  std::ostream* log = nullptr;       // progress and the variants' log lines (prefixed "[name] ")
  bool progress_line = false;        // the trainer's live progress line (a terminal)
  // --networks: every run's trace replayed on each of these [network] files (sim/replay.h): one
  // report per network in out_dir/<file stem>/, and networks.md, the runs x networks table.
  std::vector<std::string> networks;
  // --seeds N: every variant trained with run.seed = the recipe's seed + 0..N-1 (so initialisation
  // and data order change per seed and match across variants), into out_dir/<variant>/seed<k>;
  // the report adds mean +- std per variant (report/seeds.h). 1: one run per variant, as before.
  int seeds = 1;
  std::optional<Budget> budget;  // --budget: the loss of every run at this equal budget
  // --as-params N: every run's trace replayed (on its own [network], and on each of --networks)
  // with message bytes and compute gaps x N / the run's parameters (sim/replay.h's projection):
  // time and bytes for a model of N parameters, losses as measured. 0: no projection.
  std::int64_t as_params = 0;
};

// trainer compare --recipe R --vary ...: resolves and validates every variant (recipe, backend,
// data, plan) before anything is written, then trains them one after another in this process
// (threads backend; data loaded once per distinct [data] table) into out_dir/<variant name>, and
// writes the report. Refuses to run under an MPI launcher. Throws InputError for bad input.
void compare_variants(const std::string& recipe_path, const std::vector<std::string>& overrides,
                      const std::vector<std::string>& vary_specs, const CompareOptions& opts);

// The runs x networks table of --networks (markdown): per network, each run's simulated time and
// time to the target, from the per-network comparisons.
std::string networks_markdown(const std::vector<std::string>& network_names, const std::vector<Comparison>& per_network,
                              const std::vector<RunResult>& runs);

// trainer compare --runs D1 D2 ...: the same report from finished run directories (the first is
// the baseline; names are the directories' last components).
void compare_run_dirs(const std::vector<std::string>& dirs, const CompareOptions& opts);

}  // namespace laconic
