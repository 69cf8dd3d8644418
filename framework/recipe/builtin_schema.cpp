#include "framework/recipe/builtin_schema.h"

#include <string>
#include <type_traits>
#include <utility>

#include "framework/recipe/recipe.h"

namespace laconic {
namespace {

// Adds the keys of one built-in section: Path is the chain of members from Recipe to the struct
// holding it (one for [sync], two for [sync.topk]), Member a member of that. The keys of a
// registered section are the same Fields, built by Section<T> (schema.h).
template <auto... Path>
struct SectionBuilder {
  std::string name;
  std::vector<Field>& out;

  template <auto Member>
  SectionBuilder& add(std::string key, Bound bound = {}) {
    using S = std::remove_cvref_t<decltype((std::declval<Recipe&>() .* ... .* Path))>;
    using V = std::remove_cvref_t<decltype(std::declval<S&>().*Member)>;
    out.push_back(Field{name, std::move(key), bound, &FieldCodec<V>::expected,
                        [](const TomlNode& n, const Bound& b, void* sec) {
                          return FieldCodec<V>::read(n, b, static_cast<S*>(sec)->*Member);
                        },
                        [](const void* sec) { return FieldCodec<V>::write(static_cast<const S*>(sec)->*Member); },
                        [](Recipe& r) -> void* { return &(r .* ... .* Path); }});
    return *this;
  }
};

// DiLoCo's keys, shared by [sync.diloco] and [sync.streaming_diloco] (whose config extends it).
template <typename Builder>
Builder&& add_diloco_keys(Builder&& b) {
  b.template add<&DilocoConfig::period>("period", at_least(1))
      .template add<&DilocoConfig::warmup_steps>("warmup_steps", at_least(0))
      .template add<&DilocoConfig::outer_lr>("outer_lr", above(0))
      .template add<&DilocoConfig::outer_momentum>("outer_momentum", half_open(0, 1))
      .template add<&DilocoConfig::nesterov>("nesterov")
      .template add<&DilocoConfig::outer_optimizer>("outer_optimizer")
      .template add<&DilocoConfig::outer_beta2>("outer_beta2", half_open(0, 1))
      .template add<&DilocoConfig::outer_eps>("outer_eps", above(0))
      .template add<&DilocoConfig::reducer>("reducer")
      .template add<&DilocoConfig::dtype>("dtype")
      .template add<&DilocoConfig::block>("block", at_least(1))
      .template add<&DilocoConfig::error_feedback>("error_feedback")
      .template add<&DilocoConfig::eager>("eager")
      .template add<&DilocoConfig::sparta>("sparta")
      .template add<&DilocoConfig::period_schedule>("period_schedule");
  return std::forward<Builder>(b);
}

// [run], [model] and [data]: what is trained, on which data.
void add_model_and_data_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::run>{"run", f}
      .add<&RunConfig::name>("name")
      .add<&RunConfig::seed>("seed", at_least(0))
      .add<&RunConfig::out_dir>("out_dir");
  SectionBuilder<&Recipe::model>{"model", f}
      .add<&ModelConfig::name>("name")
      .add<&ModelConfig::hidden>("hidden", at_least(1))
      .add<&ModelConfig::activation>("activation")
      .add<&ModelConfig::dropout>("dropout", half_open(0, 1))
      .add<&ModelConfig::layernorm>("layernorm")
      .add<&ModelConfig::dim>("dim", at_least(1))
      .add<&ModelConfig::layers>("layers", at_least(1))
      .add<&ModelConfig::heads>("heads", at_least(1))
      .add<&ModelConfig::ffn>("ffn", at_least(1))
      .add<&ModelConfig::init_from>("init_from");
  SectionBuilder<&Recipe::data>{"data", f}
      .add<&DataConfig::name>("name")
      .add<&DataConfig::path>("path")
      .add<&DataConfig::seq_len>("seq_len", closed(2, 4096))
      .add<&DataConfig::vocab_size>("vocab_size", closed(1, 1 << 20))
      .add<&DataConfig::eval_fraction>("eval_fraction", half_open(0, 1))
      .add<&DataConfig::eval_split>("eval_split")
      .add<&DataConfig::mask_prob>("mask_prob", Bound{.lo = 0, .hi = 1, .lo_open = true, .hi_open = true})
      .add<&DataConfig::extensions>("extensions")
      .add<&DataConfig::lowercase>("lowercase")
      .add<&DataConfig::train_path>("train_path")
      .add<&DataConfig::val_path>("val_path")
      .add<&DataConfig::token_format>("token_format");
}

// [train], [optimizer] and [schedule]: for how long, with which optimizer and learning rate.
void add_training_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::train>{"train", f}
      .add<&TrainConfig::steps>("steps", at_least(0))
      .add<&TrainConfig::epochs>("epochs", at_least(0))
      .add<&TrainConfig::micro_batch>("micro_batch", at_least(1))
      .add<&TrainConfig::grad_accum>("grad_accum", at_least(1))
      .add<&TrainConfig::eval_every>("eval_every", at_least(0))
      .add<&TrainConfig::log_every>("log_every", at_least(1))
      .add<&TrainConfig::noise_scale>("noise_scale")
      .add<&TrainConfig::trace>("trace")
      .add<&TrainConfig::time_limit>("time_limit", at_least(0))
      .add<&TrainConfig::precision>("precision")
      .add<&TrainConfig::tensorboard>("tensorboard");
  SectionBuilder<&Recipe::optimizer>{"optimizer", f}
      .add<&OptimizerConfig::name>("name")
      .add<&OptimizerConfig::lr>("lr", above(0))
      .add<&OptimizerConfig::momentum>("momentum", half_open(0, 1))
      .add<&OptimizerConfig::nesterov>("nesterov")
      .add<&OptimizerConfig::weight_decay>("weight_decay", at_least(0))
      .add<&OptimizerConfig::beta1>("beta1", half_open(0, 1))
      .add<&OptimizerConfig::beta2>("beta2", half_open(0, 1))
      .add<&OptimizerConfig::eps>("eps", above(0))
      .add<&OptimizerConfig::eta>("eta", above(0))
      .add<&OptimizerConfig::trust_min>("trust_min", at_least(0))
      .add<&OptimizerConfig::trust_max>("trust_max", at_least(0))
      .add<&OptimizerConfig::trust_without_decay>("trust_without_decay")
      .add<&OptimizerConfig::grad_clip>("grad_clip", at_least(0));
  SectionBuilder<&Recipe::schedule>{"schedule", f}
      .add<&ScheduleConfig::warmup_steps>("warmup_steps", at_least(0))
      .add<&ScheduleConfig::decay>("decay")
      .add<&ScheduleConfig::min_lr_ratio>("min_lr_ratio", closed(0, 1))
      .add<&ScheduleConfig::power>("power", above(0))
      .add<&ScheduleConfig::scaling_rule>("scaling_rule")
      .add<&ScheduleConfig::base_batch>("base_batch", at_least(0));
}

