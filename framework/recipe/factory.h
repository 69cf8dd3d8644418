// Recipe -> objects: models, data, optimizers, schedules and sync strategies through the registry
// (registry.h; the built-ins' factories are in factory.cpp), so the step loop only sees interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "workloads/data/tokenizer.h"
#include "workloads/data/train_data.h"
#include "workloads/models/model.h"
#include "framework/recipe/recipe.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"
#include "optimizers/schedule.h"

namespace laconic {

// Loads what the recipe's [data] names (a built-in or registered dataset). Throws InputError for
// missing or corrupt files.
TrainData load_data(const Recipe& recipe, const LoadOptions& opts = {});

// The Laconic tokenizer a run of `recipe` trained with: for data.name = "text", the one
// load_data builds (from the cache under opts.cache_dir when it is there, else trained again:
// the same corpus and options give the same merges); for "tokens", the tokenizer.txt that
// trainer tokenize wrote beside data.train_path; otherwise none (files of another tokenizer).
std::optional<Tokenizer> run_tokenizer(const Recipe& recipe, const LoadOptions& opts);

// What the recipe names, built by the registry (registry.h): the model for the data, the
// optimizer, and the strategy [sync] asks for (phases and hierarchical composition included).
// `overlap` = reduce gradient buckets while backward runs (the trainer turns it off when
// simulating a network). `device`: where the strategy's state and the buffers it reduces live.
// `lr`: the learning rate of a step (the run's schedule; DeMo folds it into its momentum).
std::unique_ptr<Model> make_model(const Recipe& r, const TrainData& data);
std::unique_ptr<Optimizer> make_optimizer(const Recipe& r);
std::unique_ptr<SyncStrategy> make_sync(const Recipe& r, bool overlap, Device device = Device::cpu,
                                        std::function<double(std::int64_t)> lr = {});

// The learning rate and warmup actually used: optimizer.lr and schedule.warmup_steps scaled
// from schedule.base_batch to the global batch by schedule.scaling_rule.
ScaledLr resolve_lr(const Recipe& r, std::int64_t global_batch);
LrSchedule make_schedule(const Recipe& r, std::int64_t global_batch, std::int64_t steps);

}  // namespace laconic
