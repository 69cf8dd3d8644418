// What one rank holds for a model of P parameters, predicted before anything is allocated:
// `trainer plan --memory` and the check that a run's state fits the machine. Each figure is the
// one summary.json's memory_* reports after a run (tests/train/memory_plan_test.cpp holds them
// to within 5%).
//
// The optimizer's and the strategy's state are not tabulated here: the recipe's own classes size
// their state for three proxy models (a square s x s weight matrix and its bias, s = 16, 32, 64),
// and the fit a + b s^2 + c s through the three is read at the s whose s^2 + s is P. It is exact
// for every state made of per-parameter buffers, per-tensor scalars and matrices as tall as a
// tensor's side (PowerSGD's P and Q), for a model of square matrices; a model of other shapes
// moves only the last kind.
#pragma once

#include <string>

#include "core/params.h"
#include "framework/recipe/recipe.h"

namespace laconic {

struct MemoryPlan {
  double weights = 0, gradients = 0;  // 4 bytes per parameter each (fp32); ZeRO-2: its staging slots
  double optimizer = 0;               // the optimizer's state (1/N of it under sync.shard)
  double strategy = 0;                // the sync strategy's (outer state, error feedback)
  double buffers = 0;                 // working buffers beside them (a sharded run's shard, a frozen copy)
  double total() const { return weights + gradients + optimizer + strategy + buffers; }
};

// Rank 0 of `world` ranks training a model of `params` parameters with `recipe`'s optimizer,
// strategy and sync.shard. ZeRO-2's staging is its two largest buckets: `layout`'s when given
// (the run's own check), else buckets of sync.bucket_mb; a backward that holds more buckets open
// at once (a tied embedding's, across it) holds more, one that reduces each before it writes the
// next (in line) less (docs/sharding.md).
MemoryPlan plan_memory(const Recipe& recipe, double params, int world, const ParamStore* layout = nullptr);

// "" when `ranks` ranks of `plan` in one process fit in `physical` bytes; else why not, in one
// line naming the keys that set it and what would help.
std::string memory_refusal(const Recipe& recipe, const MemoryPlan& plan, int ranks, double physical);

}  // namespace laconic