// [distributed], [sync] and the reducers' subsections: how the replicas run and synchronise.
void add_sync_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::distributed>{"distributed", f}
      .add<&DistributedConfig::backend>("backend")
      .add<&DistributedConfig::device>("device")
      .add<&DistributedConfig::world_size>("world_size", closed(1, 1024))
      .add<&DistributedConfig::timeout_s>("timeout_s", above(0))
      .add<&DistributedConfig::algorithm>("algorithm")
      .add<&DistributedConfig::streams>("streams", closed(1, 64));
  SectionBuilder<&Recipe::sync>{"sync", f}
      .add<&SyncConfig::strategy>("strategy")
      .add<&SyncConfig::bucket_mb>("bucket_mb", above(0))
      .add<&SyncConfig::overlap>("overlap")
      .add<&SyncConfig::momentum>("momentum", half_open(0, 1))
      .add<&SyncConfig::intra>("intra")
      .add<&SyncConfig::shard>("shard")
      .add<&SyncConfig::phases>("phases");
  SectionBuilder<&Recipe::sync, &SyncConfig::allreduce>{"sync.allreduce", f}
      .add<&AllReduceConfig::dtype>("dtype");
  SectionBuilder<&Recipe::sync, &SyncConfig::topk>{"sync.topk", f}
      .add<&TopKOptions::ratio>("ratio", Bound{.lo = 0, .hi = 1, .lo_open = true})
      .add<&TopKOptions::error_feedback>("error_feedback")
      .add<&TopKOptions::selection>("selection")
      .add<&TopKOptions::sample_fraction>("sample_fraction", Bound{.lo = 0, .hi = 1, .lo_open = true})
      .add<&TopKOptions::warmup_steps>("warmup_steps", at_least(0));
  SectionBuilder<&Recipe::sync, &SyncConfig::powersgd>{"sync.powersgd", f}
      .add<&PowerSgdOptions::rank>("rank", closed(1, 1024))
      .add<&PowerSgdOptions::start_iter>("start_iter", at_least(0))
      .add<&PowerSgdOptions::min_compression_rate>("min_compression_rate", at_least(1))
      .add<&PowerSgdOptions::error_feedback>("error_feedback")
      .add<&PowerSgdOptions::warm_start>("warm_start");
  SectionBuilder<&Recipe::sync, &SyncConfig::onebit>{"sync.onebit", f}
      .add<&OneBitOptions::warmup_steps>("warmup_steps", at_least(0))
      .add<&OneBitOptions::error_feedback>("error_feedback")
      .add<&OneBitOptions::scale>("scale");
}

