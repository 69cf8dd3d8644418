// A recipe: the TOML file parsed once into typed, validated structs. Nothing below recipe/ sees
// a string that should have been an enum. Defaults here are the defaults users get; docs in
// docs/recipes.md ("Recipe reference") list them. An option a domain has (an all-reduce
// algorithm, a reducer's options, a schedule's decay) is that domain's own enum or options struct,
// embedded here: adding a recipe key is the field plus one line in builtin_schema()
// (builtin_schema.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/communicator.h"
#include "framework/recipe/components.h"
#include "framework/recipe/schema.h"
#include "collectives/netsim/topology.h"
#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/quantize.h"
#include "compression/topk.h"
#include "framework/sync/demo.h"
#include "framework/sync/periodic.h"
#include "workloads/data/source.h"  // EvalSplit
#include "workloads/data/token_files.h"
#include "framework/elastic/aggregate.h"
#include "workloads/models/mlp.h"
#include "optimizers/schedule.h"

namespace laconic {

enum class BackendKind { auto_, threads, mpi, gloo };
enum class ComputeKind { measured, modeled };

enum class DeviceKind { cpu, cuda };
// How ranks synchronise (sync.strategy, a StrategyName: components.h): gradients every step,
// exactly (allreduce) or compressed with error feedback (topk, powersgd, onebit, and any
// registered reducer); or parameters every H steps (local_sgd, diloco, streaming_diloco,
// sparseloco); or DeMo's decoupled momentum every step (demo). The reducers local_sgd and diloco
// average through are ReducerNames (allreduce, topk, powersgd, onebit, registered ones).
// Hierarchical composition: none = the strategy spans all ranks; allreduce = ranks of one
// network group average gradients densely every step and the strategy runs between groups.
enum class IntraKind { none, allreduce };
// sync.shard: what each rank of a data-parallel group keeps only its 1/N of (docs/sharding.md).
// "optimizer" shards the inner optimizer (ZeRO-1) and, under a periodic strategy, its outer
// state; "gradients" the gradients too (ZeRO-2); "outer" the outer state only (laconic.torch,
// whose optimizer is the script's).
enum class ShardKind { none, optimizer, outer, gradients };
// Whether the inner optimizer steps a shard (ZeRO-1 or ZeRO-2).
constexpr bool shards_optimizer(ShardKind k) { return k == ShardKind::optimizer || k == ShardKind::gradients; }
enum class WireKind { fp32, bf16, fp16 };        // dense all-reduce wire format

struct RunConfig {
  std::string name = "run";       // run directory name under out_dir
  std::uint64_t seed = 0;
  std::string out_dir = "runs";

  bool operator==(const RunConfig&) const = default;
};

struct ModelConfig {
  ModelName name = "mlp";  // mlp, bert, gpt, or a registered model
  std::vector<int> hidden = {512, 256};  // hidden layer widths
  MlpActivation activation = MlpActivation::relu;
  float dropout = 0.0f;                   // mlp: after each hidden activation; bert: everywhere
  bool layernorm = false;                 // mlp: layernorm after each hidden linear
  // bert, gpt: width, blocks, attention heads, feed-forward width
  int dim = 128;
  int layers = 2;
  int heads = 4;
  int ffn = 512;
  // A safetensors file to start from instead of the seed's initialisation (trainer export writes
  // them; names and shapes are the model's export layout: Hugging Face's for bert and gpt)
  FilePath init_from;

