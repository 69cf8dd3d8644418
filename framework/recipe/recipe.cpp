// What a recipe uses (its strategies, their reducers, what keeps it on the host), and TOML text
// flattened key by key. Reading and printing recipes: load.cpp and fields.cpp (to_toml).
#include "framework/recipe/recipe.h"

#include <algorithm>
#include <charconv>
#include <sstream>
#include <string_view>

#include <toml++/toml.h>

#include "core/check.h"
#include "core/enum_names.h"
#include "framework/recipe/recipe_text.h"

namespace laconic {

bool uses_strategy(const SyncConfig& sync, std::string_view kind) {
  if (sync.phases.phases.empty()) return sync.strategy == kind;
  return std::any_of(sync.phases.phases.begin(), sync.phases.phases.end(),
                     [&](const SyncPhase& p) { return p.strategy == kind; });
}

std::string recipe_float(double v) { return recipe_detail::format_float(v); }

std::string host_only_use(const Recipe& r) {
  for (const std::string& s : strategies_in_use(r.sync)) {
    if (!has_component(Component::strategy, s)) continue;
    const StrategyTraits& t = strategy_traits(s);
    if (!t.cuda) return s;
    if (std::string why = t.host_only ? t.host_only(r) : ""; !why.empty()) return why;
    const std::string reducer = t.reducer ? t.reducer(r) : "";
    if (reducer.empty() || reducer == s || !has_component(Component::reducer, reducer)) continue;
    const ReducerTraits& rt = reducer_traits(reducer);
    if (!rt.cuda) return "reducer \"" + reducer + "\"";
    if (std::string why = rt.host_only ? rt.host_only(r) : ""; !why.empty()) return why;
  }
  return "";
}

std::vector<std::string> strategies_in_use(const SyncConfig& sync) {
  if (sync.phases.phases.empty()) return {sync.strategy.value};
  std::vector<std::string> out;
  for (const SyncPhase& p : sync.phases.phases)
    if (std::find(out.begin(), out.end(), p.strategy.value) == out.end()) out.push_back(p.strategy.value);
  return out;
}

bool uses_component(const Recipe& r, Component c, std::string_view name) {
  switch (c) {
    case Component::model: return r.model.name == name;
    case Component::data: return r.data.name == name;
    case Component::optimizer: return r.optimizer.name == name;
    case Component::strategy: return uses_strategy(r.sync, name);
    case Component::reducer:  // through a strategy in use, as its traits say
      for (const std::string& s : strategies_in_use(r.sync)) {
        if (!has_component(Component::strategy, s)) continue;
        const StrategyTraits& t = strategy_traits(s);
        if (t.reducer && t.reducer(r) == name) return true;
      }
      return false;
  }
  return false;
}

namespace {

// A value as a recipe would spell it: floats in their shortest round-trip form (the resolved
// recipe writes 17 digits: 0.10000000000000001), strings in double quotes.
std::string format_value(const toml::node& node) {
  if (const auto* d = node.as_floating_point()) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, d->get());
    std::string out(buf, res.ptr);
    if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // still a float in TOML
    return out;
  }
  if (const auto* str = node.as_string()) return "\"" + str->get() + "\"";
  if (const auto* a = node.as_array()) {
    std::string out = "[";
    for (std::size_t i = 0; i < a->size(); ++i) out += (i ? ", " : "") + format_value(*a->get(i));
    return out + "]";
  }
  std::ostringstream os;
  node.visit([&](const auto& v) { os << v; });
  return os.str();
}

void flatten(const toml::table& t, const std::string& prefix, FlatToml& out) {
  for (const auto& [k, node] : t) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const auto* sub = node.as_table()) {
      flatten(*sub, key, out);
    } else {
      out.emplace_back(key, format_value(node));
    }
  }
}

}  // namespace

std::optional<FlatToml> flatten_toml(const std::string& text) {
  try {
    FlatToml out;
    flatten(toml::parse(text), "", out);
    return out;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

const char* name_of(BackendKind v) { return enum_name(v); }
const char* name_of(DeviceKind v) { return enum_name(v); }
const char* name_of(WireKind v) { return enum_name(v); }
const char* name_of(IntraKind v) { return enum_name(v); }
const char* name_of(ShardKind v) { return enum_name(v); }
const char* name_of(NonfiniteKind v) { return enum_name(v); }
const char* name_of(FaultKind v) { return enum_name(v); }
const char* name_of(ComputeKind v) { return enum_name(v); }

}  // namespace laconic
