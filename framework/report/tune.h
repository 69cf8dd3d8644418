// `trainer compare --tune`: each variant at its best before it is compared. Every configuration
// of a variant's grid trains with the same data, budget and tuning seeds, evaluated on the
// validation half of the held-out data (data.eval_split); the lowest mean validation loss wins;
// the winners then train on fresh seeds and are compared on the test half, which no choice saw.
// The pure half lives here (the grid, the choice, the report's section); compare.cpp trains.
// docs/compare.md "Tuning" has the protocol.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/stats.h"
#include "framework/report/variants.h"

namespace laconic {

// Tuning seeds are run.seed + kTuneSeedOffset + k, the comparison's run.seed + k: never the same.
constexpr std::uint64_t kTuneSeedOffset = 1000;

// One --tune flag: "[VARIANT:]section.key=v1,v2,...". Without VARIANT it applies to every variant.
struct TuneAxis {
  std::string variant;  // "" = every variant
  VaryAxis axis;
};
// Throws InputError (one line naming the flag) as parse_vary does.
TuneAxis parse_tune(const std::string& spec);

// Whether the axis tunes variant v (it names v, or no variant).
bool tunes(const TuneAxis& a, const Variant& v);

// Checks the axes against the variants before anything trains: a VARIANT that names none of them,
// a key tuned twice for one variant, or a key that --vary sets (one cannot tune what is compared).
void check_tune_axes(const std::vector<TuneAxis>& axes, const std::vector<Variant>& variants,
                     const std::vector<VaryAxis>& vary);

// The configurations of variant v: the cartesian product of the axes that apply to it, named as
// make_variants names variants ("0.7", "outer_lr=0.7,lr=0.1"); one configuration without
// assignments when none applies (nothing to tune).
std::vector<Variant> tune_configs(const Variant& v, const std::vector<TuneAxis>& axes);

// One configuration's tuning runs and what they scored on the validation half.
struct TunedConfig {
  Variant config;
  std::vector<std::size_t> runs;  // indices into the tuning runs
  Stat validation;                // the final eval loss (or the loss at --budget) over the tuning seeds
  std::string failure;            // why a run of it stopped (a non-finite gradient); "" when none did
};

struct TunedVariant {
  std::string name;
  std::vector<std::string> keys;   // the keys tuned for it, in flag order
  std::vector<TunedConfig> configs;
  std::size_t chosen = 0;          // index into configs
  bool all_failed = false;         // no configuration had a finite loss on every seed: the first is kept
};

// The configuration with the lowest mean validation loss among those finite on every seed (the
// first of equals); all_failed when there is none.
void choose(TunedVariant& v, int seeds);

// What the tuning cost: runs, examples trained and wall-clock seconds, over every tuning run.
struct TuningCost {
  std::size_t runs = 0;
  double examples = 0, wall_s = 0;
};

// The report's "Tuning" section: the protocol, each variant's grid (validation loss per
// configuration, the chosen one marked), the sensitivity to each key (the best loss at each of
// its values over the other keys') and the cost. `loss_word`: "eval loss" or "loss at budget".
std::string tuning_markdown(const std::vector<TunedVariant>& tuned, const TuningCost& cost, int seeds,
                            const std::string& loss_word);

// tuning.json (scripts/plot draws sensitivity.png from it): per variant, its configurations with
// their assignments, validation mean, std and n, and which was chosen.
std::string tuning_json(const std::vector<TunedVariant>& tuned, const TuningCost& cost, int seeds);

}  // namespace laconic
