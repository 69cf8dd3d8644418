#include "framework/train/run_spec.h"

#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "framework/train/checkpoint.h"
#include "workloads/weights/model_weights.h"
#include "core/launcher.h"

namespace laconic {

namespace {

// What both plans check: the learning rate after its scaling rule, and a strategy's needs that
// the model's tensors decide.
void plan_common(const Recipe& r, const ParamStore& store, TrainPlan& p) {
  const ScaledLr lr = resolve_lr(r, p.global_batch);
  p.lr = lr.lr;
  p.warmup_steps = lr.warmup_steps;
  p.parameters = static_cast<std::int64_t>(store.size());
  const bool streaming = uses_strategy(r.sync, "streaming_diloco");
  const std::size_t tensors = store.views().size();
  if (streaming && static_cast<std::size_t>(r.sync.streaming_diloco.fragments) > tensors)
    LC_INPUT_ERROR(r.path, ": sync.streaming_diloco.fragments: expected at most ", tensors,
                   " (the model's tensors: a fragment is a run of whole tensors), got ", r.sync.streaming_diloco.fragments);
}

}  // namespace

TrainPlan make_plan(const Recipe& r, const TrainData& data) {
  LC_CHECK(data.train, "no training data");
  TrainPlan p;
  p.global_batch = static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum * r.distributed.world_size;
  p.steps_per_epoch = data.train->size() / p.global_batch;
  if (p.steps_per_epoch == 0)
    LC_INPUT_ERROR(r.path, ": the global batch (micro_batch ", r.train.micro_batch, " x grad_accum ",
                   r.train.grad_accum, " x world_size ", r.distributed.world_size, " = ", p.global_batch,
                   ") is larger than the training set (", data.train->size(), " examples)");
  p.steps = r.train.steps > 0 ? r.train.steps
                              : static_cast<std::int64_t>(std::ceil(r.train.epochs * static_cast<double>(p.steps_per_epoch)));
  p.steps = std::max<std::int64_t>(1, p.steps);
  const auto model = make_model(r, data);
  p.model = model->describe();
  // Checked here, before any file of the run is written.
  if (!r.model.init_from.empty()) {
    p.init_weights = std::make_shared<const SafeTensorsFile>(read_model_safetensors(r.model.init_from.path, *model));
    load_model_weights(*p.init_weights, r.model.init_from.path, *model, "model.init_from");
  }
  plan_common(r, model->params(), p);
  return p;
}

TrainPlan make_external_plan(const Recipe& r, Model& model) {
  if (r.train.steps <= 0)
    LC_INPUT_ERROR(r.path, ": train.steps: expected the number of optimizer steps (> 0): a model trained from "
                   "Python reads its own data, so train.epochs cannot size the run; got train.steps = ", r.train.steps);
  if (!r.model.init_from.empty())
    LC_INPUT_ERROR(r.path, ": model.init_from: the torch model brings its own weights; load them in PyTorch and "
                   "leave model.init_from unset");
  TrainPlan p;
  p.global_batch = static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum * r.distributed.world_size;
  p.steps = r.train.steps;
  p.model = model.describe();
  p.external = true;
  plan_common(r, model.params(), p);
  return p;
}

std::string recipe_identity(const Recipe& recipe) {
  // What decides the numbers only: not where the run is written, how often it logs, evaluates
  // or checkpoints, when it stops for time, nor the fault injected into it.
  Recipe r = recipe;
  r.path.clear();
  r.run.name = RunConfig{}.name;
  r.run.out_dir = RunConfig{}.out_dir;
  r.train.log_every = TrainConfig{}.log_every;
  r.train.eval_every = TrainConfig{}.eval_every;
  r.train.trace = TrainConfig{}.trace;
  r.train.time_limit = TrainConfig{}.time_limit;
  r.checkpoint = CheckpointConfig{};
  r.guards.check_every = GuardsConfig{}.check_every;
  r.guards.straggler_factor = GuardsConfig{}.straggler_factor;
  r.guards.straggler_records = GuardsConfig{}.straggler_records;
  r.fault = FaultConfig{};
  r.elastic = ElasticConfig{};
  return to_toml(r);
}

std::string recipe_hash(const Recipe& recipe) { return hash_text(recipe_identity(recipe)); }

std::string checkpoint_root(const Recipe& recipe, const std::string& run_dir) {
  const std::filesystem::path dir(recipe.checkpoint.dir);
  if (dir.is_absolute()) return dir.string();
  // No run directory: nothing is written (TrainOptions::run_dir), so no checkpoints either, rather
  // than a checkpoints/ in whatever directory the caller happens to be in.
  if (run_dir.empty()) return "";
  return (std::filesystem::path(run_dir) / dir).string();
}

BackendKind resolve_backend(const Recipe& recipe) {
  const BackendKind b = recipe.distributed.backend;
  if (b == BackendKind::gloo)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"gloo\" is for processes that laconic.torch trains (started "
                                "with LACONIC_RANK, LACONIC_WORLD_SIZE, LACONIC_STORE); the trainer's ranks are threads "
                                "or MPI processes: use \"auto\", \"threads\" or \"mpi\"");
#ifdef LACONIC_HAVE_MPI
  const bool launched = launched_by_mpi_launcher();
  const BackendKind resolved = b == BackendKind::auto_ ? (launched ? BackendKind::mpi : BackendKind::threads) : b;
  if (resolved == BackendKind::threads && b == BackendKind::threads && launched)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend = \"threads\" but this process was started by mpirun "
                                "(every process would train alone): use backend \"auto\" or \"mpi\"");
  if (resolved == BackendKind::mpi && recipe.distributed.streams > 1)
    LC_INPUT_ERROR(recipe.path, ": distributed.streams = ", recipe.distributed.streams,
                   " on the mpi backend: OpenMPI's TCP transport gained nothing from several connections per peer "
                   "(btl_tcp_links, docs/benchmarks.md); several streams are for gloo ranks and elastic replicas");
  return resolved;