// [sync.local_sgd] to [sync.demo]: the built-in strategies' own sections.
void add_strategy_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::sync, &SyncConfig::local_sgd>{"sync.local_sgd", f}
      .add<&LocalSgdConfig::period>("period", at_least(1))
      .add<&LocalSgdConfig::warmup_steps>("warmup_steps", at_least(0))
      .add<&LocalSgdConfig::reducer>("reducer")
      .add<&LocalSgdConfig::dtype>("dtype")
      .add<&LocalSgdConfig::block>("block", at_least(1))
      .add<&LocalSgdConfig::error_feedback>("error_feedback")
      .add<&LocalSgdConfig::period_schedule>("period_schedule");
  add_diloco_keys(SectionBuilder<&Recipe::sync, &SyncConfig::diloco>{"sync.diloco", f});
  add_diloco_keys(SectionBuilder<&Recipe::sync, &SyncConfig::streaming_diloco>{"sync.streaming_diloco", f})
      .add<&StreamingDilocoConfig::fragments>("fragments", closed(1, 1 << 20))
      .add<&StreamingDilocoConfig::overlap_steps>("overlap_steps", at_least(0))
      .add<&StreamingDilocoConfig::mixing>("mixing", half_open(0, 1))
      .add<&StreamingDilocoConfig::freeze>("freeze");
  SectionBuilder<&Recipe::sync, &SyncConfig::sparseloco>{"sync.sparseloco", f}
      .add<&SparseLocoConfig::period>("period", at_least(1))
      .add<&SparseLocoConfig::warmup_steps>("warmup_steps", at_least(0))
      .add<&SparseLocoConfig::outer_lr>("outer_lr", above(0))
      .add<&SparseLocoConfig::ratio>("ratio", Bound{.lo = 0, .hi = 1, .lo_open = true})
      .add<&SparseLocoConfig::chunk>("chunk", closed(2, 1 << 24))
      .add<&SparseLocoConfig::beta>("beta", closed(0, 1))
      .add<&SparseLocoConfig::dtype>("dtype")
      .add<&SparseLocoConfig::period_schedule>("period_schedule");
  SectionBuilder<&Recipe::sync, &SyncConfig::demo>{"sync.demo", f}
      .add<&DemoConfig::chunk>("chunk", closed(2, 4096))
      .add<&DemoConfig::topk>("topk", at_least(1))
      .add<&DemoConfig::beta>("beta", half_open(0, 1))
      .add<&DemoConfig::dtype>("dtype")
      .add<&DemoConfig::dct>("dct")
      .add<&DemoConfig::average>("average")
      .add<&DemoConfig::fold_lr>("fold_lr");
}

