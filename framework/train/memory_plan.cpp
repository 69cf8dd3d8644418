#include "framework/train/memory_plan.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"
#include "core/units.h"
#include "framework/recipe/factory.h"
#include "framework/sync/sync_strategy.h"
#include "optimizers/optimizer.h"

namespace laconic {
namespace {

constexpr std::array<std::int64_t, 3> kSides = {16, 32, 64};

ParamStore proxy(std::int64_t side) {
  ParamStore s;
  s.add("proxy.weight", {side, side}, ParamGroup::decay, ParamKind::hidden_matrix);
  s.add("proxy.bias", {side}, ParamGroup::no_decay);
  s.finalize();
  return s;
}

double bytes_of(const std::vector<StateTensor>& state) {
  double n = 0;
  for (const StateTensor& t : state) n += static_cast<double>(t.data.size_bytes());
  return n;
}

double optimizer_bytes(const Recipe& r, const ParamStore& store) {
  const std::unique_ptr<Optimizer> o = make_optimizer(r);
  o->prepare(store);
  return bytes_of(o->state());
}

// What the strategy holds: its state (checkpointed) and its working buffers beside it.
struct StrategyBytes {
  double state = 0, buffers = 0;
};

// The strategy itself, bound on rank 0 (binding sizes the state without communicating): sharding's
// part is the optimizer's (plan_memory), and with sync.intra rank 0 leads its group, holding the
// strategy's state among the groups' leaders (or, sharded, over its shard: plan_memory sizes it so).
StrategyBytes strategy_bytes(Recipe r, ParamStore& store) {
  if (r.sync.intra == IntraKind::allreduce) {
    r.distributed.world_size = std::max(1, r.network.groups);
    r.network.stragglers.ranks.clear();  // named among the world's ranks, not the leaders'
  }
  r.sync.shard = ShardKind::none;
  r.sync.intra = IntraKind::none;
  ThreadsWorld world(r.distributed.world_size);
  ThreadsCommunicator comm(world, 0);
  // The learning rate only for the strategies that fold it in (DeMo): sizes do not depend on it.
  const double lr = r.optimizer.lr;
  const std::unique_ptr<SyncStrategy> s = make_sync(r, /*overlap=*/false, Device::cpu, [lr](std::int64_t) { return lr; });
  s->bind(store, comm);
  return {bytes_of(s->state()), static_cast<double>(s->buffer_bytes())};
}

// y = a + b s^2 + c s through the three proxies' (s, y), read at side s.
double fit_at(const std::array<double, 3>& y, double s) {
  // Lagrange's form of the quadratic through (s_i, y_i), exact in double for these small sides.
  double out = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    double term = y[i];
    for (std::size_t j = 0; j < 3; ++j)
      if (j != i)
        term *= (s - static_cast<double>(kSides[j])) / static_cast<double>(kSides[i] - kSides[j]);
    out += term;
  }
  return out;
}

// The side of the square proxy whose s^2 + s elements are `params`.
double side_for(double params) { return 0.5 * (std::sqrt(1.0 + 4.0 * params) - 1.0); }

// ZeRO-2's staging: its two largest buckets (one written while the other is reduced, or a layer's
// two), and under gradient accumulation a reduce-scatter block beside each (zero.h).
double staging_bytes(const Recipe& r, double params, int n, const ParamStore* layout) {
  std::vector<double> sizes;
  if (layout) {
    for (const BucketLayout& b : make_buckets(*layout, r.sync.bucket_mb)) sizes.push_back(static_cast<double>(b.size));
  } else {  // buckets of the cap's size
    const double cap = std::max(1.0, std::floor(r.sync.bucket_mb * 1024 * 1024 / 4));
    sizes = {std::min(params, cap), std::clamp(params - cap, 0.0, cap)};
  }
  std::sort(sizes.rbegin(), sizes.rend());
  double bytes = 0;
  for (std::size_t k = 0; k < std::min<std::size_t>(2, sizes.size()); ++k)
    bytes += 4.0 * (sizes[k] + (r.train.grad_accum > 1 && sizes[k] > 0 ? std::floor(sizes[k] / n) + n - 1 : 0));
  return bytes;
}

}  // namespace

MemoryPlan plan_memory(const Recipe& recipe, double params, int world, const ParamStore* layout) {
  const bool sharded = shards_optimizer(recipe.sync.shard);
  // Sharded, the optimizer steps rank 0's range: params / N elements (the last rank's few more),
  // N the world's ranks, or a group's under sync.intra, whose leaders keep the strategy's state
  // unless it is sharded too (then over the same range).
  const bool in_groups = recipe.sync.intra == IntraKind::allreduce;
  const int n = in_groups ? std::max(1, world / std::max(1, recipe.network.groups)) : world;
  const double range = std::floor(params / n), stepped = sharded ? range : params;
  std::array<double, 3> opt{}, strat{}, buf{};
  const bool sharded_outer = shards_outer_state(recipe);  // the strategy's state over rank 0's range
  for (std::size_t i = 0; i < 3; ++i) {
    ParamStore store = proxy(kSides[i]);
    opt[i] = optimizer_bytes(recipe, store);
    if (sharded && !in_groups) continue;  // the strategy holds nothing of its own there
    const StrategyBytes b = strategy_bytes(recipe, store);
    strat[i] = b.state;
    buf[i] = b.buffers;
  }
  MemoryPlan m;
  m.weights = m.gradients = 4.0 * params;
  if (recipe.sync.shard == ShardKind::gradients) m.gradients = staging_bytes(recipe, params, n, layout);
  m.optimizer = fit_at(opt, side_for(stepped));
  m.strategy = fit_at(strat, side_for(sharded_outer ? range : params));
  // ZeRO's shard or the outer sync's own (weights and gradients of its range either way), and the
  // strategy's own buffers (streaming DiLoCo's freeze).
  m.buffers = (sharded || sharded_outer ? 8.0 * range : 0.0) + fit_at(buf, side_for(params));
  return m;
}

std::string memory_refusal(const Recipe& r, const MemoryPlan& m, int ranks, double physical) {
  if (m.total() * ranks <= physical) return "";
  const auto b = [](double v) { return format_bytes(v); };
  return detail::concat(
      "the state of ", ranks, ranks == 1 ? " rank" : " ranks in this process", " needs ", b(m.total() * ranks),
      ", more than this machine's memory (", b(physical), "): per rank, weights and gradients ", b(m.weights + m.gradients),
      ", optimizer.name = \"", r.optimizer.name.value, "\" ", b(m.optimizer), ", sync.strategy = \"", r.sync.strategy.value,
      "\" ", b(m.strategy), ", sync.shard = \"", name_of(r.sync.shard), "\" buffers ", b(m.buffers),
      r.sync.shard == ShardKind::none
          ? "; sync.shard = \"optimizer\" would hold 1/N of the optimizer state, \"gradients\" of the gradients too"
          : "",
      ranks > 1 ? "; fewer ranks per process (distributed.world_size) would hold less" : "");
}

}  // namespace laconic
