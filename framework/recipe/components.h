// The names a recipe may give its model, data, optimizer, reducers and sync strategy: Laconic's
// built-ins, and the components user code registers (framework/train/registry.h) before it
// parses recipes. A component may declare a section of its own keys ([model.NAME], [data.NAME],
// [optimizer.NAME], [sync.NAME]), parsed, checked and printed like the built-in sections.
#pragma once

#include <array>
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

// Adds a name (and its section, when schema.type is set) to what recipes accept. Adding a
// reducer adds the strategy of its name too. Error: a name that is not [a-z0-9_]+, or is taken.
// Not thread-safe against concurrent parsing: register first, at the start of main().
void register_component(Component c, const std::string& name, SectionSchema schema = {});
bool has_component(Component c, std::string_view name);
std::vector<std::string> component_names(Component c);  // built-ins first, in registration order

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
