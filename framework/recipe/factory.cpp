#include "framework/recipe/factory.h"
#include "framework/recipe/registry.h"

#include <algorithm>
#include <cmath>

#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/quantize.h"
#include "compression/sparse.h"
#include "compression/topk.h"
#include "core/check.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
#include "workloads/models/mlp.h"
#include "framework/sync/async_diloco.h"
#include "framework/sync/composite.h"
#include "framework/sync/demo.h"
#include "framework/sync/desloc.h"
#include "framework/sync/noloco.h"
#include "framework/sync/periodic.h"
#include "framework/sync/sparta.h"
#include "framework/sync/zero.h"
#include "optimizers/adamw.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"
#include "optimizers/muon.h"
#include "optimizers/sgd.h"

namespace laconic {

TrainData load_data(const Recipe& r, const LoadOptions& opts) { return registry().load_data(r, opts); }
std::unique_ptr<Model> make_model(const Recipe& r, const TrainData& data) { return registry().make_model(r, data); }
std::unique_ptr<Optimizer> make_optimizer(const Recipe& r) { return registry().make_optimizer(r); }

namespace {

// A periodic strategy's pseudo-gradient reducer: its `reducer` when the codec is fp32, else the
// block codec's two-phase all-reduce.
std::unique_ptr<Reducer> make_outer_reducer(const OuterCodecConfig& o, const ReducerName& reducer, const Recipe& r,
                                            Device device) {
  if (o.dtype == Codec::fp32) return registry().make_reducer(reducer.value, r, device);
  return std::make_unique<QuantizedReducer>(
      QuantizeOptions{o.dtype, static_cast<std::size_t>(o.block), o.error_feedback, device});
}

// DiLoCo's options from its section (and streaming DiLoCo's, which extends it).
PeriodicOptions diloco(const DilocoConfig& d, const Recipe& r, std::int64_t first_step) {
  const SyncConfig& c = r.sync;
  PeriodicOptions o = diloco_options(d.period, d.outer_lr, d.outer_momentum, d.nesterov, c.bucket_mb);
  o.outer_optimizer = d.outer_optimizer;
  o.outer_beta2 = d.outer_beta2;
  o.outer_eps = d.outer_eps;
  o.warmup_steps = first_step + d.warmup_steps;
  o.schedule = d.period_schedule.segments;
  o.eager = d.eager;
  if (d.sparta) {
    o.sparta = r.section<SpartaOptions>("sync.sparta");
    o.sparta->seed = r.run.seed;
  }
  return o;
}

}  // namespace

std::unique_ptr<SyncStrategy> make_sync(const Recipe& r, bool overlap, Device device,
                                        std::function<double(std::int64_t)> lr) {
  const SyncConfig& c = r.sync;
  // The recipe checks leave sharding with the dense all-reduce alone, or inside the groups of a
  // periodic strategy's sync.intra.
  if (shards_optimizer(c.shard) && c.intra == IntraKind::none)
    return std::make_unique<ShardedDataParallel>(overlap, c.bucket_mb, c.shard == ShardKind::gradients);
  std::unique_ptr<SyncStrategy> s;
  if (c.phases.phases.empty()) {
    s = registry().make_strategy(c.strategy.value, r, {overlap, 0, device, lr});
  } else {
    std::vector<Phased::Phase> phases;
    std::int64_t first = 0;
    for (const SyncPhase& p : c.phases.phases) {
      phases.push_back({first, registry().make_strategy(p.strategy.value, r, {overlap, first, device, lr})});
      first += p.steps;
    }
    s = std::make_unique<Phased>(std::move(phases));
  }
  if (c.intra == IntraKind::allreduce)
    s = std::make_unique<Hierarchical>(std::move(s),
                                       HierarchicalShards{shards_optimizer(c.shard), shards_outer_state(r), c.bucket_mb,
                                                          c.shard == ShardKind::gradients, overlap});
  return s;
}

// ---- the built-ins, registered as a user's components are (registry.h) ----
//
// One register_* function per kind, one registration line per built-in: the name, the factory,
// the section (only for keys the recipe's typed sections lack, builtin_schema.cpp) and the traits
// the rest of Laconic asks. The registration order is the order of names in messages.

namespace {

// ---- datasets (loaders.cpp) ----

void register_datasets(Registry& reg) {
  reg.add_dataset("fashion_mnist", load_fashion_mnist_data);
  reg.add_dataset("text", load_text_data);
  reg.add_dataset("tokens", load_token_data);
}

// ---- models ----

std::unique_ptr<Model> make_mlp(const Recipe& r, const TrainData& data) {
  LC_CHECK(data.features > 0, "the MLP needs image data");
  MlpOptions o;
  o.inputs = data.features;
  o.hidden = r.model.hidden;
  o.classes = data.classes;
  o.activation = r.model.activation;
  o.dropout = r.model.dropout;
  o.layernorm = r.model.layernorm;
  o.precision = r.train.precision;
  return std::make_unique<Mlp>(o);
}

// BERT's and the GPT's options share their fields: the data's vocabulary and context, the
// recipe's sizes.
template <typename Options>
Options transformer_options(const Recipe& r, const TrainData& data) {
  Options o;
  o.vocab = data.vocab;
  o.seq_len = data.seq_len;
  o.dim = r.model.dim;
  o.layers = r.model.layers;
  o.heads = r.model.heads;
  o.ffn = r.model.ffn;
  o.dropout = r.model.dropout;
  o.precision = r.train.precision;
  return o;
}

std::unique_ptr<Model> make_bert(const Recipe& r, const TrainData& data) {
  LC_CHECK(data.vocab > 0, "BERT needs token data");
  return std::make_unique<Bert>(transformer_options<BertOptions>(r, data));
}

std::unique_ptr<Model> make_gpt(const Recipe& r, const TrainData& data) {
  LC_CHECK(data.vocab > 0, "the GPT needs token data");
  return std::make_unique<Gpt>(transformer_options<GptOptions>(r, data));
}

void register_models(Registry& reg) {
  reg.add_model("mlp", make_mlp);
  reg.add_model("bert", make_bert);
  reg.add_model("gpt", make_gpt);
}

// ---- optimizers ----

std::unique_ptr<Optimizer> make_sgd(const Recipe& r) {
  const OptimizerConfig& c = r.optimizer;
  return std::make_unique<Sgd>(SgdOptions{c.momentum, c.nesterov, c.weight_decay});
}

std::unique_ptr<Optimizer> make_adamw(const Recipe& r) {
  const OptimizerConfig& c = r.optimizer;
  return std::make_unique<AdamW>(AdamWOptions{c.beta1, c.beta2, c.eps, c.weight_decay});
}

std::unique_ptr<Optimizer> make_lars(const Recipe& r) {
  const OptimizerConfig& c = r.optimizer;
  return std::make_unique<Lars>(LarsOptions{c.momentum, c.eta, c.weight_decay, 0.0});
}

std::unique_ptr<Optimizer> make_lamb(const Recipe& r) {
  const OptimizerConfig& c = r.optimizer;
  LambOptions o;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.clamp_min = c.trust_min;
  o.clamp_max = c.trust_max;
  o.trust_without_decay = c.trust_without_decay;
  return std::make_unique<Lamb>(o);
}

std::unique_ptr<Optimizer> make_muon(const Recipe& r) {
  const OptimizerConfig& c = r.optimizer;
  return std::make_unique<Muon>(r.section<MuonOptions>("optimizer.muon"),
                                AdamWOptions{c.beta1, c.beta2, c.eps, c.weight_decay});
}

SectionSchema muon_section() {
  return Section<MuonOptions>()
      .add<&MuonOptions::momentum>("momentum", half_open(0.0, 1.0))
      .add<&MuonOptions::nesterov>("nesterov")
      .add<&MuonOptions::ns_steps>("ns_steps", at_least(1));
}

void register_optimizers(Registry& reg) {
  reg.add_optimizer("sgd", make_sgd);
  reg.add_optimizer("adamw", make_adamw);
  reg.add_optimizer("lars", make_lars);
  reg.add_optimizer("lamb", make_lamb);
  reg.add_optimizer("muon", make_muon, muon_section());
}

// ---- reducers ----

std::unique_ptr<Reducer> make_dense(const Recipe& r, Device device) {
  constexpr DType wire[] = {DType::f32, DType::bf16, DType::f16};
  return std::make_unique<DenseReducer>(wire[static_cast<int>(r.sync.allreduce.dtype)], device);
}

// A compressing reducer of its [sync.NAME] options (Options, at SyncConfig::*section), on `device`.
template <typename Options, typename R, Options SyncConfig::*section>
std::unique_ptr<Reducer> make_compressing(const Recipe& r, Device device) {
  Options o = r.sync.*section;
  o.device = device;
  return std::make_unique<R>(o);
}

// All four have device implementations (compression/cuda/); the dense one's average is the exact
// mean; top-k's sampled selection runs on the host only.
ReducerTraits on_device() {
  ReducerTraits t;
  t.cuda = true;
  return t;
}

ReducerTraits dense_traits() {
  ReducerTraits t = on_device();
  t.exact = true;
  return t;
}

ReducerTraits topk_traits() {
  ReducerTraits t = on_device();
  t.host_only = [](const Recipe& r) {
    return r.sync.topk.selection == TopKOptions::Selection::sampled ? "sync.topk.selection = \"sampled\"" : "";
  };
  return t;
}

// Each reducer is also the gradient strategy of its name: data parallel through it.
void register_reducers(Registry& reg) {
  reg.add_reducer("allreduce", make_dense, {}, dense_traits());
  reg.add_reducer("topk", make_compressing<TopKOptions, TopKReducer, &SyncConfig::topk>, {}, topk_traits());
  reg.add_reducer("powersgd", make_compressing<PowerSgdOptions, PowerSgdReducer, &SyncConfig::powersgd>, {},
                  on_device());
  reg.add_reducer("onebit", make_compressing<OneBitOptions, OneBitReducer, &SyncConfig::onebit>, {}, on_device());
}

// ---- periodic strategies ----
//
// They count their periods from their phase's first step (their warm-up is shifted by it; steps
// before it are another phase's).

// The most steps between two syncs: the period, or a schedule's longest segment period.
std::int64_t longest_period(std::int64_t period, const PeriodSchedule& schedule) {
  for (const PeriodSegment& seg : schedule.segments) period = std::max(period, seg.period);
  return period;
}

// A periodic strategy's traits: its period and warm-up from its section, its reducer (none when a
// codec other than fp32 replaces it, which then keeps it on the host).
template <typename Config>
StrategyTraits periodic_traits(const Config SyncConfig::*section, const char* key) {
  StrategyTraits t;
  t.periodic = [section, key](const Recipe& r) {
    const Config& c = r.sync.*section;
    OuterPeriod p{c.period, c.warmup_steps, longest_period(c.period, c.period_schedule), {}};
    if constexpr (requires { c.eager; })
      if (c.eager)
        p.not_elastic = detail::concat("sync.", key, ".eager = true: elastic replicas share one anchor in their quorum, "
                                       "eager replicas each keep their own; use eager = false");
    return p;
  };
  t.reducer = [section](const Recipe& r) {
    const Config& c = r.sync.*section;
    return c.dtype == Codec::fp32 ? c.reducer.value : std::string();
  };
  t.outer_shard = [section, key](const Recipe& r) {
    if constexpr (requires { (r.sync.*section).sparta; })
      if ((r.sync.*section).sparta)
        return detail::concat("sync.", key, ".sparta = true (its elements are drawn over the whole model)");
    return std::string();
  };
  t.cuda = true;
  t.host_only = [section, key](const Recipe& r) {
    if ((r.sync.*section).dtype != Codec::fp32) return detail::concat("sync.", key, ".dtype other than fp32");
    if constexpr (requires { (r.sync.*section).sparta; })
      if ((r.sync.*section).sparta) return detail::concat("sync.", key, ".sparta = true");
    return std::string();
  };
  return t;
}

std::unique_ptr<SyncStrategy> make_local_sgd(const Recipe& r, const StrategyContext& c) {
  const LocalSgdConfig& l = r.sync.local_sgd;
  PeriodicOptions o = local_sgd_options(l.period, c.first_step + l.warmup_steps, r.sync.bucket_mb);
  o.schedule = l.period_schedule.segments;
  return std::make_unique<PeriodicAveraging>(o, make_outer_reducer(l, l.reducer, r, c.device));
}

std::unique_ptr<SyncStrategy> make_diloco(const Recipe& r, const StrategyContext& c) {
  const DilocoConfig& d = r.sync.diloco;
  return std::make_unique<PeriodicAveraging>(diloco(d, r, c.first_step), make_outer_reducer(d, d.reducer, r, c.device));
}

std::unique_ptr<SyncStrategy> make_streaming_diloco(const Recipe& r, const StrategyContext& c) {
  const StreamingDilocoConfig& s = r.sync.streaming_diloco;
  PeriodicOptions o = diloco(s, r, c.first_step);
  o.fragments = s.fragments;
  o.overlap_steps = s.overlap_steps;
  o.mixing = s.mixing;
  o.freeze = s.freeze;
  return std::make_unique<PeriodicAveraging>(o, make_outer_reducer(s, s.reducer, r, c.device));
}

// Host only; its own sparse reducer.
StrategyTraits sparseloco_traits() {
  StrategyTraits t;
  t.periodic = [](const Recipe& r) {
    const SparseLocoConfig& c = r.sync.sparseloco;
    return OuterPeriod{c.period, c.warmup_steps, longest_period(c.period, c.period_schedule), {}};
  };
  t.outer_shard = [](const Recipe&) { return std::string(); };
  return t;
}

std::unique_ptr<SyncStrategy> make_sparseloco(const Recipe& r, const StrategyContext& c) {
  const SparseLocoConfig& s = r.sync.sparseloco;
  PeriodicOptions o = diloco_options(s.period, s.outer_lr, 0.0, false, r.sync.bucket_mb);  // e replaces momentum
  o.warmup_steps = c.first_step + s.warmup_steps;
  o.schedule = s.period_schedule.segments;
  o.name = "SparseLoCo";
  const auto chunk = static_cast<std::size_t>(s.chunk);
  const auto k = static_cast<std::size_t>(std::clamp<double>(std::round(s.ratio * static_cast<double>(chunk)), 1.0,
                                                             static_cast<double>(chunk)));
  return std::make_unique<PeriodicAveraging>(o, std::make_unique<SparseLocoReducer>(SparseLocoOptions{{chunk, k, s.dtype}, s.beta}));
}

void register_periodic_strategies(Registry& reg) {
  reg.add_strategy("local_sgd", make_local_sgd, {}, periodic_traits(&SyncConfig::local_sgd, "local_sgd"));
  reg.add_strategy("diloco", make_diloco, {}, periodic_traits(&SyncConfig::diloco, "diloco"));
  reg.add_strategy("streaming_diloco", make_streaming_diloco, {},
                   periodic_traits(&SyncConfig::streaming_diloco, "streaming_diloco"));
  reg.add_strategy("sparseloco", make_sparseloco, {}, sparseloco_traits());
}

// ---- strategies of their own kind ----

// Host only; keeps its own momentum and hands the optimizer sign steps.
StrategyTraits demo_traits() {
  StrategyTraits t;
  t.conflicts = [](const Recipe& r) -> std::optional<RecipeConflict> {
    const OptimizerConfig& o = r.optimizer;
    if (o.name == "sgd" && o.momentum == 0 && o.grad_clip == 0) return std::nullopt;
    return RecipeConflict{{"optimizer.name", "optimizer.momentum", "optimizer.grad_clip", "sync.strategy"},
                          detail::concat("optimizer: expected name = \"sgd\", momentum = 0 and grad_clip = 0 for "
                                         "sync.strategy = \"demo\" (DeMo keeps the momentum and hands the optimizer sign "
                                         "steps, whose norm is sqrt(parameters)), got name = \"", o.name, "\", momentum = ",
                                         recipe_float(o.momentum), ", grad_clip = ", recipe_float(o.grad_clip))};
  };
  return t;
}

std::unique_ptr<SyncStrategy> make_demo(const Recipe& r, const StrategyContext& c) {
  const DemoConfig& d = r.sync.demo;
  return std::make_unique<Demo>(DemoOptions{static_cast<std::size_t>(d.chunk), static_cast<std::size_t>(d.topk), d.beta,
                                            d.dtype, d.dct, d.average, d.fold_lr, c.lr});
}

std::unique_ptr<SyncStrategy> make_sparta(const Recipe& r, const StrategyContext&) {
  SpartaOptions o = r.section<SpartaOptions>("sync.sparta");
  o.seed = r.run.seed;
  return std::make_unique<Sparta>(o);
}

SectionSchema sparta_section() {
  return Section<SpartaOptions>()
      .add<&SpartaOptions::fraction>("fraction", Bound{.lo = 0, .hi = 1, .lo_open = true})
      .add<&SpartaOptions::period>("period", at_least(1));
}

// Host only; averages the optimizer's own moments, so every rank must hold them.
StrategyTraits desloc_traits() {
  StrategyTraits t;
  t.conflicts = [](const Recipe& r) -> std::optional<RecipeConflict> {
    if (r.sync.intra == IntraKind::allreduce)
      return RecipeConflict{{"sync.intra", "sync.strategy"},
                            "sync.intra: expected \"none\" for sync.strategy = \"desloc\" (a datacenter's other ranks "
                            "would keep moments their leader's averaging never reaches), got \"allreduce\""};
    if (r.optimizer.name != "adamw" && r.optimizer.name != "lamb" && r.optimizer.name != "muon")
      return RecipeConflict{{"optimizer.name", "sync.strategy"},
                            detail::concat("optimizer.name: expected \"adamw\", \"lamb\" or \"muon\" for "
                                           "sync.strategy = \"desloc\" (it averages Adam's moments), got \"",
                                           r.optimizer.name.value, "\"")};
    return std::nullopt;
  };
  return t;
}

std::unique_ptr<SyncStrategy> make_desloc(const Recipe& r, const StrategyContext&) {
  return std::make_unique<Desloc>(r.section<DeslocOptions>("sync.desloc"));
}

SectionSchema desloc_section() {
  return Section<DeslocOptions>()
      .add<&DeslocOptions::param_period>("param_period", at_least(1))
      .add<&DeslocOptions::m_period>("m_period", at_least(1))
      .add<&DeslocOptions::v_period>("v_period", at_least(1));
}

std::unique_ptr<SyncStrategy> make_noloco(const Recipe& r, const StrategyContext& c) {
  NoLocoOptions o = r.section<NoLocoOptions>("sync.noloco");
  o.seed = r.run.seed;
  o.first_step = c.first_step;
  return std::make_unique<NoLoco>(o);
}

SectionSchema noloco_section() {
  return Section<NoLocoOptions>()
      .add<&NoLocoOptions::period>("period", at_least(1))
      .add<&NoLocoOptions::outer_lr>("outer_lr", above(0))
      .add<&NoLocoOptions::momentum>("momentum", half_open(0, 1))
      .add<&NoLocoOptions::pull>("pull", at_least(0));
}

std::optional<RecipeConflict> async_diloco_conflicts(const Recipe& r) {
  if (r.sync.intra == IntraKind::allreduce)
    return RecipeConflict{{"sync.intra", "sync.strategy"},
                          "sync.intra: expected \"none\" for sync.strategy = \"async_diloco\" (each rank is a replica "
                          "of its own speed), got \"allreduce\""};
  if (!r.sync.phases.phases.empty())
    return RecipeConflict{{"sync.phases", "sync.strategy"},
                          "sync.phases: expected none with \"async_diloco\" (its replicas run on their own "
                          "schedules, with no step where they all agree to hand over)"};
  const AsyncDilocoOptions& a = r.section<AsyncDilocoOptions>("sync.async_diloco");
  const std::int64_t window = a.window > 0 ? a.window : r.distributed.world_size;
  if (a.activation > 1.0 / static_cast<double>(window))
    return RecipeConflict{{"sync.async_diloco.activation", "sync.async_diloco.window", "distributed.world_size"},
                          detail::concat("sync.async_diloco.activation: expected at most 1/window = ",
                                         recipe_float(1.0 / static_cast<double>(window)), " (window ", window,
                                         " arrivals; the momentum's shares over a window sum to 1), got ",
                                         recipe_float(a.activation))};
  return std::nullopt;
}

// Host only; its replicas skip steps (asynchronous replicas of different speeds).
StrategyTraits async_diloco_traits() {
  StrategyTraits t;
  t.idles = true;
  t.conflicts = async_diloco_conflicts;
  return t;
}

std::unique_ptr<SyncStrategy> make_async_diloco(const Recipe& r, const StrategyContext& c) {
  AsyncDilocoOptions o = r.section<AsyncDilocoOptions>("sync.async_diloco");
  o.first_step = c.first_step;
  o.last_step = r.train.steps - 1;
  const NetworkConfig& n = r.network;
  if (n.groups > 0 && !n.stragglers.ranks.empty()) {
    o.slowdown.assign(static_cast<std::size_t>(r.distributed.world_size), 1.0);
    for (const int s : n.stragglers.ranks) o.slowdown[static_cast<std::size_t>(s)] = n.straggler_slowdown;
  }
  return std::make_unique<AsyncDiloco>(o);
}

SectionSchema async_diloco_section() {
  return Section<AsyncDilocoOptions>()
      .add<&AsyncDilocoOptions::period>("period", at_least(1))
      .add<&AsyncDilocoOptions::outer_lr>("outer_lr", above(0))
      .add<&AsyncDilocoOptions::momentum>("momentum", half_open(0, 1))
      .add<&AsyncDilocoOptions::delayed_nesterov>("delayed_nesterov")
      .add<&AsyncDilocoOptions::window>("window", at_least(0))
      .add<&AsyncDilocoOptions::activation>("activation", closed(0, 1))
      .add<&AsyncDilocoOptions::dylu>("dylu")
      .add<&AsyncDilocoOptions::speeds>("speeds");
}

// NoLoCo and asynchronous DiLoCo have no `periodic` trait: NoLoCo's replicas never share an
// anchor, so elastic replicas and simulate --failures (which run a PeriodicAveraging's quorum) do
// not apply; asynchronous DiLoCo's never wait for one another, so there is no quorum.
void register_other_strategies(Registry& reg) {
  reg.add_strategy("demo", make_demo, {}, demo_traits());
  reg.add_strategy("sparta", make_sparta, sparta_section());
  reg.add_strategy("desloc", make_desloc, desloc_section(), desloc_traits());
  reg.add_strategy("noloco", make_noloco, noloco_section());
  reg.add_strategy("async_diloco", make_async_diloco, async_diloco_section(), async_diloco_traits());
}

}  // namespace

Registry::Registry() {
  register_datasets(*this);
  register_models(*this);
  register_optimizers(*this);
  register_reducers(*this);
  register_periodic_strategies(*this);
  register_other_strategies(*this);
}

}  // namespace laconic
