#include "framework/recipe/factory.h"
#include "framework/recipe/registry.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/topk.h"
#include "framework/sync/composite.h"
#include "compression/quantize.h"
#include "compression/sparse.h"
#include "framework/sync/demo.h"
#include "framework/sync/periodic.h"
#include "framework/sync/async_diloco.h"
#include "framework/sync/desloc.h"
#include "framework/sync/noloco.h"
#include "framework/sync/sparta.h"
#include "core/check.h"
#include "workloads/data/text_corpus.h"
#include "workloads/data/tokenizer.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
#include "workloads/data/lm.h"
#include "workloads/data/token_files.h"
#include "workloads/models/mlp.h"
#include "optimizers/adamw.h"
#include "optimizers/lamb.h"
#include "optimizers/muon.h"
#include "optimizers/lars.h"
#include "optimizers/sgd.h"

namespace laconic {
namespace {

std::string data_path(const Recipe& r) {
  if (r.data.path != "default") return r.data.path;
  return r.data.name == "text" ? kFortunesDir : kFashionMnistDir;
}

// The documents of a data.name = "text" recipe; `read` receives the loader's line on its files.
std::vector<std::string> text_documents(const Recipe& r, const LoadOptions& opts, std::string& read) {
  const std::string path = data_path(r);
  TextCorpusOptions co;
  // The fortune databases are files without an extension; a folder of the user's, data.extensions.
  co.extensions = r.data.path == "default" ? std::vector<std::string>{""} : r.data.extensions;
  co.exclude = {r.run.out_dir};
  if (!opts.cache_dir.empty()) co.exclude.push_back(opts.cache_dir);
  TextCorpusReport report;
  std::vector<std::string> docs = load_text_corpus(path, co, &report);
  read = report.describe(path);
  return docs;
}

// The tokenizer of a text recipe, trained on `docs` or loaded from the cache under opts.cache_dir.
Tokenizer text_tokenizer(const Recipe& r, const LoadOptions& opts, std::span<const std::string> docs, std::string& note) {
  TokenizerOptions to;
  to.vocab_size = r.data.vocab_size;
  to.lowercase = r.data.lowercase;
  if (opts.cache_dir.empty()) return Tokenizer::train(docs, to);
  const std::string cache = Tokenizer::cache_path(opts.cache_dir, docs, to);
  if (!opts.write_cache && !std::filesystem::exists(cache)) return Tokenizer::train(docs, to);
  if (opts.write_cache) std::filesystem::create_directories(opts.cache_dir);
  return Tokenizer::load_or_train(cache, docs, to, &note);
}

TrainData load_text(const Recipe& r, const LoadOptions& opts) {
  const std::string path = data_path(r);
  std::string read, note;
  const std::vector<std::string> docs = text_documents(r, opts, read);
  const Tokenizer tok = text_tokenizer(r, opts, docs, note);
  if (opts.note) *opts.note = note;
  const std::string noted = note.empty() ? "" : " (" + note + ")";
  if (r.model.name == "gpt") {
    LmSplits splits = build_lm_streams(docs, tok, r.data.eval_fraction);
    const std::int64_t train_windows = splits.train.windows(r.data.seq_len);
    const std::int64_t eval_windows = splits.eval.windows(r.data.seq_len);
    if (train_windows == 0 || (r.data.eval_fraction > 0 && eval_windows == 0))
      LC_INPUT_ERROR(path, ": the text corpus (", docs.size(), " documents) is too small: ", train_windows, " train / ",
                     eval_windows, " eval windows of data.seq_len = ", r.data.seq_len, " tokens");
    std::string describe = detail::concat("text: ", read, "; ", docs.size(), " documents, ", splits.train.tokens.size(),
                                          " train / ", splits.eval.tokens.size(), " eval tokens (", train_windows, " / ",
                                          eval_windows, " windows of ", r.data.seq_len, "), vocabulary ", tok.vocab_size(),
                                          noted);
    TrainData lm = token_data(std::move(splits.train), std::move(splits.eval), r.data.seq_len);
    lm.describe = std::move(describe);
    return lm;
  }
  TrainData d;
  TextDatasetOptions dopts;
  dopts.seq_len = r.data.seq_len;
  dopts.eval_fraction = r.data.eval_fraction;
  TextSplits splits = build_text_datasets(docs, tok, dopts);
  MlmOptions mopts;
  mopts.mask_prob = r.data.mask_prob;
  d.vocab = tok.vocab_size();
  d.seq_len = r.data.seq_len;
  d.baseline_loss = unigram_entropy(splits.eval.size() > 0 ? splits.eval : splits.train);
  d.describe = detail::concat("text: ", read, "; ", docs.size(), " documents, ", splits.train.size(),
                              " train / ", splits.eval.size(), " eval sequences of ", r.data.seq_len,
                              " tokens, vocabulary ", d.vocab, noted);
  auto train = std::make_shared<TokenDataset>(std::move(splits.train));
  d.train = std::make_shared<MlmSource>(train, mopts);
  if (splits.eval.size() > 0) d.eval = std::make_shared<MlmSource>(std::make_shared<TokenDataset>(std::move(splits.eval)), mopts);
  return d;
}

// Pre-tokenized files (llm.c's .bin): the recipe's vocabulary is the files'.
TrainData load_tokens(const Recipe& r) {
  const int T = r.data.seq_len;
  TokenStream train = read_token_files(r.data.train_path.path, r.data.token_format, r.data.vocab_size, "data.train_path");
  TokenStream eval;
  eval.vocab = r.data.vocab_size;
  if (!r.data.val_path.path.empty())
    eval = read_token_files(r.data.val_path.path, r.data.token_format, r.data.vocab_size, "data.val_path");
  if (train.windows(T) == 0)
    LC_INPUT_ERROR(r.data.train_path.path, ": data.train_path: ", train.tokens.size(),
                   " tokens, too few for one window of data.seq_len = ", T, " tokens");
  if (!r.data.val_path.path.empty() && eval.windows(T) == 0)
    LC_INPUT_ERROR(r.data.val_path.path, ": data.val_path: ", eval.tokens.size(),
                   " tokens, too few for one window of data.seq_len = ", T, " tokens");
  const std::string describe = detail::concat("tokens ", r.data.train_path.path, ": ", train.tokens.size(), " train / ",
                              eval.tokens.size(), " eval tokens (", train.windows(T), " / ", eval.windows(T),
                              " windows of ", T, "), vocabulary ", r.data.vocab_size);
  TrainData d = token_data(std::move(train), std::move(eval), T);
  d.describe = describe;
  return d;
}

}  // namespace

TrainData load_data(const Recipe& r, const LoadOptions& opts) { return registry().load_data(r, opts); }

std::optional<Tokenizer> run_tokenizer(const Recipe& r, const LoadOptions& opts) {
  if (r.data.name == "text") {
    std::string read, note;
    const std::vector<std::string> docs = text_documents(r, opts, read);
    return text_tokenizer(r, opts, docs, note);
  }
  if (r.data.name == "tokens") {
    // trainer tokenize writes tokenizer.txt beside train.bin.
    const std::filesystem::path beside = std::filesystem::path(r.data.train_path.path).parent_path() / "tokenizer.txt";
    std::error_code ec;
    if (std::filesystem::is_regular_file(beside, ec)) return Tokenizer::load(beside.string());
  }
  return std::nullopt;
}

namespace {
TrainData load_fashion_mnist_data(const Recipe& r) {
  const std::string path = data_path(r);
  TrainData d = image_data(std::make_shared<ImageDataset>(load_fashion_mnist(path, Split::train)),
                           std::make_shared<ImageDataset>(load_fashion_mnist(path, Split::test)));
  d.describe = "Fashion-MNIST " + path + ": " + d.describe.substr(d.describe.find(' ') + 1);
  return d;
}
}  // namespace

namespace {
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
}  // namespace

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
  if (c.intra == IntraKind::allreduce) s = std::make_unique<Hierarchical>(std::move(s));
  return s;
}