  bool operator==(const ModelConfig&) const = default;
};

struct DataConfig {
  DataName name = "fashion_mnist";  // fashion_mnist, text, tokens, or a registered dataset
  std::string path = "default";  // "default": the dataset's Debian location (fashion-mnist, fortunes)
  // text (bert: masked language modelling; gpt: next-token prediction) and tokens (gpt):
  int seq_len = 128;             // tokens per sequence ([CLS] included for bert; the context for gpt)
  int vocab_size = 4000;         // text: the BPE vocabulary to learn; tokens: the files' vocabulary
  double eval_fraction = 0.05;   // text: documents held out for evaluation
  // The held-out examples evaluated: all, or the first (validation) or second (test) half, so that
  // `trainer compare --tune` chooses on one and reports the other (workloads/data/source.h)
  EvalSplit eval_split = EvalSplit::all;
  double mask_prob = 0.15;       // bert: positions predicted (80% [MASK], 10% random, 10% kept)
  // text: the files read inside a folder ("" = no extension; data.path = "default", the fortune
  // databases, always reads those). Hidden folders, run directories and run.out_dir are skipped.
  std::vector<std::string> extensions = {".txt"};
  bool lowercase = true;         // text: the tokenizer folds A-Z to a-z (workloads/data/tokenizer.h)
  // tokens: pre-tokenized files, glob patterns (workloads/data/token_files.h); val_path "" = no evaluation
  FilePath train_path;
  FilePath val_path;
  TokenFormat token_format = TokenFormat::llmc;  // llm.c's header, or "u16": headerless uint16 (nanoGPT)

  bool operator==(const DataConfig&) const = default;
};

struct TrainConfig {
  std::int64_t steps = 0;    // optimizer steps; 0 = derive from epochs
  double epochs = 0.0;       // used when steps == 0
  int micro_batch = 64;      // examples per rank per step
  int grad_accum = 1;        // micro-batches per optimizer step
  std::int64_t eval_every = 0;  // steps between evaluations (0 = only at the end)
  std::int64_t log_every = 50;  // steps between log lines / metrics.jsonl records
  bool noise_scale = false;     // estimate the gradient noise scale B_simple (McCandlish et al. 2018);
                                // only with sync.strategy = "allreduce" and sync.momentum = 0
  AutoBool trace;               // the event trace in trace/ (collectives/trace.h); auto: with [network]
  // Stop cleanly, with a checkpoint, before this much time has passed since training started
  // (e.g. "3h50m" under a 4-hour scheduler limit; framework/train/stop.h); 0 = none
  Duration time_limit;
  // The GEMMs' arithmetic: fp32, or bf16 operands with fp32 sums and fp32 master weights, optimizer
  // and reductions, as torch.autocast (workloads/nn/precision.h)
  nn::Precision precision = nn::Precision::fp32;
  // TensorBoard events of every metrics record in RUN/tensorboard, live, through tensorboard's own
  // writer (framework/train/tensorboard.h; laconic.torch: its tensorboard= argument)
  bool tensorboard = false;

  bool operator==(const TrainConfig&) const = default;
};

struct OptimizerConfig {
  OptimizerName name = "sgd";  // sgd, adamw, lars, lamb, muon, or a registered optimizer
  double lr = 0.1;           // peak learning rate at schedule.base_batch (see scaling_rule)
  double momentum = 0.9;     // sgd, lars
  bool nesterov = false;     // sgd
  double weight_decay = 0.0; // weights only (not biases or norm parameters)
  double beta1 = 0.9;        // adamw, lamb
  double beta2 = 0.999;
  double eps = 1e-8;
  double eta = 0.001;        // lars trust coefficient
  double trust_min = 0.0;    // lamb trust-ratio clamp; 0 = none
  double trust_max = 0.0;
  // lamb: adapt (trust ratio) every decay-group tensor even at weight_decay = 0 (the paper's rule);
  // false: only when weight_decay > 0, as NVIDIA apex's FusedLAMB (optimizers/lamb.h)
  bool trust_without_decay = false;
  double grad_clip = 0.0;    // clip the global gradient norm (after averaging) to this; 0 = off

