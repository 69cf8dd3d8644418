#include "framework/recipe/registry.h"

#include <algorithm>

#include "core/check.h"
#include "core/enum_names.h"

namespace laconic {
namespace {

template <typename Table>
const auto& get(const Table& table, const char* what, std::string_view name) {
  const auto it = table.find(name);
  LC_CHECK(it != table.end(), "no ", what, " '", name, "' is registered");
  return it->second;
}

}  // namespace

void Registry::add_name(Component c, const std::string& name, SectionSchema section) {
  LC_CHECK(!name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos,
           "register ", enum_name(c), " '", name, "': expected a name of [a-z0-9_]");
  const auto add = [&](Component k) {
    LC_CHECK(!has(k, name), "register ", enum_name(c), " '", name, "': a ", enum_name(k), " of that name exists");
    names_[static_cast<int>(k)].push_back(name);
  };
  add(c);
  if (c == Component::reducer) add(Component::strategy);  // data parallel through it
  if (section.type) register_section(c, name, std::move(section));
}

Registry& Registry::add_model(const std::string& name, ModelFactory make, SectionSchema section) {
  add_name(Component::model, name, std::move(section));
  models_.emplace(name, std::move(make));
  return *this;
}
Registry& Registry::add_dataset(const std::string& name, DataFactory load, SectionSchema section) {
  add_name(Component::data, name, std::move(section));
  data_.emplace(name, std::move(load));
  return *this;
}
Registry& Registry::add_optimizer(const std::string& name, OptimizerFactory make, SectionSchema section) {
  add_name(Component::optimizer, name, std::move(section));
  optimizers_.emplace(name, std::move(make));
  return *this;
}
Registry& Registry::add_reducer(const std::string& name, ReducerFactory make, SectionSchema section,
                                ReducerTraits traits) {
  add_name(Component::reducer, name, std::move(section));
  reducers_.emplace(name, std::move(make));
  add_gradient_strategy(name, traits);
  reducer_traits_.emplace(name, std::move(traits));
  return *this;
}

void Registry::add_gradient_strategy(const std::string& name, const ReducerTraits& traits) {
  strategies_.emplace(name, [this, name](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    return std::make_unique<DataParallel>(DataParallelOptions{r.sync.bucket_mb, c.overlap, r.sync.momentum},
                                          make_reducer(name, r, c.device));
  });
  StrategyTraits t;
  t.reducer = [name](const Recipe&) { return name; };
  t.momentum = true;
  t.cuda = traits.cuda;
  t.host_only = traits.host_only;
  t.exact_average = traits.exact;
  strategy_traits_.emplace(name, std::move(t));
}
Registry& Registry::add_strategy(const std::string& name, StrategyFactory make, SectionSchema section,
                                 StrategyTraits traits) {
  add_name(Component::strategy, name, std::move(section));
  strategies_.emplace(name, std::move(make));
  strategy_traits_.emplace(name, std::move(traits));
  return *this;
}

bool Registry::has(Component c, std::string_view name) const {
  const auto& n = names_[static_cast<int>(c)];
  return std::find(n.begin(), n.end(), name) != n.end();
}
const StrategyTraits& Registry::strategy_traits(std::string_view name) const {
  return get(strategy_traits_, "sync strategy", name);
}
const ReducerTraits& Registry::reducer_traits(std::string_view name) const { return get(reducer_traits_, "reducer", name); }

std::unique_ptr<Model> Registry::make_model(const Recipe& r, const TrainData& data) const {
  const ModelFactory& make = get(models_, "model", r.model.name.value);
  try {
    return make(r, data);
  } catch (const InputError& e) {
    // The parameter store refuses a model too large for the machine: name the keys that size it.
    const std::string& name = r.model.name.value;
    const std::string keys = name == "mlp"                     ? "model.hidden"
                             : name == "bert" || name == "gpt" ? "model.dim, model.layers, model.ffn, data.vocab_size"
                                                               : "[model." + name + "]";
    LC_INPUT_ERROR(r.path, ": model.name = \"", name, "\" (sized by ", keys, "): ", e.what());
  }
}
TrainData Registry::load_data(const Recipe& r, const LoadOptions& opts) const {
  TrainData d = get(data_, "dataset", r.data.name.value)(r, opts);
  if (r.data.eval_split != EvalSplit::all && (!d.eval || d.eval->size() < 2))
    LC_INPUT_ERROR(r.path, ": data.eval_split = \"", enum_name(r.data.eval_split), "\": needs at least 2 held-out examples, the data has ",
                   d.eval ? d.eval->size() : 0);
  d.eval = eval_split(std::move(d.eval), r.data.eval_split);
  return d;
}
std::unique_ptr<Optimizer> Registry::make_optimizer(const Recipe& r) const {
  return get(optimizers_, "optimizer", r.optimizer.name.value)(r);
}
std::unique_ptr<Reducer> Registry::make_reducer(std::string_view name, const Recipe& r, Device device) const {
  return get(reducers_, "reducer", name)(r, device);
}
std::unique_ptr<SyncStrategy> Registry::make_strategy(std::string_view name, const Recipe& r,
                                                      const StrategyContext& c) const {
  return get(strategies_, "sync strategy", name)(r, c);
}

Registry& registry() {
  static Registry r;
  return r;
}

// components.h's queries, answered by the registry (the built-ins registered on first use).
bool has_component(Component c, std::string_view name) { return registry().has(c, name); }
void register_builtins() { registry(); }
std::vector<std::string> component_names(Component c) { return registry().names(c); }
const StrategyTraits& strategy_traits(std::string_view name) { return registry().strategy_traits(name); }
const ReducerTraits& reducer_traits(std::string_view name) { return registry().reducer_traits(name); }

namespace {

// "a, b or c": the strategies whose traits pass `keep`, in registration order.
std::string strategy_names_where(bool (*keep)(const StrategyTraits&)) {
  std::vector<std::string> names;
  for (const std::string& n : component_names(Component::strategy))
    if (keep(strategy_traits(n))) names.push_back(n);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

std::string periodic_strategy_names() {
  return strategy_names_where([](const StrategyTraits& t) { return static_cast<bool>(t.periodic); });
}

std::string outer_shard_strategy_names() {
  return strategy_names_where([](const StrategyTraits& t) { return static_cast<bool>(t.outer_shard); });
}

bool shards_outer_state(const Recipe& r) {
  const SyncConfig& c = r.sync;
  if (c.shard == ShardKind::none || c.intra != IntraKind::allreduce || !c.phases.phases.empty()) return false;
  const StrategyTraits& t = strategy_traits(c.strategy.value);
  return t.outer_shard && t.outer_shard(r).empty();
}

}  // namespace laconic
