#include "framework/train/registry.h"

#include "core/check.h"

namespace laconic {
namespace {

template <typename Table, typename F>
void put(Table& table, Component c, const std::string& name, F make, SectionSchema section) {
  register_component(c, name, std::move(section));  // checks the name is new
  table.emplace(name, std::move(make));
}

template <typename Table>
const auto& get(const Table& table, const char* what, std::string_view name) {
  const auto it = table.find(name);
  LC_CHECK(it != table.end(), "no ", what, " '", name, "' is registered");
  return it->second;
}

}  // namespace

Registry& Registry::add_model(const std::string& name, ModelFactory make, SectionSchema section) {
  put(models_, Component::model, name, std::move(make), std::move(section));
  return *this;
}
Registry& Registry::add_dataset(const std::string& name, DataFactory load, SectionSchema section) {
  put(data_, Component::data, name, std::move(load), std::move(section));
  return *this;
}
Registry& Registry::add_optimizer(const std::string& name, OptimizerFactory make, SectionSchema section) {
  put(optimizers_, Component::optimizer, name, std::move(make), std::move(section));
  return *this;
}
Registry& Registry::add_reducer(const std::string& name, ReducerFactory make, SectionSchema section) {
  put(reducers_, Component::reducer, name, std::move(make), std::move(section));
  add_gradient_strategy(name);  // register_component added its name
  return *this;
}

void Registry::add_gradient_strategy(const std::string& name) {
  strategies_.emplace(name, [this, name](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    return std::make_unique<DataParallel>(DataParallelOptions{r.sync.bucket_mb, c.overlap, r.sync.momentum},
                                          make_reducer(name, r, c.device));
  });
}
Registry& Registry::add_strategy(const std::string& name, StrategyFactory make, SectionSchema section) {
  put(strategies_, Component::strategy, name, std::move(make), std::move(section));
  return *this;
}

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
  return get(data_, "dataset", r.data.name.value)(r, opts);
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

}  // namespace laconic