  bool operator==(const OptimizerConfig&) const = default;
};

struct ScheduleConfig {
  std::int64_t warmup_steps = 0;  // linear warmup from 0 to lr
  LrDecay decay = LrDecay::constant;
  double min_lr_ratio = 0.0;      // cosine/poly decay to lr * min_lr_ratio at the last step
  double power = 1.0;             // poly decay exponent (1 = linear)
  ScalingRule scaling_rule = ScalingRule::none;  // lr (and warmup) from base_batch to the global batch
  std::int64_t base_batch = 0;    // the batch optimizer.lr and warmup_steps are given for; 0 = global batch

  bool operator==(const ScheduleConfig&) const = default;
};

struct DistributedConfig {
  BackendKind backend = BackendKind::auto_;
  DeviceKind device = DeviceKind::cpu;
  int world_size = 1;
  double timeout_s = 300.0;
  // native = the backend's own (MPI_Allreduce; our ring on threads), auto_ = chosen per message
  // by the alpha-beta cost model of the [network] (or a size rule).
  Algorithm algorithm = Algorithm::native;
  // TCP connections per pair of ranks on the gloo backend and between elastic replicas: a message
  // of 64 KiB or more travels split over them (collectives/gloo/gloo_communicator.h), so a long fat
  // pipe carries k windows per round trip instead of one. Not on MPI: OpenMPI 4.1's TCP transport
  // gained nothing from several connections (btl_tcp_links) on the delay line (docs/benchmarks.md).
  int streams = 1;