// [network] and [network.inter]: the network a simulation models.
void add_network_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::network>{"network", f}
      .add<&NetworkConfig::groups>("groups", closed(0, 1024))
      .add<&NetworkConfig::intra_bandwidth>("intra_bandwidth", above(0))
      .add<&NetworkConfig::intra_latency>("intra_latency", at_least(0))
      .add<&NetworkConfig::inter_bandwidth>("inter_bandwidth", above(0))
      .add<&NetworkConfig::inter_latency>("inter_latency", at_least(0))
      .add<&NetworkConfig::stragglers>("stragglers")
      .add<&NetworkConfig::straggler_slowdown>("straggler_slowdown", at_least(1))
      .add<&NetworkConfig::compute>("compute")
      .add<&NetworkConfig::device_tflops>("device_tflops", above(0))
      .add<&NetworkConfig::mfu>("mfu", half_open(0, 1))
      .add<&NetworkConfig::inter_link>("inter_link")
      .add<&NetworkConfig::platform>("platform")
      .add<&NetworkConfig::eager_limit_kib>("eager_limit_kib", at_least(0))
      .add<&NetworkConfig::rendezvous_round_trips>("rendezvous_round_trips", closed(0, 8))
      .add<&NetworkConfig::buffered_sends>("buffered_sends")
      .add<&NetworkConfig::streams>("streams", closed(1, 64))
      .add<&NetworkConfig::tcp_window_kib>("tcp_window_kib", at_least(0))
      .add<&NetworkConfig::tcp_initial_window_segments>("tcp_initial_window_segments", closed(0, 100000));
  SectionBuilder<&Recipe::network, &NetworkConfig::inter>{"network.inter", f}
      .add<&InterProtocolConfig::eager_limit_kib>("eager_limit_kib", at_least(0))
      .add<&InterProtocolConfig::rendezvous_round_trips>("rendezvous_round_trips", closed(0, 8))
      .add<&InterProtocolConfig::buffered_sends>("buffered_sends")
      .add<&InterProtocolConfig::tcp_initial_window_segments>("tcp_initial_window_segments", closed(0, 100000));
}

// [checkpoint] to [fault]: checkpoints, guards, elastic runs and injected faults.
void add_checkpoint_and_fault_keys(std::vector<Field>& f) {
  SectionBuilder<&Recipe::checkpoint>{"checkpoint", f}
      .add<&CheckpointConfig::every>("every", at_least(0))
      .add<&CheckpointConfig::keep_latest>("keep_latest", at_least(1))
      .add<&CheckpointConfig::dir>("dir");
  SectionBuilder<&Recipe::guards>{"guards", f}
      .add<&GuardsConfig::nonfinite>("nonfinite")
      .add<&GuardsConfig::max_consecutive_skips>("max_consecutive_skips", at_least(1))
      .add<&GuardsConfig::check_every>("check_every", at_least(0))
      .add<&GuardsConfig::straggler_factor>("straggler_factor", above(1))
      .add<&GuardsConfig::straggler_records>("straggler_records", at_least(1));
  SectionBuilder<&Recipe::elastic>{"elastic", f}
      .add<&ElasticConfig::join_timeout_s>("join_timeout_s", above(0))
      .add<&ElasticConfig::sync_timeout_s>("sync_timeout_s", above(0))
      .add<&ElasticConfig::join_wait_s>("join_wait_s", above(0))
      .add<&ElasticConfig::max_attempts>("max_attempts", closed(1, 100))
      .add<&ElasticConfig::address>("address")
      .add<&ElasticConfig::aggregate>("aggregate")
      .add<&ElasticConfig::trim_fraction>("trim_fraction", half_open(0, 0.5))
      .add<&ElasticConfig::max_norm_ratio>("max_norm_ratio", at_least(0))
      .add<&ElasticConfig::min_quorum>("min_quorum", at_least(0))
      .add<&ElasticConfig::secret_file>("secret_file");
  SectionBuilder<&Recipe::fault>{"fault", f}
      .add<&FaultConfig::kind>("kind")
      .add<&FaultConfig::rank>("rank", at_least(0))
      .add<&FaultConfig::step>("step", at_least(0));
}

}  // namespace

const std::vector<Field>& recipe_detail::builtin_schema() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> f;
    add_model_and_data_keys(f);  // in the order to_toml prints them
    add_training_keys(f);
    add_sync_keys(f);
    add_strategy_keys(f);
    add_network_keys(f);
    add_checkpoint_and_fault_keys(f);
    return f;
  }();
  return fields;
}

}  // namespace laconic
