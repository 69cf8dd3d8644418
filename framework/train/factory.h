// Recipe -> objects: models, data, optimizers, schedules and sync strategies through the registry
// (registry.h; the built-ins' factories are in factory.cpp), so the step loop only sees interfaces.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "framework/data/lm.h"
#include "framework/data/tokenizer.h"
#include "framework/data/source.h"
#include "framework/models/model.h"
#include "framework/recipe/recipe.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"
#include "optimizers/schedule.h"

namespace laconic {

// Datasets are loaded once per process and shared read-only by its ranks.
struct TrainData {
  std::shared_ptr<const DataSource> train;
  std::shared_ptr<const DataSource> eval;  // null: no evaluation
  int features = 0, classes = 0;           // image data: what the MLP is built for
  int vocab = 0, seq_len = 0;              // token data: what BERT is built for
  double baseline_loss = std::numeric_limits<double>::quiet_NaN();  // text: unigram entropy (nats)
  std::string describe;
};

// Image data from datasets in memory (tests, synthetic data).
TrainData image_data(std::shared_ptr<const ImageDataset> train, std::shared_ptr<const ImageDataset> test);
// Next-token data (the GPT's) from streams in memory: windows of seq_len, the unigram baseline
// of the eval stream (of train when eval has no window, and then no evaluation).
TrainData token_data(TokenStream train, TokenStream eval, int seq_len);

struct LoadOptions {
  std::string cache_dir;     // where the trained tokenizer is cached ("" = do not cache)
  bool write_cache = true;   // false on all but one process of an MPI job
  std::string* note = nullptr;  // receives what loading did (e.g. "tokenizer loaded from ...")
};

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