  bool operator==(const DistributedConfig&) const = default;
};

// [sync.allreduce]
struct AllReduceConfig {
  WireKind dtype = WireKind::fp32;  // bf16 / fp16: half the bytes, fp32 arithmetic
  bool operator==(const AllReduceConfig&) const = default;
};

// A period schedule: [{steps = N, period = H}, ...] (periodic.h's PeriodSegment); empty = `period`.
struct PeriodSchedule {
  std::vector<PeriodSegment> segments;
  bool operator==(const PeriodSchedule&) const = default;
};

// What every periodic strategy's section holds besides its period: the pseudo-gradient's codec
// (compression/quantize.h; fp32 = the `reducer`, dense by default, else the block codec's
// two-phase all-reduce) and the H schedule.
struct OuterCodecConfig {
  Codec dtype = Codec::fp32;
  std::int64_t block = 256;           // elements per fp32 scale
  bool error_feedback = false;        // the codec's residuals carried to the next sync
  PeriodSchedule period_schedule;
  bool operator==(const OuterCodecConfig&) const = default;
};

// [sync.local_sgd] (Lin et al. 2020, post-local SGD): H local steps, then parameters averaged.
struct LocalSgdConfig : OuterCodecConfig {
  std::int64_t period = 8;            // H
  std::int64_t warmup_steps = 0;      // average gradients every step before this step
  ReducerName reducer = "allreduce";
  bool operator==(const LocalSgdConfig&) const = default;
};

// [sync.diloco] (Douillard et al. 2023): H inner steps of the [optimizer], then the averaged
// pseudo-gradient theta_global - theta_local drives an outer SGD step on theta_global.
struct DilocoConfig : OuterCodecConfig {
  std::int64_t period = 50;           // H (the paper: 500; INTELLECT-1: 100)
  std::int64_t warmup_steps = 0;      // average gradients every step before this step
  double outer_lr = 0.7;
  double outer_momentum = 0.9;        // SGD's momentum; Adam's beta1
  bool nesterov = true;
  OuterOptimizer outer_optimizer = OuterOptimizer::sgd;
  double outer_beta2 = 0.999;         // adam only
  double outer_eps = 1e-8;            // adam only
  ReducerName reducer = "allreduce";
  bool eager = false;                 // Kale et al. 2025: the all-reduce overlaps the next period (periodic.h)
  bool sparta = false;                // SPARTA between syncs, with [sync.sparta]'s fraction and period
  bool operator==(const DilocoConfig&) const = default;
};

// [sync.streaming_diloco] (Douillard et al. 2025): DiLoCo's keys, on F staggered fragments whose
// outer all-reduce overlaps tau inner steps and is mixed back with alpha (periodic.h).
struct StreamingDilocoConfig : DilocoConfig {
  int fragments = 2;                  // F
  std::int64_t overlap_steps = 1;     // tau (< every period)
  double mixing = 0.5;                // alpha in [0, 1)
  bool freeze = false;                // the paper's ablation: train only the fragment synced next (periodic.h)
  bool operator==(const StreamingDilocoConfig&) const = default;
};

// [sync.sparseloco] (Sarfi et al. 2025): every H inner steps each rank folds its pseudo-gradient
// into an error-feedback accumulator e = beta * e + Delta (in place of outer momentum), sends the
// top-k of every chunk of e, its values quantized (`dtype`, one scale per chunk), keeps what it
// did not send in e, and the averaged sparse update moves theta_global by outer_lr
// (compression/sparse.h).
struct SparseLocoConfig {
  std::int64_t period = 50;           // H
  std::int64_t warmup_steps = 0;
  double outer_lr = 1.0;
  double ratio = 1.0 / 64;            // kept per chunk (the paper: 1-3%)
  std::int64_t chunk = 4096;          // elements per top-k chunk: log2(chunk) bits per index
  double beta = 0.95;                 // the accumulator's decay
  Codec dtype = Codec::int2;          // the kept values (the paper: 2 bits)
  PeriodSchedule period_schedule;
  bool operator==(const SparseLocoConfig&) const = default;
};

// [sync.demo] (Peng, Quesnelle & Kingma 2024), as the reference implementation (bloc97/DeMo):
// every step each rank folds its gradient into its own momentum m = beta * m + lr * g, sends the
// `topk` largest 2-D DCT-II coefficients of every block of up to chunk x chunk of each tensor of m
// (and removes them from m), and the sign of the decoded average (each coefficient averaged over
// the ranks that sent it) is the gradient the [optimizer] (sgd without momentum:
// theta -= lr * (sign + weight_decay * theta)) applies. fold_lr = false, dct = "1d" and
// average = "ranks" select the earlier variants (framework/sync/demo.h).
struct DemoConfig {
  std::int64_t chunk = 64;            // 2d: block side per dimension (at most); 1d: elements per chunk
  std::int64_t topk = 32;             // coefficients sent per block (the reference: 32 of 64 x 64)
  double beta = 0.999;                // momentum decay
  Codec dtype = Codec::fp32;          // the coefficients' values on the wire
  DemoDct dct = DemoDct::two_d;       // 2-D blocks of each matrix, or 1-D chunks of the flattened tensor
  DemoAverage average = DemoAverage::senders;  // each coefficient over the ranks that sent it, or over all
  bool fold_lr = true;                // the learning rate scales the gradient into the momentum
  bool operator==(const DemoConfig&) const = default;
};

// One phase of a strategy schedule: `strategy` for `steps` optimizer steps (0 = to the end).
struct SyncPhase {
  StrategyName strategy = "allreduce";
  std::int64_t steps = 0;
  bool operator==(const SyncPhase&) const = default;
};
struct SyncPhases {
  std::vector<SyncPhase> phases;  // empty: sync.strategy for the whole run
  bool operator==(const SyncPhases&) const = default;
};

struct SyncConfig {
  StrategyName strategy = "allreduce";
  double bucket_mb = 25.0;
  bool overlap = true;  // reduce each bucket while backward continues
  double momentum = 0;  // momentum correction: reduce local velocities (optimizer momentum 0)
  AllReduceConfig allreduce;
  // [sync.topk], [sync.powersgd], [sync.onebit]: the reducers' own options (their device is the
  // run's). The recipe's defaults differ from the reducers' where noted: PowerSGD starts
  // compressing at step 100 (torch: 1000) and 1-bit after 100 dense steps.
  TopKOptions topk;
  PowerSgdOptions powersgd{.start_iter = 100};
  OneBitOptions onebit{.warmup_steps = 100};
  LocalSgdConfig local_sgd;
  DilocoConfig diloco;
  StreamingDilocoConfig streaming_diloco;
  SparseLocoConfig sparseloco;
  DemoConfig demo;
  IntraKind intra = IntraKind::none;
  ShardKind shard = ShardKind::none;
  SyncPhases phases;  // e.g. [{strategy = "allreduce", steps = 500}, {strategy = "powersgd"}]

