#include "framework/train/external.h"

#include "framework/recipe/components.h"

#include <ostream>

#include "core/check.h"
#include "core/ops/dispatch.h"
#include "framework/train/banner.h"

namespace laconic {
namespace {

// The inner optimizer is the caller's: Laconic's step loop never calls this one.
class ExternalOptimizer final : public Optimizer {
 public:
  void step(ParamStore&, double) override { LC_CHECK(false, "the external model's optimizer runs in the caller"); }
  std::string describe() const override { return "the caller's optimizer"; }
  std::vector<StateTensor> state() override { return {}; }
};

// The recipe on the device of the caller's parameters (they decide: distributed.device is the
// trainer's choice of where to build a model); a recipe that asks for cuda with the parameters on
// the host is refused, before anything is written.
Recipe on_device(const Recipe& recipe, Device device) {
  if (device == Device::cpu && recipe.distributed.device == DeviceKind::cuda)
    LC_INPUT_ERROR(recipe.path, ": distributed.device = \"cuda\" but the model's parameters are on the CPU: move "
                                "the model to its GPU (model.cuda()) before lt.Sync, or set device = \"cpu\"");
  if (strategy_traits(recipe.sync.strategy.value).idles)
    LC_INPUT_ERROR(recipe.path, ": sync.strategy = \"", recipe.sync.strategy.value,
                   "\": its slower replicas skip steps, which laconic.torch's step loop does not do: run it with the trainer");
  // ZeRO-1 and -2 step the optimizer on a shard; laconic.torch's optimizer is the caller's, over whole tensors.
  if (shards_optimizer(recipe.sync.shard))
    LC_INPUT_ERROR(recipe.path, ": sync.shard = \"", name_of(recipe.sync.shard), "\": the optimizer here is the script's own, over whole "
                   "tensors; shard its state with torch's ZeroRedundancyOptimizer or FSDP (docs/torch.md), and Laconic's outer "
                   "state with sync.shard = \"outer\"");
  Recipe r = recipe;
  r.distributed.device = device == Device::cuda ? DeviceKind::cuda : DeviceKind::cpu;
  return r;
}

}  // namespace

ExternalModel::ExternalModel(const std::vector<ExternalTensor>& tensors, double flops_per_example, std::string kind)
    : kind_(std::move(kind)) {
  if (tensors.empty()) LC_INPUT_ERROR("laconic.torch: the model has no parameter that needs a gradient");
  for (const ExternalTensor& t : tensors) {
    for (const std::int64_t d : t.shape)
      if (d <= 0) LC_INPUT_ERROR("laconic.torch: parameter ", t.name, ": expected every dimension > 0, got ", d);
    // Weights (2-D and more) decay; biases and norms' gains do not: what Laconic's optimizers read.
    store_.add(t.name, t.shape, t.shape.size() >= 2 ? ParamGroup::decay : ParamGroup::no_decay);
  }
  store_.finalize();
  flops_ = flops_per_example > 0 ? flops_per_example : 6.0 * static_cast<double>(store_.size());
}

ForwardResult ExternalModel::forward(const Batch&, const ForwardOptions&) {
  throw Error("an external model's forward runs in the caller (PyTorch)");
}

void ExternalModel::backward() { throw Error("an external model's backward runs in the caller (PyTorch)"); }

std::string ExternalModel::describe() const {
  return detail::concat(kind_, ", ", param_count_text(store_.size()), " parameters in ", store_.views().size(),
                        " tensors");
}

ExternalRun::ExternalRun(const Recipe& recipe, const std::vector<ExternalTensor>& tensors, ExternalOptions opts)
    : opts_(std::move(opts)),
      model_(tensors, opts_.flops_per_example, opts_.kind),
      optimizer_(std::make_unique<ExternalOptimizer>()),
      world_(std::make_unique<ProcessWorld>(on_device(recipe, opts_.device), opts_.store)),
      spec_(resolve(on_device(recipe, opts_.device), make_external_plan(recipe, model_), world_->backend(),
                    opts_.train.run_dir)) {
  if (spec_.device == Device::cuda) {
    // The GPU the rank's communicators use (its node-local rank's) must be the parameters'.
    const int want = rank_cuda_device(world_->comm());
    if (want != opts_.cuda_index)
      LC_INPUT_ERROR("laconic.torch: the model's parameters are on cuda:", opts_.cuda_index, " but rank ",
                     world_->comm().rank(), " communicates from cuda:", want,
                     " (its rank on this node modulo the GPUs it sees): torch.cuda.set_device(", want,
                     ") and build the model there, or CUDA_VISIBLE_DEVICES");
    set_cuda_device(want);
    model_.to(Device::cuda);  // the caller copies its values in, then views the store's device memory
  }
  data_.describe = "the caller's (each process reads shard data_rank of data_world)";
  ExternalOptions& o = opts_;
  if (world_->comm().rank() != 0) o.train.log = nullptr;  // rank 0 speaks for the run, as the trainer's
  life_.emplace(spec_, o.train);
  Communicator& comm = world_->comm();
  rank_ = comm.rank();
  world_size_ = comm.size();
  // The caller's library computes with the process's OpenBLAS (torch's GEMMs share its pool):
  // its threads are the caller's to set, not sized for Laconic's ranks as the trainer sizes them.
  ops::cpu::keep_gemm_threads();
  resume_ = life_->open_rank(comm, world_->control(), data_, ops::cpu::gemm_threads());
  session_.emplace(spec_, data_, life_->options(), comm, world_->control(), resume_ ? &*resume_ : nullptr,
                   life_->elastic(), model_, *optimizer_, nullptr);
  shard_ = session_->shard();
}

ExternalRun::~ExternalRun() {
  session_.reset();  // before the world and the group it talks through
  life_.reset();
  world_.reset();
}

std::int64_t ExternalRun::start() {
  state_.step = life_->guarded([&] { return session_->start(); });
  return state_.step;
}

void ExternalRun::begin_step(std::int64_t step) {
  LC_CHECK(!finished_, "the run has finished");
  const std::int64_t next = state_.step;
  if (in_step_) return;  // a step already begun (the caller's first micro-batch began it)
  LC_CHECK(step == next, "step ", step, " begun, ", next, " expected");
  if (next >= spec_.plan.steps)
    LC_INPUT_ERROR(spec_.recipe.path, ": train.steps = ", spec_.plan.steps, ": the run's steps are done (call "
                   "finish(), or raise train.steps)");
  state_ = StepState{};
  state_.step = next;
  session_->begin_step(state_, 1.0f / static_cast<float>(spec_.recipe.train.grad_accum));
  if (Tracer* t = session_->tracer()) t->span_begin(SpanKind::forward_backward);
  clock_.reset();
  in_step_ = true;
}

bool ExternalRun::reduce(double loss_sum, double loss_count, double lr) {
  LC_CHECK(in_step_, "reduce() outside a step");
  synchronize_kernels(spec_.device);  // on a GPU, the caller's backward is queued work until here
  if (Tracer* t = session_->tracer()) t->span_end(SpanKind::forward_backward);
  state_.loss_sum = loss_sum;
  state_.loss_count = loss_count;
  const bool admitted = life_->guarded([&] { return session_->reduce(state_, clock_.seconds()); });
  state_.lr = lr;  // the caller's optimizer's, not the recipe's schedule
  if (!admitted) in_step_ = false;
  return admitted;
}

void ExternalRun::optimizer_begin() {
  if (Tracer* t = session_->tracer()) t->span_begin(SpanKind::optimizer);
  clock_.reset();
}

void ExternalRun::updated() {
  synchronize_kernels(spec_.device);  // the caller's optimizer step, queued on a GPU
  if (Tracer* t = session_->tracer()) t->span_end(SpanKind::optimizer);
  life_->guarded([&] { session_->updated(state_, clock_.seconds()); });
  in_step_ = false;
}

Stop ExternalRun::end_step() {
  const std::int64_t step = state_.step;
  const Stop stop = life_->guarded([&] {
    session_->end_step(step);
    return session_->agree_to_stop(step);
  });
  state_.step = step + 1;
  return stop;
}

TrainSummary ExternalRun::finish(Stop stop) {
  LC_CHECK(!finished_, "finish() twice");
  finished_ = true;
  if (in_step_) {  // a step begun and not completed: it did not happen
    if (Tracer* t = session_->tracer()) t->span_end(SpanKind::forward_backward);
    in_step_ = false;
  }
  TrainSummary s = life_->guarded([&] { return session_->finish(state_.step, stop); });
  const TrainOptions& o = life_->options();
  session_.reset();
  world_.reset();  // every rank is done with the others (MPI finalised)
  life_->close(rank_ == 0, s);
  if (rank_ == 0 && o.log)
    *o.log << done_line(s) << (o.run_dir.empty() ? "" : "; results in " + o.run_dir + "/") << std::endl;
  return s;
}

}  // namespace laconic
