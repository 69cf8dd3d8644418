// The names a recipe may give its model, data, optimizer, reducers and sync strategy: Laconic's
// built-ins, and the components user code registers (framework/recipe/registry.h) before it
// parses recipes. A component may declare a section of its own keys ([model.NAME], [data.NAME],
// [optimizer.NAME], [sync.NAME]), parsed, checked and printed like the built-in sections.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "framework/recipe/schema.h"

namespace laconic {

// model.name, data.name, optimizer.name, the reducers of sync.local_sgd.reducer and
// sync.diloco.reducer (and every gradient strategy: a reducer's name is also a sync.strategy,
// data parallel through it), sync.strategy and sync.phases' strategies.
enum class Component { model, data, optimizer, reducer, strategy };
inline constexpr std::array kComponentNames{"model", "data", "optimizer", "reducer", "strategy"};
constexpr std::span<const char* const> names(Component) { return kComponentNames; }

// Where a component's own section lives: "model.NAME", "data.NAME", "optimizer.NAME", "sync.NAME".
std::string component_section(Component c, std::string_view name);

// ---- what the rest of Laconic asks a component instead of comparing its name ----------------

struct Recipe;

// A periodic strategy's outer loop at a recipe: every `period` steps after `warmup_steps` steps of
// synchronous warm-up; `longest`: the most steps between two syncs when a period schedule varies
// them (0: `period`; elastic training drops a replica claiming more).
struct OuterPeriod {
  std::int64_t period = 0;
  std::int64_t warmup_steps = 0;
  std::int64_t longest = 0;
  // Why its replicas cannot run as elastic replicas, whose quorum shares one anchor ("" they can):
  // "sync.diloco.eager = true: ..." (eager replicas keep anchors of their own).
  std::string not_elastic;
};

// A recipe value that cannot go with another: the keys to point at (the latest one set is named
// with its file and line) and what was expected, "sync.momentum: expected 0 with ...".
struct RecipeConflict {
  std::vector<std::string> keys;
  std::string message;
};

struct StrategyTraits {
  // Periodic strategies (only their outer syncs cross replicas): the period and warm-up this
  // recipe gives them. Null for a strategy that communicates every step. A periodic strategy runs
  // as `trainer elastic` replicas and under `trainer simulate --failures`.
  std::function<OuterPeriod(const Recipe&)> periodic;
  // The reducer it averages through at this recipe ("" none): a gradient strategy's own, a periodic
  // strategy's pseudo-gradient reducer. A used reducer's section is printed and hashed.
  std::function<std::string(const Recipe&)> reducer;
  // sync.momentum (momentum correction of the averaged gradients) applies to it.
  bool momentum = false;
  // It averages gradients exactly every step (gradient noise scale estimation needs that).
  bool exact_average = false;
  // It runs with device = "cuda" (on device buffers) ...
  bool cuda = false;
  // ... except with this recipe: what keeps it on the host ("sync.diloco.dtype other than fp32"), "" none.
  std::function<std::string(const Recipe&)> host_only;
  // Its replicas skip steps (SyncStrategy::computes; asynchronous replicas of different speeds):
  // only a driver that asks, the trainer's, runs it.
  bool idles = false;
  // Its outer state can be sharded across a group's ranks (sync.shard inside sync.intra's groups:
  // local SGD's family, framework/sync/composite.h) ... except with this recipe: why not
  // ("sync.diloco.sparta = true"), "" none. Null: never.
  std::function<std::string(const Recipe&)> outer_shard;
  // What it cannot go with in the rest of the recipe when it is used (DeMo: anything but plain
  // SGD); nullopt: nothing.
  std::function<std::optional<RecipeConflict>(const Recipe&)> conflicts;
};

struct ReducerTraits {
  bool cuda = false;  // it has a device implementation (on device buffers) ...
  std::function<std::string(const Recipe&)> host_only;  // ... except with this recipe ("" none)
  bool exact = false;  // its average is the exact mean (its gradient strategy's exact_average)
};

// Names and traits come from the registry (framework/recipe/registry.h): the built-ins, registered
// on first use, then user code's. A reducer is also a gradient strategy of its name.
bool has_component(Component c, std::string_view name);
// Registers the built-ins now unless done (the registry's first use does it): their sections'
// keys ([optimizer.muon]) are in the recipe's schema before a recipe is read.
void register_builtins();
std::vector<std::string> component_names(Component c);  // built-ins first, in registration order
const StrategyTraits& strategy_traits(std::string_view name);  // Error for an unknown name
const ReducerTraits& reducer_traits(std::string_view name);
// "local_sgd, diloco, streaming_diloco or sparseloco": the periodic strategies, as registered.
std::string periodic_strategy_names();
// The same for the strategies whose outer state can be sharded (StrategyTraits::outer_shard).
std::string outer_shard_strategy_names();
// Whether the recipe's outer state is sharded across sync.intra's groups' ranks (sync.shard, and a
// strategy whose traits allow it at this recipe): what make_sync builds and trainer plan sizes.
bool shards_outer_state(const Recipe& r);

// A registered component's own section ([model.NAME], ...), added to what recipes accept; called
// by the registry when it registers the component (the name is checked there).
void register_section(Component c, const std::string& name, SectionSchema schema);

// A component's name in a recipe: a string the recipe checks against component_names().
template <Component C>
struct ComponentName {
  std::string value;
  ComponentName() = default;
  ComponentName(const char* s) : value(s) {}          // NOLINT: recipes in code write r.model.name = "gpt"
  ComponentName(std::string s) : value(std::move(s)) {}  // NOLINT
  const char* c_str() const { return value.c_str(); }
  bool operator==(const ComponentName&) const = default;
  bool operator==(const char* s) const { return value == s; }
  bool operator==(const std::string& s) const { return value == s; }
  bool operator==(std::string_view s) const { return value == s; }
  friend std::ostream& operator<<(std::ostream& os, const ComponentName& n) { return os << n.value; }
};
using ModelName = ComponentName<Component::model>;
using DataName = ComponentName<Component::data>;
using OptimizerName = ComponentName<Component::optimizer>;
using ReducerName = ComponentName<Component::reducer>;
using StrategyName = ComponentName<Component::strategy>;

}  // namespace laconic