  bool operator==(const SyncConfig&) const = default;
};

// [network.inter]: the protocol of messages between groups (sim/replay.h InterTier), each key
// "auto" by default: [network]'s key, which then holds for every link, as before the table existed.
// Set, [network]'s protocol keys describe the links inside a group (NCCL, shared memory) and
// these the ones between (TCP). Streams and window stay [network]'s: a window binds only where the
// round trip is long, between groups.
struct InterProtocolConfig {
  AutoNumber<double> eager_limit_kib;
  AutoNumber<int> rendezvous_round_trips;
  AutoBool buffered_sends;
  AutoNumber<int> tcp_initial_window_segments;
  bool operator==(const InterProtocolConfig&) const = default;
};

// The simulated network (collectives/netsim): ranks in `groups` groups of consecutive ranks
// (nodes or datacenters), one link tier inside a group and one between groups. Every message is
// charged its latency + bytes / bandwidth on a per-rank virtual clock, so a run reports the time
// it would take on the described cluster (metrics sim_time_s). groups = 0: no simulation.
struct NetworkConfig {
  int groups = 0;
  Bandwidth intra_bandwidth{100e9 / 8};  // 100 Gbit/s
  Duration intra_latency{5e-6};
  Bandwidth inter_bandwidth{1e9 / 8};    // 1 Gbit/s
  Duration inter_latency{30e-3};
  RankList stragglers;                   // ranks whose compute is slowed down
  double straggler_slowdown = 1.0;       // compute time factor for the stragglers (>= 1)
  ComputeKind compute = ComputeKind::measured;  // measured here, or modeled from FLOPs
  double device_tflops = 989.0;          // modeled: peak dense TFLOP/s of the described device
  double mfu = 0.4;                      // modeled: fraction of peak the model step achieves
  InterLink inter_link = InterLink::shared;  // replay: one uplink per group, or a link per rank pair
  FilePath platform;                     // replay: a SimGrid platform file instead (its first N hosts)
  // replay: the message library's protocol (sim/replay.h MessageProtocol): a message above
  // eager_limit_kib makes rendezvous_round_trips request / clear-to-send exchanges with its receiver
  // before the rest flows (0: eager); a buffered send is done once handed to the transport (a
  // socket buffer), an unbuffered one once it has arrived. OpenMPI over TCP: 64, 1, true.
  double eager_limit_kib = 64;           // OpenMPI's TCP transport's default eager limit
  double rendezvous_round_trips = 0;     // a whole number (a number key: runs recorded before read back)
  bool buffered_sends = false;
  // replay: TCP connections per pair of ranks (as distributed.streams: a message of 64 KiB or more
  // split over them), and each connection's window (0: unbounded): a connection carries at most
  // tcp_window_kib per round trip of its route, so one stream through a long fat pipe is held to
  // window / RTT and k streams to k times that (until they fill the link).
  int streams = 1;
  double tcp_window_kib = 0;
  // replay: TCP's slow start (sim/replay.h TransportModel): each connection starts with this many
  // segments of 1448 bytes and doubles its window every round trip until it holds the route's
  // bandwidth-delay product (Linux: 10); 0: every connection is open from the start.
  int tcp_initial_window_segments = 0;
  InterProtocolConfig inter;             // between groups, where it differs
  bool operator==(const NetworkConfig&) const = default;
};

// [checkpoint]: the whole training state every `every` steps (0 = never), committed atomically;
// `trainer --resume auto` continues from the newest complete one.
struct CheckpointConfig {
  std::int64_t every = 0;
  int keep_latest = 2;
  std::string dir = "checkpoints";  // relative paths are under the run directory
  bool operator==(const CheckpointConfig&) const = default;
};

// [guards]: what a non-finite gradient does (abort the run, or skip the step on every rank), and
// how often replicas compare a 64-bit hash of their parameters (0 = never).
enum class NonfiniteKind { abort, skip };
struct GuardsConfig {
  NonfiniteKind nonfinite = NonfiniteKind::abort;
  std::int64_t max_consecutive_skips = 10;
  std::int64_t check_every = 0;
  // A rank whose compute per step exceeds straggler_factor x the median over ranks in
  // straggler_records metrics records in a row is named in one warning line.
  double straggler_factor = 1.5;
  std::int64_t straggler_records = 3;
  bool operator==(const GuardsConfig&) const = default;
};

// [fault]: for tests of the failure paths: rank `rank` fails at step `step` by throwing, exiting
// the process, stalling (it stops answering), producing NaN gradients, or (crash) being killed by
// SIGKILL in the middle of writing the checkpoint of step `step`.
enum class FaultKind { none, throw_, exit, stall, nan, crash };
struct FaultConfig {
  FaultKind kind = FaultKind::none;
  int rank = 0;
  std::int64_t step = 0;
  bool operator==(const FaultConfig&) const = default;
};

// [elastic]: elastic periodic training (framework/elastic, `trainer elastic`): how long an outer
// sync's quorum waits for replicas that have not arrived, how long connecting, each reduction step
// and the members' verdicts may take before a replica is dropped and the sync retried, how long
// a joining replica waits to be admitted, how many rounds one sync may take, the address the
// replica's gloo ranks listen on (another machine's replicas must reach it), and how the members'
// pseudo-gradients are combined (framework/elastic/aggregate.h). Not part of the recipe hash: the
// timeouts change when replicas give up, and the replicas agree on the aggregation rule at every
// sync (a replica with another rule is out of step and dropped).
struct ElasticConfig {
  double join_timeout_s = 10;
  double sync_timeout_s = 30;
  double join_wait_s = 600;
  std::int64_t max_attempts = 3;
  std::string address = "127.0.0.1";
  Aggregate aggregate = Aggregate::mean;
  double trim_fraction = 0.25;
  double max_norm_ratio = 0;  // 0: no clipping
  std::int64_t min_quorum = 0;  // replicas a sync needs (members and joiners); 0: a majority of --replicas
  FilePath secret_file;         // the store's HMAC key ("": LACONIC_ELASTIC_SECRET, else unauthenticated)
  bool operator==(const ElasticConfig&) const = default;
};

struct Recipe {
  std::string path;  // the file it was read from ("" when built in code)
  RunConfig run;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  DistributedConfig distributed;
  SyncConfig sync;
  NetworkConfig network;
  CheckpointConfig checkpoint;
  GuardsConfig guards;
  FaultConfig fault;
  ElasticConfig elastic;
  // The sections of registered components ([model.my_cnn], ...): section<T>("model.my_cnn").
  SectionValues sections;