#else
  if (b == BackendKind::mpi)
    LC_INPUT_ERROR(recipe.path, ": distributed.backend: expected \"threads\" or \"auto\", got \"mpi\" "
                                "(this build has no MPI: apt-get install libopenmpi-dev and rebuild)");
  return BackendKind::threads;
#endif
}

Device resolve_device(const Recipe& recipe) {
  if (recipe.distributed.device == DeviceKind::cpu) return Device::cpu;
  if (!built_with_cuda())
    LC_INPUT_ERROR(recipe.path, ": distributed.device = \"cuda\" but this build has no CUDA (install the CUDA "
                                "toolkit and configure with -DLACONIC_CUDA=ON), or use device = \"cpu\"");
  if (!cuda_available())
    LC_INPUT_ERROR(recipe.path, ": distributed.device = \"cuda\" but no CUDA device is visible to this process "
                                "(no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them); use device = \"cpu\"");
  if (const std::string what = host_only_use(recipe); !what.empty())  // a recipe built in code, unparsed
    LC_INPUT_ERROR(recipe.path, ": distributed.device: expected \"cpu\" with ", what,
                   " (it runs on host buffers), got \"cuda\"");
  if (recipe.sync.intra == IntraKind::allreduce)
    LC_INPUT_ERROR(recipe.path, ": sync.intra = \"allreduce\" (hierarchical sync) runs on host buffers only; "
                                "with device = \"cuda\" leave sync.intra unset");
  return Device::cuda;
}

RunSpec resolve(const Recipe& recipe, const TrainData& data, const std::string& run_dir) {
  const BackendKind backend = resolve_backend(recipe);  // "auto" settled once: mpi under an MPI launcher, else threads
  return resolve(recipe, make_plan(recipe, data), backend, run_dir);
}

RunSpec resolve(const Recipe& recipe, TrainPlan plan, BackendKind backend, const std::string& run_dir) {
  RunSpec s;
  s.recipe = recipe;
  const Recipe& r = s.recipe;
  s.plan = std::move(plan);
  s.backend = backend;
  if (uses_strategy(r.sync, "streaming_diloco") && r.sync.streaming_diloco.overlap_steps > 0 &&
      s.backend == BackendKind::mpi)
    LC_INPUT_ERROR(r.path, ": sync.streaming_diloco.overlap_steps: expected 0 with the mpi backend (an outer "
                   "all-reduce across steps needs the threads backend), got ", r.sync.streaming_diloco.overlap_steps);
  s.device = resolve_device(r);  // cuda without CUDA or a device is bad input
  s.simulate = r.network.groups > 0;
  s.overlap = r.sync.overlap && r.guards.nonfinite != NonfiniteKind::skip;
  s.live_clock = s.simulate && !s.overlap;
  s.identity = recipe_identity(r);
  s.hash = hash_text(s.identity);
  s.checkpoint_root = checkpoint_root(r, run_dir);
  if (r.train.trace.resolve(s.simulate)) {
    if (!run_dir.empty()) s.trace_dir = (std::filesystem::path(run_dir) / "trace").string();
    else if (r.train.trace.value) s.notes.push_back("train.trace = true: no run directory to write trace/ to; not traced");
  }
  if (s.simulate && s.trace_dir.empty() && !run_dir.empty())
    s.notes.push_back(s.live_clock ? "train.trace = false: the run is not replayed; sim_time_s is the live alpha-beta estimate"
                                   : "train.trace = false: the run is not replayed, and with overlapped reductions there is "
                                     "no live estimate either: no sim_time_s");
  if (r.checkpoint.every > 0 && s.checkpoint_root.empty())
    LC_INPUT_ERROR(r.path, ": checkpoint.every = ", r.checkpoint.every,
                   " needs a run directory or an absolute checkpoint.dir");
  // The noise scale compares per-worker and averaged gradients: it needs more than one worker's
  // examples per step and the exact average (a compressed one, or averaged velocities, would bias
  // |G|^2). Refusing would break `trainer compare --vary sync.strategy=...` of a recipe that
  // estimates it, so a run where it cannot apply says so and trains without it.
  if (r.train.noise_scale) {
    const std::int64_t local = static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum;
    const bool exact = r.sync.phases.phases.empty() && strategy_traits(r.sync.strategy.value).exact_average;
    const char* why = !exact ? "a strategy that averages gradients exactly (sync.strategy = \"allreduce\")"
                      : r.sync.momentum != 0                 ? "sync.momentum = 0 (averaged gradients, not velocities)"
                      : s.plan.global_batch <= local         ? "more than one worker (global batch > micro_batch x grad_accum)"
                      : r.sync.shard == ShardKind::gradients && r.train.grad_accum > 1
                          ? "train.grad_accum = 1 under sync.shard = \"gradients\" (each micro-batch is reduced as "
                            "backward makes it: no rank holds its whole local gradient)"
                          : nullptr;
    s.noise_scale = why == nullptr;
    if (why) s.notes.push_back(detail::concat("train.noise_scale is not estimated in this run: it needs ", why));
  }
  return s;
}

}  // namespace laconic