// ---- the built-ins, registered as a user's components are (registry.h) ----

namespace {

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
  t.cuda = true;
  t.host_only = [section, key](const Recipe& r) {
    if ((r.sync.*section).dtype != Codec::fp32) return detail::concat("sync.", key, ".dtype other than fp32");
    if constexpr (requires { (r.sync.*section).sparta; })
      if ((r.sync.*section).sparta) return detail::concat("sync.", key, ".sparta = true");
    return std::string();
  };
  return t;
}

}  // namespace

// One registration each, through the API a user's components use: the name, the factory, the
// section (none here: the built-ins' sections are the recipe's typed ones, builtin_schema.cpp)
// and the traits the rest of Laconic asks.
Registry::Registry() {
  add_dataset("fashion_mnist", [](const Recipe& r, const LoadOptions&) { return load_fashion_mnist_data(r); });
  add_dataset("text", [](const Recipe& r, const LoadOptions& o) { return load_text(r, o); });
  add_dataset("tokens", [](const Recipe& r, const LoadOptions&) { return load_tokens(r); });

  add_model("mlp", [](const Recipe& r, const TrainData& data) -> std::unique_ptr<Model> {
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
  });
  add_model("bert", [](const Recipe& r, const TrainData& data) -> std::unique_ptr<Model> {
    LC_CHECK(data.vocab > 0, "BERT needs token data");
    return std::make_unique<Bert>(transformer_options<BertOptions>(r, data));
  });
  add_model("gpt", [](const Recipe& r, const TrainData& data) -> std::unique_ptr<Model> {
    LC_CHECK(data.vocab > 0, "the GPT needs token data");
    return std::make_unique<Gpt>(transformer_options<GptOptions>(r, data));
  });

  add_optimizer("sgd", [](const Recipe& r) -> std::unique_ptr<Optimizer> {
    const OptimizerConfig& c = r.optimizer;
    return std::make_unique<Sgd>(SgdOptions{c.momentum, c.nesterov, c.weight_decay});
  });
  add_optimizer("adamw", [](const Recipe& r) -> std::unique_ptr<Optimizer> {
    const OptimizerConfig& c = r.optimizer;
    return std::make_unique<AdamW>(AdamWOptions{c.beta1, c.beta2, c.eps, c.weight_decay});
  });
  add_optimizer("lars", [](const Recipe& r) -> std::unique_ptr<Optimizer> {
    const OptimizerConfig& c = r.optimizer;
    return std::make_unique<Lars>(LarsOptions{c.momentum, c.eta, c.weight_decay, 0.0});
  });
  add_optimizer("lamb", [](const Recipe& r) -> std::unique_ptr<Optimizer> {
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
  });
  add_optimizer(
      "muon",
      [](const Recipe& r) -> std::unique_ptr<Optimizer> {
        const OptimizerConfig& c = r.optimizer;
        return std::make_unique<Muon>(r.section<MuonOptions>("optimizer.muon"),
                                      AdamWOptions{c.beta1, c.beta2, c.eps, c.weight_decay});
      },
      Section<MuonOptions>()
          .add<&MuonOptions::momentum>("momentum", half_open(0.0, 1.0))
          .add<&MuonOptions::nesterov>("nesterov")
          .add<&MuonOptions::ns_steps>("ns_steps", at_least(1)));

  // Each reducer is also the gradient strategy of its name: data parallel through it. All four have
  // device implementations (compression/cuda/); the dense one's average is the exact mean.
  ReducerTraits on_device;
  on_device.cuda = true;
  ReducerTraits dense = on_device;
  dense.exact = true;
  ReducerTraits topk = on_device;
  topk.host_only = [](const Recipe& r) {
    return r.sync.topk.selection == TopKOptions::Selection::sampled ? "sync.topk.selection = \"sampled\"" : "";
  };
  add_reducer(
      "allreduce",
      [](const Recipe& r, Device device) -> std::unique_ptr<Reducer> {
        constexpr DType wire[] = {DType::f32, DType::bf16, DType::f16};
        return std::make_unique<DenseReducer>(wire[static_cast<int>(r.sync.allreduce.dtype)], device);
      },
      {}, dense);
  add_reducer(
      "topk",
      [](const Recipe& r, Device device) -> std::unique_ptr<Reducer> {
        TopKOptions o = r.sync.topk;
        o.device = device;
        return std::make_unique<TopKReducer>(o);
      },
      {}, topk);
  add_reducer(
      "powersgd",
      [](const Recipe& r, Device device) -> std::unique_ptr<Reducer> {
        PowerSgdOptions o = r.sync.powersgd;
        o.device = device;
        return std::make_unique<PowerSgdReducer>(o);
      },
      {}, on_device);
  add_reducer(
      "onebit",
      [](const Recipe& r, Device device) -> std::unique_ptr<Reducer> {
        OneBitOptions o = r.sync.onebit;
        o.device = device;
        return std::make_unique<OneBitReducer>(o);
      },
      {}, on_device);

  // Periodic strategies count their periods from their phase's first step (their warm-up is
  // shifted by it; steps before it are another phase's).
  add_strategy(
      "local_sgd",
      [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
        const LocalSgdConfig& l = r.sync.local_sgd;
        PeriodicOptions o = local_sgd_options(l.period, c.first_step + l.warmup_steps, r.sync.bucket_mb);
        o.schedule = l.period_schedule.segments;
        return std::make_unique<PeriodicAveraging>(o, make_outer_reducer(l, l.reducer, r, c.device));
      },
      {}, periodic_traits(&SyncConfig::local_sgd, "local_sgd"));
  add_strategy(
      "diloco",
      [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
        const DilocoConfig& d = r.sync.diloco;
        return std::make_unique<PeriodicAveraging>(diloco(d, r, c.first_step),
                                                   make_outer_reducer(d, d.reducer, r, c.device));
      },
      {}, periodic_traits(&SyncConfig::diloco, "diloco"));
  add_strategy(
      "streaming_diloco",
      [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
        const StreamingDilocoConfig& s = r.sync.streaming_diloco;
        PeriodicOptions o = diloco(s, r, c.first_step);
        o.fragments = s.fragments;
        o.overlap_steps = s.overlap_steps;
        o.mixing = s.mixing;
        return std::make_unique<PeriodicAveraging>(o, make_outer_reducer(s, s.reducer, r, c.device));
      },
      {}, periodic_traits(&SyncConfig::streaming_diloco, "streaming_diloco"));
  StrategyTraits sparseloco;  // host only; its own sparse reducer
  sparseloco.periodic = [](const Recipe& r) {
    const SparseLocoConfig& c = r.sync.sparseloco;
    return OuterPeriod{c.period, c.warmup_steps, longest_period(c.period, c.period_schedule), {}};
  };
  add_strategy("sparseloco", [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    const SparseLocoConfig& s = r.sync.sparseloco;
    PeriodicOptions o = diloco_options(s.period, s.outer_lr, 0.0, false, r.sync.bucket_mb);  // e replaces momentum
    o.warmup_steps = c.first_step + s.warmup_steps;
    o.schedule = s.period_schedule.segments;
    o.name = "SparseLoCo";
    const auto chunk = static_cast<std::size_t>(s.chunk);
    const auto k = static_cast<std::size_t>(std::clamp<double>(std::round(s.ratio * static_cast<double>(chunk)), 1.0,
                                                               static_cast<double>(chunk)));
    return std::make_unique<PeriodicAveraging>(o, std::make_unique<SparseLocoReducer>(SparseLocoOptions{{chunk, k, s.dtype}, s.beta}));
  }, {}, std::move(sparseloco));
  StrategyTraits demo;  // host only; keeps its own momentum and hands the optimizer sign steps
  demo.conflicts = [](const Recipe& r) -> std::optional<RecipeConflict> {
    const OptimizerConfig& o = r.optimizer;
    if (o.name == "sgd" && o.momentum == 0 && o.grad_clip == 0) return std::nullopt;
    return RecipeConflict{{"optimizer.name", "optimizer.momentum", "optimizer.grad_clip", "sync.strategy"},
                          detail::concat("optimizer: expected name = \"sgd\", momentum = 0 and grad_clip = 0 for "
                                         "sync.strategy = \"demo\" (DeMo keeps the momentum and hands the optimizer sign "
                                         "steps, whose norm is sqrt(parameters)), got name = \"", o.name, "\", momentum = ",
                                         recipe_float(o.momentum), ", grad_clip = ", recipe_float(o.grad_clip))};
  };
  add_strategy("demo", [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    const DemoConfig& d = r.sync.demo;
    return std::make_unique<Demo>(DemoOptions{static_cast<std::size_t>(d.chunk), static_cast<std::size_t>(d.topk), d.beta,
                                              d.dtype, d.dct, d.average, d.fold_lr, c.lr});
  }, {}, std::move(demo));
  add_strategy("sparta", [](const Recipe& r, const StrategyContext&) -> std::unique_ptr<SyncStrategy> {
    SpartaOptions o = r.section<SpartaOptions>("sync.sparta");
    o.seed = r.run.seed;
    return std::make_unique<Sparta>(o);
  }, Section<SpartaOptions>()
         .add<&SpartaOptions::fraction>("fraction", Bound{.lo = 0, .hi = 1, .lo_open = true})
         .add<&SpartaOptions::period>("period", at_least(1)));
  StrategyTraits desloc;  // host only; averages the optimizer's own moments, so every rank must hold them
  desloc.conflicts = [](const Recipe& r) -> std::optional<RecipeConflict> {
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
  add_strategy("desloc", [](const Recipe& r, const StrategyContext&) -> std::unique_ptr<SyncStrategy> {
    return std::make_unique<Desloc>(r.section<DeslocOptions>("sync.desloc"));
  }, Section<DeslocOptions>()
         .add<&DeslocOptions::param_period>("param_period", at_least(1))
         .add<&DeslocOptions::m_period>("m_period", at_least(1))
         .add<&DeslocOptions::v_period>("v_period", at_least(1)),
     std::move(desloc));
  // No `periodic` trait: its replicas never share an anchor, so elastic replicas and simulate
  // --failures (which run a PeriodicAveraging's quorum) do not apply.
  add_strategy("noloco", [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    NoLocoOptions o = r.section<NoLocoOptions>("sync.noloco");
    o.seed = r.run.seed;
    o.first_step = c.first_step;
    return std::make_unique<NoLoco>(o);
  }, Section<NoLocoOptions>()
         .add<&NoLocoOptions::period>("period", at_least(1))
         .add<&NoLocoOptions::outer_lr>("outer_lr", above(0))
         .add<&NoLocoOptions::momentum>("momentum", half_open(0, 1))
         .add<&NoLocoOptions::pull>("pull", at_least(0)));
  // No `periodic` trait either: its replicas never wait for one another, so there is no quorum.
  StrategyTraits async_diloco;  // host only
  async_diloco.idles = true;
  async_diloco.conflicts = [](const Recipe& r) -> std::optional<RecipeConflict> {
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
  };
  add_strategy("async_diloco", [](const Recipe& r, const StrategyContext& c) -> std::unique_ptr<SyncStrategy> {
    AsyncDilocoOptions o = r.section<AsyncDilocoOptions>("sync.async_diloco");
    o.first_step = c.first_step;
    o.last_step = r.train.steps - 1;
    const NetworkConfig& n = r.network;
    if (n.groups > 0 && !n.stragglers.ranks.empty()) {
      o.slowdown.assign(static_cast<std::size_t>(r.distributed.world_size), 1.0);
      for (const int s : n.stragglers.ranks) o.slowdown[static_cast<std::size_t>(s)] = n.straggler_slowdown;
    }
    return std::make_unique<AsyncDiloco>(o);
  }, Section<AsyncDilocoOptions>()
         .add<&AsyncDilocoOptions::period>("period", at_least(1))
         .add<&AsyncDilocoOptions::outer_lr>("outer_lr", above(0))
         .add<&AsyncDilocoOptions::momentum>("momentum", half_open(0, 1))
         .add<&AsyncDilocoOptions::delayed_nesterov>("delayed_nesterov")
         .add<&AsyncDilocoOptions::window>("window", at_least(0))
         .add<&AsyncDilocoOptions::activation>("activation", closed(0, 1))
         .add<&AsyncDilocoOptions::dylu>("dylu")
         .add<&AsyncDilocoOptions::speeds>("speeds"),
     std::move(async_diloco));
}

ScaledLr resolve_lr(const Recipe& r, std::int64_t global_batch) {
  const ScalingRule rule = r.schedule.scaling_rule;
  const std::int64_t base = r.schedule.base_batch > 0 ? r.schedule.base_batch : global_batch;
  return scale_lr(rule, r.optimizer.lr, base, global_batch, r.schedule.warmup_steps);
}

LrSchedule make_schedule(const Recipe& r, std::int64_t global_batch, std::int64_t steps) {
  const ScaledLr lr = resolve_lr(r, global_batch);
  ScheduleOptions s;
  s.peak_lr = lr.lr;
  s.warmup_steps = lr.warmup_steps;
  s.total_steps = steps;
  s.decay = r.schedule.decay;
  s.min_ratio = r.schedule.min_lr_ratio;
  s.power = r.schedule.power;
  return LrSchedule(s);
}

}  // namespace laconic