  template <typename T>
  const T& section(std::string_view name) const {
    return sections.get<T>(name);
  }

  // Field-wise (path included): to_toml() round trips and resume checks compare recipes.
  bool operator==(const Recipe&) const = default;
};

// The recipe's own enums' spellings (core/enum_names.h), indexed by value.

inline constexpr std::array kBackendNames{"auto", "threads", "mpi", "gloo"};  // auto_ is spelled "auto" in recipes
inline constexpr std::array kDeviceNames{"cpu", "cuda"};
inline constexpr std::array kIntraNames{"none", "allreduce"};
inline constexpr std::array kShardNames{"none", "optimizer", "outer", "gradients"};
inline constexpr std::array kNonfiniteNames{"abort", "skip"};
inline constexpr std::array kFaultNames{"none", "throw", "exit", "stall", "nan", "crash"};
inline constexpr std::array kWireNames{"fp32", "bf16", "fp16"};
inline constexpr std::array kComputeNames{"measured", "modeled"};

constexpr std::span<const char* const> names(BackendKind) { return kBackendNames; }
constexpr std::span<const char* const> names(DeviceKind) { return kDeviceNames; }
constexpr std::span<const char* const> names(WireKind) { return kWireNames; }
constexpr std::span<const char* const> names(IntraKind) { return kIntraNames; }
constexpr std::span<const char* const> names(ShardKind) { return kShardNames; }
constexpr std::span<const char* const> names(NonfiniteKind) { return kNonfiniteNames; }
constexpr std::span<const char* const> names(FaultKind) { return kFaultNames; }
constexpr std::span<const char* const> names(ComputeKind) { return kComputeNames; }

// Whether the run uses `strategy`: sync.strategy, or one of sync.phases when there are phases.
bool uses_strategy(const SyncConfig& sync, std::string_view strategy);
// A float as recipe.resolved.toml prints it (shortest round trip: 0.9, 2.0, 1e-08), for messages.
std::string recipe_float(double v);
// What in this recipe runs on the host only, as its strategy's and reducer's traits say
// ("sparseloco", "sync.diloco.dtype other than fp32", "reducer \"random_k\""); "" when it can
// all run with device = "cuda".
std::string host_only_use(const Recipe& r);
// The strategies the run uses, each once: sync.strategy, or sync.phases' in order.
std::vector<std::string> strategies_in_use(const SyncConfig& sync);
// Whether the run uses component `name`: as its model, data or optimizer; a reducer as a gradient
// strategy or a periodic strategy's reducer; a strategy as sync.strategy or a phase's. Registered
// components' sections are printed (to_toml) and hashed only when used.
bool uses_component(const Recipe& r, Component c, std::string_view name);

// A recipe file (and a network file) is a regular file of at most this many bytes: a few KB in
// practice; the limit bounds the parse's memory (toml++ takes some 60 bytes per value: 30 MB for
// the 466,000 values of a 1 MB array).
inline constexpr std::uint64_t kMaxRecipeBytes = 1'000'000;

// Reads and validates a recipe, then applies CLI overrides of the form "section.key=value"
// (value in TOML syntax, bare strings allowed: "sync.strategy=allreduce", "model.hidden=[256,128]").
// Throws InputError with a one-line message: "FILE:LINE:COL: KEY: expected WHAT, got GOT
// (valid: CHOICES)" for bad recipes; "--KEY=VALUE: ..." for bad overrides.
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// `base` with its [network] replaced by the one of the TOML file at `path` (a file holding only a
// [network] table, as `trainer simulate --network` takes). InputError naming the file on bad keys.
Recipe with_network_file(const Recipe& base, const std::string& path);

// Parses recipe text (name is used in messages as the file name).
Recipe parse_recipe(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides = {});

// The fully resolved recipe as TOML (every key, defaults included); parse_recipe() of it gives
// back an equal Recipe. Written to the run directory as recipe.resolved.toml.
std::string to_toml(const Recipe& recipe);

// TOML text flattened to ("section.key", value as a recipe spells it) pairs in document order;
// nullopt if the text is not TOML. Compares recipes key by key (a resume's check, compare's
// report) without reading them as a Recipe, so a recipe of another version still compares.
using FlatToml = std::vector<std::pair<std::string, std::string>>;
std::optional<FlatToml> flatten_toml(const std::string& text);

// Enum <-> name, shared by parsing, printing and messages.
const char* name_of(BackendKind);
const char* name_of(DeviceKind);
const char* name_of(WireKind);
const char* name_of(NonfiniteKind);
const char* name_of(FaultKind);
const char* name_of(IntraKind);
const char* name_of(ShardKind);
const char* name_of(ComputeKind);

}  // namespace laconic
