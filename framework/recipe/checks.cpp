#include "framework/recipe/checks.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

#include "core/check.h"
#include "workloads/data/tokenizer.h"
#include "framework/recipe/recipe_text.h"

namespace laconic::recipe_detail {
namespace {

// Where to point a cross-field error: the latest of the given keys to be set, else their section,
// else the file.
std::string locate(const Draft& d, std::span<const std::string_view> paths) {
  int best = 0;
  std::string where;
  for (const auto path : paths) {
    const Field* f = find_field(path);
    if (!f) continue;  // a section's name ("sync.demo"), not a key
    const auto index = static_cast<std::size_t>(f - schema().data());
    if (d.order[index] > best) {
      best = d.order[index];
      where = d.origin[index];
    }
  }
  if (!where.empty() || paths.empty()) return where.empty() ? d.file : where;
  const auto section = paths.front().substr(0, paths.front().rfind('.'));
  for (const auto& [name, loc] : d.sections)
    if (name == section) return loc;
  return d.file;
}
std::string locate(const Draft& d, std::initializer_list<std::string_view> paths) {
  return locate(d, std::span<const std::string_view>(paths.begin(), paths.size()));
}

// What is trained: the steps, the model on its data, the optimizer's options.
void check_training(const Draft& d) {
  const Recipe& r = d.recipe;
  if (r.train.steps == 0 && r.train.epochs == 0)
    LC_INPUT_ERROR(locate(d, {"train.steps", "train.epochs"}),
                   ": train.steps, train.epochs: expected train.steps >= 1 or train.epochs > 0, "
                   "got both 0");
  if (r.optimizer.nesterov && r.optimizer.momentum == 0)
    LC_INPUT_ERROR(locate(d, {"optimizer.nesterov", "optimizer.momentum"}),
                   ": optimizer.nesterov: expected optimizer.momentum > 0 with nesterov = true, got "
                   "optimizer.momentum = ",
                   format_float(r.optimizer.momentum));
  const bool transformer = r.model.name == "bert" || r.model.name == "gpt";
  if (transformer && r.model.dim % r.model.heads != 0)
    LC_INPUT_ERROR(locate(d, {"model.heads", "model.dim"}), ": model.heads: expected a divisor of model.dim = ",
                   r.model.dim, ", got ", r.model.heads);
  // Built-in models on built-in data; a registered model or dataset checks what it is given.
  const bool builtin_pair = (r.model.name == "mlp" || transformer) &&
                            (r.data.name == "fashion_mnist" || r.data.name == "text" || r.data.name == "tokens");
  const bool data_fits = r.data.name == "fashion_mnist" ? r.model.name == "mlp"
                         : r.data.name == "text"        ? transformer
                                                        : r.model.name == "gpt";
  if (builtin_pair && !data_fits)
    LC_INPUT_ERROR(locate(d, {"model.name", "data.name"}), ": model.name: expected ",
                   r.data.name == "text"     ? "\"bert\" or \"gpt\" for data.name = \"text\""
                   : r.data.name == "tokens" ? "\"gpt\" for data.name = \"tokens\""
                                                     : "\"mlp\" for data.name = \"fashion_mnist\"",
                   ", got \"", r.model.name, "\"");
  if (r.data.name == "text" && r.data.vocab_size < kFirstMergeToken)
    LC_INPUT_ERROR(locate(d, {"data.vocab_size", "data.name"}), ": data.vocab_size: expected at least ", kFirstMergeToken,
                   " for data.name = \"text\" (the BPE's special and byte tokens), got ", r.data.vocab_size);
  if (r.data.name == "tokens" && r.data.train_path.path.empty())
    LC_INPUT_ERROR(locate(d, {"data.train_path", "data.name"}),
                   ": data.train_path: expected a file or glob pattern of token files for data.name = \"tokens\", got none");
  if (r.optimizer.trust_max > 0 && r.optimizer.trust_max < r.optimizer.trust_min)
    LC_INPUT_ERROR(locate(d, {"optimizer.trust_max", "optimizer.trust_min"}),
                   ": optimizer.trust_max: expected 0 (no clamp) or >= optimizer.trust_min = ",
                   format_float(r.optimizer.trust_min), ", got ", format_float(r.optimizer.trust_max));
}

// The world's layout, and what the strategies in use ask of it and of the rest of the recipe.
void check_distribution(const Draft& d) {
  const Recipe& r = d.recipe;
  const int world = r.distributed.world_size;
  if (r.network.groups > 0 && world % r.network.groups != 0)
    LC_INPUT_ERROR(locate(d, {"network.groups", "distributed.world_size"}),
                   ": network.groups: expected a divisor of distributed.world_size = ", world,
                   " (groups of equal size), got ", r.network.groups);
  if (r.sync.intra == IntraKind::allreduce && r.network.groups < 2)
    LC_INPUT_ERROR(locate(d, {"sync.intra", "network.groups"}),
                   ": sync.intra: expected network.groups >= 2 for \"allreduce\" inside groups (the groups are the "
                   "network's), got network.groups = ", r.network.groups);
  if (r.distributed.device == DeviceKind::cuda)
    if (const std::string what = host_only_use(r); !what.empty())
      LC_INPUT_ERROR(locate(d, {"distributed.device", "sync.strategy", "sync.phases"}),
                     ": distributed.device: expected \"cpu\" with ", what, " (it runs on host buffers), got \"cuda\"");
  // What the strategies in use (sync.strategy, or each of sync.phases) say of the rest of the recipe.
  for (const std::string& s : strategies_in_use(r.sync)) {
    const StrategyTraits& t = strategy_traits(s);
    if (r.sync.momentum > 0 && !t.momentum)
      LC_INPUT_ERROR(locate(d, {"sync.momentum", "sync.strategy", "sync.phases"}), ": sync.momentum: expected 0 with ",
                     t.periodic ? periodic_strategy_names() : s, " (momentum correction applies to gradient strategies; ",
                     t.periodic ? "give the inner optimizer its momentum" : s + " keeps its own, if any",
                     "), got ", format_float(r.sync.momentum));
    if (t.conflicts)
      if (const std::optional<RecipeConflict> c = t.conflicts(r)) {
        std::vector<std::string_view> keys(c->keys.begin(), c->keys.end());
        LC_INPUT_ERROR(locate(d, keys), ": ", c->message);
      }
  }
}

// [sync.streaming_diloco]: its overlap against its periods and eager; freeze where it means something.
void check_streaming_diloco(const Draft& d) {
  const Recipe& r = d.recipe;
  const StreamingDilocoConfig& sd = r.sync.streaming_diloco;
  std::int64_t shortest = sd.period;
  if (!sd.period_schedule.segments.empty()) {
    shortest = sd.period_schedule.segments.front().period;
    for (const auto& seg : sd.period_schedule.segments) shortest = std::min(shortest, seg.period);
  }
  if (sd.eager && sd.overlap_steps > 0)
    LC_INPUT_ERROR(locate(d, {"sync.streaming_diloco.overlap_steps", "sync.streaming_diloco.eager"}),
                   ": sync.streaming_diloco.overlap_steps: expected 0 with eager = true (an eager fragment's reduction "
                   "overlaps its whole next period), got ", sd.overlap_steps);
  if (sd.overlap_steps >= shortest)
    LC_INPUT_ERROR(locate(d, {"sync.streaming_diloco.overlap_steps", "sync.streaming_diloco.period",
                              "sync.streaming_diloco.period_schedule"}),
                   ": sync.streaming_diloco.overlap_steps: expected below the shortest period (", shortest,
                   "), got ", sd.overlap_steps);
  if (!sd.freeze) return;
  // One fragment is always the next to sync (nothing frozen); SPARTA averages frozen fragments too.
  if (sd.fragments == 1)
    LC_INPUT_ERROR(locate(d, {"sync.streaming_diloco.fragments", "sync.streaming_diloco.freeze"}),
                   ": sync.streaming_diloco.fragments: expected at least 2 with freeze = true (one fragment is "
                   "always the one synced next: nothing would be frozen), got 1");
  if (sd.sparta)
    LC_INPUT_ERROR(locate(d, {"sync.streaming_diloco.sparta", "sync.streaming_diloco.freeze"}),
                   ": sync.streaming_diloco.sparta: expected false with freeze = true (SPARTA averages the frozen "
                   "fragments between syncs), got true");
  // Under sync.intra only the groups' leaders run the strategy's local steps: the others would train every fragment.
  if (r.sync.intra != IntraKind::none && uses_strategy(r.sync, "streaming_diloco"))
    LC_INPUT_ERROR(locate(d, {"sync.intra", "sync.streaming_diloco.freeze"}),
                   ": sync.intra: expected \"none\" with sync.streaming_diloco.freeze = true (only the groups' "
                   "leaders would hold the frozen fragments), got \"", name_of(r.sync.intra), "\"");
}

// The strategies' own sections, whether or not the run uses them.
void check_strategy_options(const Draft& d) {
  const Recipe& r = d.recipe;
  // A codec other than fp32 replaces the dense reducer, and runs on host buffers.
  const auto check_codec = [&](const std::string& section, const OuterCodecConfig& c, const ReducerName& reducer) {
    if (c.dtype != laconic::Codec::fp32 && reducer != "allreduce")
      LC_INPUT_ERROR(locate(d, {section + ".dtype", section + ".reducer"}), ": ", section,
                     ".dtype: expected \"fp32\" with reducer = \"", reducer,
                     "\" (a codec replaces the dense reducer), got \"", name_of(c.dtype), "\"");
  };
  check_codec("sync.local_sgd", r.sync.local_sgd, r.sync.local_sgd.reducer);
  check_codec("sync.diloco", r.sync.diloco, r.sync.diloco.reducer);
  check_codec("sync.streaming_diloco", r.sync.streaming_diloco, r.sync.streaming_diloco.reducer);
  // Nesterov is outer SGD's; the outer Adam has none (DiLoCo's default nesterov = true must be turned off).
  const auto check_outer = [&](const std::string& section, const DilocoConfig& c) {
    if (c.outer_optimizer == OuterOptimizer::adam && c.nesterov)
      LC_INPUT_ERROR(locate(d, {section + ".nesterov", section + ".outer_optimizer"}), ": ", section,
                     ".nesterov: expected false with outer_optimizer = \"adam\" (Nesterov momentum is outer SGD's), got true");
  };
  check_outer("sync.diloco", r.sync.diloco);
  check_outer("sync.streaming_diloco", r.sync.streaming_diloco);
  check_streaming_diloco(d);
  if (r.sync.demo.dct == DemoDct::two_d ? r.sync.demo.topk > r.sync.demo.chunk * r.sync.demo.chunk
                                         : r.sync.demo.topk > r.sync.demo.chunk)
    LC_INPUT_ERROR(locate(d, {"sync.demo.topk", "sync.demo.chunk", "sync.demo.dct"}), ": sync.demo.topk: expected at most ",
                   r.sync.demo.dct == DemoDct::two_d ? "a block, sync.demo.chunk^2 = " : "sync.demo.chunk = ",
                   r.sync.demo.dct == DemoDct::two_d ? r.sync.demo.chunk * r.sync.demo.chunk : r.sync.demo.chunk,
                   " (dct = \"", name_of(r.sync.demo.dct), "\"), got ", r.sync.demo.topk);
}

// The ranks the recipe names (the fault's, the stragglers) exist, and stragglers have a network to be slow on.
void check_ranks(const Draft& d) {
  const Recipe& r = d.recipe;
  const int world = r.distributed.world_size;
  if (r.fault.kind != FaultKind::none && r.fault.rank >= world)
    LC_INPUT_ERROR(locate(d, {"fault.rank", "distributed.world_size"}),
                   ": fault.rank: expected a rank below distributed.world_size = ", world, ", got ", r.fault.rank);
  const double trips = r.network.rendezvous_round_trips;
  if (trips != static_cast<double>(static_cast<int>(trips)))
    LC_INPUT_ERROR(locate(d, {"network.rendezvous_round_trips"}),
                   ": network.rendezvous_round_trips: expected a whole number of round trips, got ", trips);
  for (const int s : r.network.stragglers.ranks)
    if (s >= world)
      LC_INPUT_ERROR(locate(d, {"network.stragglers", "distributed.world_size"}),
                     ": network.stragglers: expected ranks below distributed.world_size = ", world,
                     ", got ", s);
  // A straggler is slower on the simulated clock (and sets asynchronous replicas' speeds): with no
  // network simulated it would change nothing, silently.
  if (!r.network.stragglers.ranks.empty() && r.network.groups == 0)
    LC_INPUT_ERROR(locate(d, {"network.stragglers", "network.groups"}),
                   ": network.stragglers: slows ranks of a simulated network; expected network.groups > 0 "
                   "(0: none simulated)");
}

// sync.shard = "outer" shards the outer state of a strategy whose traits allow it (local SGD's
// family, not under SPARTA) across the ranks of sync.intra's groups, and nothing else.
void check_outer_sharding(const Draft& d) {
  const Recipe& r = d.recipe;
  if (shards_outer_state(r)) return;
  const StrategyTraits& t = strategy_traits(r.sync.strategy.value);
  const std::string why = t.outer_shard ? t.outer_shard(r) : std::string();
  LC_INPUT_ERROR(locate(d, {"sync.shard", "sync.strategy", "sync.intra"}),
                 ": sync.shard: expected \"outer\" only with sync.intra = \"allreduce\" and sync.strategy = ",
                 outer_shard_strategy_names(), " (no sync.phases), whose outer state it shards across each group's "
                 "ranks; got sync.strategy = \"", r.sync.strategy.value, "\", sync.intra = \"", name_of(r.sync.intra), "\"",
                 why.empty() ? "" : ", " + why);
}

// sync.shard = "optimizer" (ZeRO-1) is built for the dense fp32 all-reduce alone, and for the
// optimizers that step a piece of a tensor correctly (element-wise, or asking for whole-tensor norms).
void check_sharding(const Draft& d) {
  const Recipe& r = d.recipe;
  if (r.sync.shard == ShardKind::none) return;
  // Warm-up steps average whole gradients between the groups, which sharded ranks do not hold.
  if (r.sync.intra == IntraKind::allreduce && r.sync.phases.phases.empty())
    if (const auto& periodic = strategy_traits(r.sync.strategy.value).periodic; periodic && periodic(r).warmup_steps > 0)
      LC_INPUT_ERROR(locate(d, {"sync.shard", "sync." + r.sync.strategy.value + ".warmup_steps"}),
                     ": sync.shard: expected \"none\" with sync.", r.sync.strategy.value, ".warmup_steps = ",
                     periodic(r).warmup_steps, " (its synchronous warm-up reduces whole gradients between the "
                     "groups; sharded ranks hold their shard's); got \"", name_of(r.sync.shard), "\"");
  if (r.sync.shard == ShardKind::outer) return check_outer_sharding(d);
  const auto refuse = [&](std::initializer_list<std::string_view> keys, const std::string& expected) {
    LC_INPUT_ERROR(locate(d, keys), ": sync.shard: expected \"none\" with ", expected,
                   ", got \"", name_of(r.sync.shard), "\"");
  };
  if (!r.sync.phases.phases.empty()) refuse({"sync.shard", "sync.phases"}, "sync.phases (sharding has no schedule yet)");
  // Alone, the dense all-reduce; inside sync.intra's groups, under a periodic strategy between them.
  const bool periodic = static_cast<bool>(strategy_traits(r.sync.strategy.value).periodic);
  if (r.sync.intra == IntraKind::none && r.sync.strategy != "allreduce")
    refuse({"sync.shard", "sync.strategy", "sync.intra"},
           "sync.strategy = \"" + r.sync.strategy.value + "\" and no sync.intra (sharding is built for \"allreduce\", "
           "and for the groups of sync.intra = \"allreduce\" under a periodic strategy)");
  if (r.sync.intra == IntraKind::allreduce && !periodic)
    refuse({"sync.shard", "sync.strategy", "sync.intra"},
           "sync.intra = \"allreduce\" and sync.strategy = \"" + r.sync.strategy.value +
               "\" (inside groups, sharding needs a periodic strategy between them: its leaders sync parameters, "
               "not gradients)");
  if (r.sync.allreduce.dtype != WireKind::fp32)
    refuse({"sync.shard", "sync.allreduce.dtype"}, std::string("sync.allreduce.dtype = \"") +
                                                       name_of(r.sync.allreduce.dtype) + "\" (it reduce-scatters fp32)");
  if (r.sync.momentum > 0) refuse({"sync.shard", "sync.momentum"}, "sync.momentum > 0 (momentum correction)");
  const std::string& opt = r.optimizer.name.value;
  if (opt != "sgd" && opt != "adamw" && opt != "lamb" && opt != "lars")
    refuse({"sync.shard", "optimizer.name"}, "optimizer.name = \"" + opt +
               "\" (a shard may cut a tensor: sgd, adamw, lamb and lars step pieces correctly; Muon needs whole matrices)");
  if (r.distributed.device == DeviceKind::cuda && (opt == "lamb" || opt == "lars"))
    refuse({"sync.shard", "optimizer.name", "distributed.device"},
           "optimizer.name = \"" + opt + "\" on \"cuda\" (its sharded trust ratios run on the host only so far)");
}

}  // namespace

void check_cross_fields(const Draft& d) {
  check_training(d);
  check_distribution(d);
  check_strategy_options(d);
  check_ranks(d);
  check_sharding(d);
}

}  // namespace laconic::recipe_detail
