// `trainer compare`: variants of a recipe run side by side (same seeds, same data order), or
// finished run directories, summarised in one report. Variants from --vary specs, the comparison
// of runs read back (runs.h) into rows and a verdict, report.md and compare.json (which
// scripts/plot reads), and the subcommand itself: compare_variants trains the variants in this
// process, compare_run_dirs reads finished ones; framework/cli/train_main.cpp calls them.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "framework/report/runs.h"
#include "framework/report/variants.h"

namespace laconic {

// ---- the comparison --------------------------------------------------------------------------

// The first run is the baseline. target: --target-loss, or nullopt for the default.
Comparison compare_runs(const std::vector<RunResult>& runs, std::optional<double> target);

// What the report says about how it was made.
struct ReportContext {
  std::string command;                // the trainer command line, shell-quoted
  std::string recipe;                 // recipe path ("" for --runs)
  std::vector<std::string> overrides;  // shared --section.key=value overrides
  std::vector<VaryAxis> axes;         // empty for --runs
  std::vector<std::string> plots;     // PNG file names written next to report.md
  std::string plot_note;              // why there are no plots ("" when there are)
  std::string appendix;               // markdown after the rest (--tune: the tuning section)
};

std::string report_markdown(const Comparison& c, const std::vector<RunResult>& runs, const ReportContext& ctx);

// compare.json: the runs (name, directory), clock, loss series, target and the rows, for
// scripts/plot and for tools that read results without parsing markdown.
std::string compare_json(const Comparison& c, const std::vector<RunResult>& runs);

// ---- the subcommand ----------------------------------------------------------------------------

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
  // the report adds mean +- std per variant (framework/report/seeds.h). 1: one run per variant, as before.
  int seeds = 1;
  std::optional<Budget> budget;  // --budget: the loss of every run at this equal budget
  // --as-params N: every run's trace replayed (on its own [network], and on each of --networks)
  // with message bytes and compute gaps x N / the run's parameters (sim/replay.h's projection):
  // time and bytes for a model of N parameters, losses as measured. 0: no projection.
  std::int64_t as_params = 0;
  // --tune [VARIANT:]KEY=v1,v2 (tune.h): each variant's grid trained on tune_seeds seeds and scored
  // on the validation half before the comparison, which then runs each variant's best on the test
  // half. Runs already finished in out_dir with the same recipe are reused, so a stopped sweep resumes.
  std::vector<std::string> tune;
  int tune_seeds = 1;
  // --warm-start N: first the recipe as data parallel (sync.strategy = allreduce) for N steps into
  // out_dir/warm_start, exported to out_dir/warm_start/model.safetensors; every run of the
  // comparison (tuning runs too) then starts from those weights (model.init_from), DiLoCo's
  // protocol. 0: from scratch.
  std::int64_t warm_start = 0;
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
