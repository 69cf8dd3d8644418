// Recipe -> objects: models, data, optimizers and sync strategies through the registry (registry.h;
// the built-ins' factories are in factory.cpp, their data loaders in loaders.cpp), and the
// learning-rate schedule (schedule.h), so the step loop only sees interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "workloads/data/train_data.h"
#include "workloads/models/model.h"
#include "framework/recipe/loaders.h"   // run_tokenizer, for the files that include this one
#include "framework/recipe/recipe.h"
#include "framework/recipe/schedule.h"  // resolve_lr, make_schedule, likewise
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"

namespace laconic {

// Loads what the recipe's [data] names (a built-in or registered dataset). Throws InputError for
// missing or corrupt files.
TrainData load_data(const Recipe& recipe, const LoadOptions& opts = {});

// What the recipe names, built by the registry (registry.h): the model for the data, the
// optimizer, and the strategy [sync] asks for (phases and hierarchical composition included).
// `overlap` = reduce gradient buckets while backward runs (the trainer turns it off when
// simulating a network). `device`: where the strategy's state and the buffers it reduces live.
// `lr`: the learning rate of a step (the run's schedule; DeMo folds it into its momentum).
std::unique_ptr<Model> make_model(const Recipe& r, const TrainData& data);
std::unique_ptr<Optimizer> make_optimizer(const Recipe& r);
std::unique_ptr<SyncStrategy> make_sync(const Recipe& r, bool overlap, Device device = Device::cpu,
                                        std::function<double(std::int64_t)> lr = {});

}  // namespace laconic
