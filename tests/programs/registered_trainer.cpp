// registered_trainer: Laconic's trainer with components registered the way a downstream project
// registers its own (framework/recipe/registry.h), for tests/cli/registered_components.sh:
//  - "random_k", the reducer of examples/random_k (so also a gradient strategy, and a periodic
//    strategy's reducer: sync.diloco.reducer = "random_k");
//  - "every_k", a periodic strategy of this program: parameters averaged every [sync.every_k]
//    period steps after warmup_steps, declared periodic in its traits, so it runs as elastic
//    replicas and under `trainer simulate --failures` like the built-in ones.
#include <laconic/laconic.h>

#include "random_k.h"

namespace {

struct EveryKOptions {
  std::int64_t period = 4;
  std::int64_t warmup_steps = 0;
  bool operator==(const EveryKOptions&) const = default;
};

void register_every_k() {
  laconic::StrategyTraits traits;
  traits.periodic = [](const laconic::Recipe& r) {
    const auto& o = r.section<EveryKOptions>("sync.every_k");
    laconic::OuterPeriod outer;
    outer.period = o.period;
    outer.warmup_steps = o.warmup_steps;
    return outer;
  };
  laconic::registry().add_strategy(
      "every_k",
      [](const laconic::Recipe& r, const laconic::StrategyContext& c) -> std::unique_ptr<laconic::SyncStrategy> {
        const auto& o = r.section<EveryKOptions>("sync.every_k");
        return std::make_unique<laconic::PeriodicAveraging>(
            laconic::local_sgd_options(o.period, c.first_step + o.warmup_steps, r.sync.bucket_mb),
            laconic::registry().make_reducer("allreduce", r, c.device));
      },
      laconic::Section<EveryKOptions>()
          .add<&EveryKOptions::period>("period", laconic::at_least(1))
          .add<&EveryKOptions::warmup_steps>("warmup_steps", laconic::at_least(0)),
      std::move(traits));
}

}  // namespace

int main(int argc, char** argv) {
  register_random_k();
  register_every_k();
  return laconic::train_main(argc, argv);
}
