// The registry: every model, dataset, optimizer, reducer and sync strategy a recipe can name, by
// name, with the factory that builds it, the section of recipe keys it declares and, for
// strategies and reducers, its traits (components.h: periodic or not and its period, devices,
// host-only cases, what it cannot go with), which the rest of Laconic asks instead of comparing
// names. Laconic's own register here the same way a user's do, one registration each
// (factory.cpp); recipes are parsed against the names and sections (components.h).
//
//   struct MyCnnOptions { int channels = 16; bool operator==(const MyCnnOptions&) const = default; };
//   laconic::registry().add_model("my_cnn",
//       [](const laconic::Recipe& r, const laconic::TrainData& data) {
//         return std::make_unique<MyCnn>(r.section<MyCnnOptions>("model.my_cnn"), data.features, data.classes);
//       },
//       laconic::Section<MyCnnOptions>().add<&MyCnnOptions::channels>("channels", laconic::at_least(1)));
//   return laconic::train_main(argc, argv);   // [model] name = "my_cnn", [model.my_cnn] channels = 32
//
// Register at the start of main(), before any recipe is parsed or any training runs; lookups are
// then safe from every rank's thread. A name must be new ([a-z0-9_]+); its section is
// [model.NAME], [data.NAME], [optimizer.NAME] or [sync.NAME]. A reducer is also a gradient
// strategy of its name (data parallel through it, with sync.bucket_mb, sync.overlap and
// sync.momentum) and may be a periodic strategy's reducer (sync.diloco.reducer = "NAME"). A
// strategy registered with StrategyTraits::periodic runs as elastic replicas and under `trainer
// simulate --failures` like DiLoCo; traits.cuda declares a device implementation (default: host
// only, refused with device = "cuda").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "compression/reducer.h"
#include "core/device.h"
#include "workloads/models/model.h"
#include "workloads/data/train_data.h"
#include "framework/recipe/components.h"
#include "framework/recipe/recipe.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"

namespace laconic {

// What a strategy is built for besides the recipe.
struct StrategyContext {
  bool overlap = true;           // reduce gradient buckets while backward runs
  std::int64_t first_step = 0;   // where this strategy's phase begins (periodic strategies count from it)
  Device device = Device::cpu;   // where the model's parameters and gradients live
  // The learning rate the optimizer applies at a step (the run's schedule): DeMo folds it into
  // its momentum.
  std::function<double(std::int64_t)> lr;
};

class Registry {
 public:
  using ModelFactory = std::function<std::unique_ptr<Model>(const Recipe&, const TrainData&)>;
  using DataFactory = std::function<TrainData(const Recipe&, const LoadOptions&)>;
  using OptimizerFactory = std::function<std::unique_ptr<Optimizer>(const Recipe&)>;
  using ReducerFactory = std::function<std::unique_ptr<Reducer>(const Recipe&, Device)>;
  using StrategyFactory = std::function<std::unique_ptr<SyncStrategy>(const Recipe&, const StrategyContext&)>;

  Registry& add_model(const std::string& name, ModelFactory make, SectionSchema section = {});
  Registry& add_dataset(const std::string& name, DataFactory load, SectionSchema section = {});
  Registry& add_optimizer(const std::string& name, OptimizerFactory make, SectionSchema section = {});
  Registry& add_reducer(const std::string& name, ReducerFactory make, SectionSchema section = {},
                        ReducerTraits traits = {});
  Registry& add_strategy(const std::string& name, StrategyFactory make, SectionSchema section = {},
                         StrategyTraits traits = {});

  bool has(Component c, std::string_view name) const;
  const std::vector<std::string>& names(Component c) const { return names_[static_cast<int>(c)]; }
  const StrategyTraits& strategy_traits(std::string_view name) const;
  const ReducerTraits& reducer_traits(std::string_view name) const;

  std::unique_ptr<Model> make_model(const Recipe& r, const TrainData& data) const;
  TrainData load_data(const Recipe& r, const LoadOptions& opts) const;
  std::unique_ptr<Optimizer> make_optimizer(const Recipe& r) const;
  std::unique_ptr<Reducer> make_reducer(std::string_view name, const Recipe& r, Device device) const;
  std::unique_ptr<SyncStrategy> make_strategy(std::string_view name, const Recipe& r, const StrategyContext& c) const;

 private:
  Registry();  // the built-ins (factory.cpp)
  friend Registry& registry();
  // A new name (checked: [a-z0-9_]+, not taken) and its section.
  void add_name(Component c, const std::string& name, SectionSchema section);
  // Reducer `name`'s gradient strategy: data parallel through it.
  void add_gradient_strategy(const std::string& name, const ReducerTraits& traits);
  template <typename F>
  using Table = std::map<std::string, F, std::less<>>;
  Table<ModelFactory> models_;
  Table<DataFactory> data_;
  Table<OptimizerFactory> optimizers_;
  Table<ReducerFactory> reducers_;
  Table<StrategyFactory> strategies_;
  Table<StrategyTraits> strategy_traits_;
  Table<ReducerTraits> reducer_traits_;
  std::vector<std::string> names_[std::size(kComponentNames)];  // in registration order
};

// The process's registry, the built-ins registered on first use.
Registry& registry();

}  // namespace laconic
