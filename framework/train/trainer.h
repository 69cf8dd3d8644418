// The step loop: world_size ranks (threads of this process on the threads backend), each with
// its own model replica, data shard, optimizer and sync strategy, driven by one Recipe.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/params.h"
#include "framework/recipe/recipe.h"
#include "framework/train/banner.h"  // done_line
#include "framework/train/hooks.h"
#include "framework/train/metrics.h"
#include "framework/train/options.h"
#include "framework/train/run_spec.h"
#include "framework/train/summary.h"

namespace laconic {

TrainSummary train(const Recipe& recipe, const TrainData& data, const TrainOptions& opts);
// The same with the data the recipe's [data] names (load_data, the tokenizer cached beside the
// runs in run.out_dir): a user's program trains from a recipe in one call.
TrainSummary train(const Recipe& recipe, const TrainOptions& opts = {});

}  // namespace laconic
