#include "framework/train/session.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "collectives/netsim/cost_model.h"
#include "core/check.h"
#include "core/input.h"
#include "core/ops/dispatch.h"
#include "framework/train/memory_plan.h"
#include "framework/sync/sync_strategy.h"
#include "framework/train/checkpoint.h"
#include "framework/train/run_dir.h"
#include "framework/train/simulate.h"
#include "framework/train/stop.h"
#include "framework/train/world.h"
#include "optimizers/clip.h"

namespace laconic {
namespace {

std::uint64_t state_bytes(const std::vector<StateTensor>& state) {
  std::uint64_t n = 0;
  for (const StateTensor& t : state) n += t.data.size_bytes();
  return n;
}

// What this rank holds at the end (summary.json's memory_*): every buffer the run's state
// exposes, and the process's peak resident memory beside them.
void report_memory(RunSummary& s, const Loop& loop) {
  const ParamStore& store = loop.store();
  s.memory_weights = store.params().size_bytes();
  s.memory_gradients = store.grad_bytes();  // ZeRO-2: its staging slots
  s.memory_optimizer = state_bytes(loop.optimizer.state());
  s.memory_strategy = state_bytes(loop.sync.state());
  s.memory_buffers = loop.sync.buffer_bytes();
  s.peak_rss = peak_rss_bytes();
}

// The simulated network around the backend's communicator, when the recipe describes one.
std::unique_ptr<SimCommunicator> make_sim(const RunSpec& spec, Communicator& base) {
  if (!spec.live_clock) return nullptr;
  return std::make_unique<SimCommunicator>(base, make_topology(spec.recipe));
}

// The training communicator set up for the recipe: its algorithm and, on a described network,
// the groups that decide the link tiers and the hierarchical levels, and the cost model that picks
// the algorithm (the live clock's wrapper `sim` set them on itself already). A device
// communicator made after this shares these settings (NCCL runs its own).
Communicator& configured(Communicator& comm, const RunSpec& spec, bool sim) {
  comm.set_algorithm(spec.recipe.distributed.algorithm);
  if (spec.simulate) {
    const Topology topo = make_topology(spec.recipe);
    if (!sim) comm.set_groups(topo.group_of);
    comm.set_algorithm_chooser(make_all_reduce_chooser(topo));
  }
  return comm;
}

}  // namespace

// Between the model's last backward of a step and the sync strategy: each range of gradients
// that backward reports final is first averaged over the micro-batches and its square norm
// taken (for the noise scale), then handed on, so the strategy may start reducing it.
class GradsReady final : public GradsReadyListener {
 public:
  GradsReady(ParamStore& store, SyncStrategy& sync) : store_(store), sync_(sync) {}

  void begin_step(std::int64_t step, float scale, bool want_norm) {
    step_ = step;
    scale_ = scale;
    want_norm_ = want_norm;
    local_sq_ = 0;
    pending_ = store_.size();
  }

  void grads_ready(std::size_t from) override {
    if (from >= pending_) return;
    // Staged gradients (ZeRO-2) come a bucket at a time, each range in its own slot.
    store_.for_grads(from, pending_, [&](std::span<float> range) {
      if (scale_ != 1.0f) ops::kernels(store_.device()).scale(range.data(), scale_, range.size());
      if (want_norm_) {
        const double norm = global_grad_norm(range, store_.device());
        local_sq_ += norm * norm;
      }
    });
    pending_ = from;
    sync_.grads_ready(step_, from);
  }

  // The next micro-batch's backward, for a strategy that hears each one (ZeRO-2).
  void next_micro_batch() { pending_ = store_.size(); }

  double local_sq() const { return local_sq_; }  // |g|^2 of this rank's (averaged) gradients

 private:
  ParamStore& store_;
  SyncStrategy& sync_;
  std::int64_t step_ = 0;
  float scale_ = 1.0f;
  bool want_norm_ = false;
  double local_sq_ = 0;
  std::size_t pending_ = 0;  // gradients at [pending_, size) were handed on
};

Session::Session(const RunSpec& spec, const TrainData& data, const TrainOptions& opts, Communicator& base,
                 Communicator& control, const CheckpointInfo* resume, ElasticGroup* elastic, Model& model,
                 Optimizer& optimizer, ShardedSampler* sampler)
    : spec_(spec), r_(spec.recipe), data_(data), opts_(opts), resume_(resume), control_(control), elastic_(elastic),
      shard_(data_shard(base, elastic)),
      sim_(make_sim(spec, base)),
      comm_(sim_ ? static_cast<Communicator&>(*sim_) : base),
      device_comm_(make_device_communicator(spec, configured(comm_, spec, sim_ != nullptr), control)),
      sync_(make_sync(r_, spec.overlap, spec.device,
                      [lr = make_schedule(r_, spec.plan.global_batch, spec.plan.steps)](std::int64_t step) {
                        return lr.at(step);
                      })),
      schedule_(make_schedule(r_, spec.plan.global_batch, spec.plan.steps)),
      ledger_(comm_, device_comm_.get(), *sync_, elastic),
      loop_{.spec = spec, .data = data, .opts = opts, .comm = comm_, .control = control, .sim = sim_.get(),
            .model = model, .optimizer = optimizer, .sync = *sync_, .sampler = sampler, .elastic = elastic,
            .ledger = ledger_} {
  // Modeled compute: training FLOPs of one step's examples at the described device's speed.
  modeled_step_s_ = model.flops_per_example() * r_.train.micro_batch * r_.train.grad_accum /
                    (r_.network.device_tflops * 1e12 * r_.network.mfu);
  // The stop agreement on the simulated network (StopAgreement): a small native all-reduce, as
  // the replay expands it (a reduce and a broadcast), beside the slowest rank's modeled step.
  if (spec.simulate) {
    const Topology topo = make_topology(r_);
    simulated_agreement_s_ = native_cost(Collective::reduce, 8, topo).total() +
                             native_cost(Collective::broadcast, 8, topo).total();
    if (r_.network.compute == ComputeKind::modeled) {
      double slowest = 1;
      for (int q = 0; q < topo.size(); ++q) slowest = std::max(slowest, topo.slowdown_of(q));
      simulated_step_s_ = modeled_step_s_ * slowest;
    }
  }
}

Session::~Session() {
  // A run that failed mid-step: the communicators outlive this rank's tracer.
  comm_.set_tracer(nullptr);
  if (device_comm_) device_comm_->set_tracer(nullptr);
  control_.set_tracer(nullptr);
}

std::int64_t Session::start() {
  check_same_recipe();
  check_memory();
  start_trace();
  sync_->start(loop_.store(), data_comm(), resume_ ? resume_->step : 0);
  loop_.optimizer.set_tensor_sums(sync_->tensor_sums());
  loop_.optimizer.prepare(loop_.update_store());  // sizes the state a strategy may synchronise (DES-LOC)
  sync_->set_optimizer_state(loop_.optimizer.state());
  inter_at_start_ = comm_.tier_bytes(1).sent;
  ready_ = std::make_unique<GradsReady>(loop_.store(), *sync_);
  make_hooks();
  if (resume_) checkpointer_->resume(*resume_);  // the hooks' state and the ledger's, made above
  ledger_.start_clock();
  return ledger_.first_step();
}

// Before the optimizer's and the strategy's state is allocated: a run whose state cannot fit the
// machine is refused in one line (trainer plan's prediction; the ranks of a threads run share it).
void Session::check_memory() {
  const int ranks = spec_.backend == BackendKind::threads ? r_.distributed.world_size : 1;
  const MemoryPlan plan = plan_memory(r_, static_cast<double>(loop_.store().size()), r_.distributed.world_size, &loop_.store());
  planned_bytes_ = plan.total();
  if (const std::string why = memory_refusal(r_, plan, ranks, static_cast<double>(physical_memory_bytes()));
      !why.empty())
    LC_INPUT_ERROR(r_.path, ": ", why);
}

void Session::begin_step(StepState& s, float grad_scale) {
  if (tracer_) tracer_->step(s.step);
  loop_.store().zero_grad();
  for (auto& h : hooks_) h->before_step(s);
  ready_->begin_step(s.step, grad_scale, spec_.noise_scale);
}

GradsReadyListener& Session::ready() { return *ready_; }

bool Session::reduces_each_micro_batch() const { return sync_->reduces_each_micro_batch(); }

void Session::next_micro_batch() { ready_->next_micro_batch(); }

bool Session::computes(std::int64_t step) const { return sync_->computes(step); }

bool Session::reduce(StepState& s, double compute_s) {
  ready_->grads_ready(0);  // whatever backward did not report (the scale over micro-batches)
  s.local_sq = ready_->local_sq();
  // Reductions backward's thread ran or waited for (ZeRO-2) are communication, not compute.
  const double blocked = sync_->take_backward_blocked_s();
  compute_s = std::max(0.0, compute_s - blocked);
  ledger_.add_exposed_comm(blocked);
  ledger_.add_compute(charge_compute(compute_s, /*backward=*/true));
  sync_->step_computed(s.step, compute_s);
  Stopwatch t;
  bool admitted = true;
  for (auto& h : hooks_) admitted = admitted && h->admit(s);
  if (!admitted) {
    ledger_.add_exposed_comm(t.seconds());
    return false;
  }
  {
    TraceSpan span(tracer_.get(), SpanKind::sync);
    sync_->after_backward(s.step);
  }
  ledger_.add_exposed_comm(t.seconds());
  t.reset();
  for (auto& h : hooks_) h->after_reduce(s);
  after_reduce_s_ = t.seconds();  // compute (clipping), charged with the optimizer's
  s.lr = schedule_.at(s.step);
  return true;
}

void Session::updated(StepState& s, double optimizer_s) {
  ledger_.add_compute(charge_compute(after_reduce_s_ + optimizer_s, /*backward=*/false));
  Stopwatch t;
  {
    TraceSpan span(tracer_.get(), sync_->averages_params(s.step) ? SpanKind::outer_sync : SpanKind::sync);
    sync_->after_update(s.step);
  }
  ledger_.add_exposed_comm(t.seconds());
  after_step_hooks(s);
}

// In the run's order: the hooks before the checkpointer, the checkpointer, the rest.
void Session::after_step_hooks(StepState& s) {
  for (std::size_t i = 0; i < hooks_.size(); ++i) {
    if (i == checkpoint_at_) checkpointer_->after_step(s);
    hooks_[i]->after_step(s);
  }
  if (checkpoint_at_ == hooks_.size()) checkpointer_->after_step(s);
}

void Session::end_step(std::int64_t step) {
  for (auto& h : hooks_) h->end_step(step);
}

Stop Session::agree_to_stop(std::int64_t step) {
  const double limit = r_.train.time_limit.seconds;
  // The last step ends the run anyway (every rank knows which step is last).
  if ((!opts_.stop_on_signals && limit <= 0) || step + 1 == spec_.plan.steps) return {};
  // Every rank skips the same steps (StopAgreement; the strategy's meetings).
  if (step < next_agreement_ || !sync_->ranks_meet(step)) return {};
  std::int32_t msg[2] = {opts_.stop_on_signals ? SignalStop::received() : 0, 1};  // why, steps to the next
  if (comm_.rank() == 0) {
    const double elapsed = ledger_.wall_s();
    const double mean_step = elapsed / static_cast<double>(step + 1 - ledger_.first_step());
    // Going on means running at least to the strategy's next meeting (or the last step).
    std::int64_t ahead = 1;
    while (step + ahead + 1 < spec_.plan.steps && !sync_->ranks_meet(step + ahead)) ++ahead;
    if (msg[0] == 0 && limit > 0 && elapsed + static_cast<double>(ahead) * mean_step >= limit) msg[0] = Stop::kTimeLimit;
    // Elastic replicas come and go: a newcomer must find the others agreeing every step.
    if (!elastic_ && !opts_.agree_every_step) {
      // A simulated network: how often the ranks would agree there (a wide-area round trip
      // beside the described device's step), so the trace and its replay hold the agreements a
      // deployment on that network makes, not those of the machine that recorded it.
      const double agree_s = spec_.simulate ? simulated_agreement_s_ : agreement_s_;
      const double paced_step = simulated_step_s_ > 0 ? simulated_step_s_ : mean_step;
      msg[1] = static_cast<std::int32_t>(std::min<std::int64_t>(
          StopAgreement::interval(agree_s, paced_step, mean_step, elapsed, limit, ahead), 1 << 30));
    }
  }
  Stopwatch t;
  control_.all_reduce(Buf{msg, 2, DType::i32}, ReduceOp::max);
  // The fastest agreement so far: the link's floor (a wide-area round trip), not a hiccup of a
  // loaded machine, which must not stretch the interval.
  agreement_s_ = agreement_s_ > 0 ? std::min(agreement_s_, t.seconds()) : t.seconds();
  next_agreement_ = step + msg[1];
  return Stop::from_code(msg[0]);
}

TrainSummary Session::finish(std::int64_t steps, Stop stop) {
  sync_->drain();  // nothing in flight: a stop's checkpoint holds the step whole
  for (auto& h : hooks_) h->after_loop(steps, static_cast<bool>(stop));
  // A stop's step (the last step was written by the checkpointer already: this names it).
  std::string checkpoint;
  if (!spec_.checkpoint_root.empty()) checkpoint = checkpointer_->write(steps);
  finish_trace(steps);
  TrainSummary s = summary();
  s.steps = steps;
  s.planned_steps = spec_.plan.steps;
  s.checkpoint = checkpoint;
  s.baseline_loss = data_.baseline_loss;
  if (stop) {
    s.stopped = stop.reason == StopReason::time_limit ? "time_limit" : "signal";
    s.stop_signal = stop.signal;
    if (s.stop_signal) s.signal = signal_name(stop.signal);
  }
  return s;
}

// Measured compute `seconds`, charged to the simulated clock: modeled compute replaces the
// whole step's (charged once, with backward), measured is charged as it happens.
double Session::charge_compute(double seconds, bool backward) {
  const bool modeled = r_.network.compute == ComputeKind::modeled;
  if (sim_ && (backward || !modeled)) sim_->advance_compute(modeled ? modeled_step_s_ : seconds);
  return seconds;
}

// The event trace (train.trace): every rank starts its clock after one barrier, so the ranks'
// timelines line up; the run's communicators record into it.
void Session::start_trace() {
  if (spec_.trace_dir.empty()) return;
  control_.barrier();
  tracer_ = std::make_unique<Tracer>(spec_.trace_dir, comm_.rank(), comm_.size(), std::chrono::steady_clock::now());
  comm_.set_tracer(tracer_.get());
  if (device_comm_) device_comm_->set_tracer(tracer_.get());
  // The control plane's messages too (the stop agreement, metrics): on a wide-area link they
  // take round trips the replay must see; marked, so they are not counted as training bytes.
  control_.trace_as_control();
  control_.set_tracer(tracer_.get());
}

// After the last step: the final mark, the files closed, and rank 0 writes trace/meta.json once
// every rank's files are complete.
void Session::finish_trace(std::int64_t end) {
  if (!tracer_) return;
  data_comm().wait_all();
  tracer_->step(end);
  comm_.set_tracer(nullptr);
  if (device_comm_) device_comm_->set_tracer(nullptr);
  control_.set_tracer(nullptr);
  tracer_->close();
  control_.barrier();
  if (comm_.rank() != 0) return;
  nlohmann::ordered_json m;
  m["version"] = 1;
  m["world_size"] = comm_.size();
  m["first_step"] = ledger_.first_step();
  m["steps"] = end;
  m["log_every"] = r_.train.log_every;
  m["parameters"] = spec_.plan.parameters;
  m["flops_per_example"] = loop_.model.flops_per_example();
  m["examples_per_rank_step"] = r_.train.micro_batch * r_.train.grad_accum;
  m["overlap"] = spec_.overlap;
  m["backend"] = comm_.backend();
  write_file_atomic(spec_.trace_dir + "/meta.json", m.dump(2) + "\n");
}

// The hooks in the order they run: the caller's, then the built-in ones. The checkpointer comes
// after every hook with state, so that a checkpoint of step N holds their state after step N;
// an elastic replica's hook (it sends the checkpointer's checkpoints, keeps no state) follows.
void Session::make_hooks() {
  for (const HookFactory& f : opts_.hooks) add(f(loop_));
  add(make_nonfinite_guard(loop_));
  add(make_noise_scale(loop_));
  add(make_clipping(loop_));
  add(make_on_step(loop_));
  add(make_replica_check(loop_));
  auto eval = std::make_unique<Evaluator>(loop_);
  const Evaluator& evaluator = *eval;
  add(std::move(eval));
  add(make_reporter(loop_, evaluator));
  checkpoint_at_ = hooks_.size();
  checkpointer_.emplace(loop_, hooks_, checkpoint_at_);
  add(make_elastic_hook(loop_, elastic_, *checkpointer_));
}

void Session::add(std::unique_ptr<StepHook> h) {
  if (h) hooks_.push_back(std::move(h));
}

TrainSummary Session::summary() {
  TrainSummary s;
  s.steps = spec_.plan.steps;
  s.first_step = ledger_.first_step();
  const RunCounters c = ledger_.totals();
  s.bytes_sent = c.bytes.sent;
  s.bytes_recv = c.bytes.recv;
  s.compression_ratio = c.reducer.compression_ratio();
  s.comm_s = sync_->comm_seconds();
  s.exposed_comm_s = ledger_.exposed_comm_s();
  s.compute_s = ledger_.compute_s();
  s.wall_s = ledger_.wall_s();
  if (sim_) s.sim_time_s = sim_->clock();
  if (spec_.simulate) {
    s.bytes_inter_start = inter_at_start_;
    s.bytes_inter = comm_.tier_bytes(1).sent;
  }
  report_memory(s, loop_);
  s.memory_planned = static_cast<std::uint64_t>(planned_bytes_);
  for (auto& h : hooks_) h->finish(s);
  if (comm_.rank() == 0) {
    const ParamStore& store = loop_.store();
    s.final_params.resize(store.size());
    copy_bytes(s.final_params.data(), Device::cpu, store.params().data(), spec_.device, store.params().size_bytes());
  }
  return s;
}

// At start, the ranks compare the hash of their resolved recipe (under MPI each read its own
// file): training on different recipes would drift silently.
void Session::check_same_recipe() {
  if (control_.size() == 1) return;
  const std::uint64_t mine = hash_bytes(spec_.hash.data(), spec_.hash.size());
  std::vector<std::uint64_t> all(static_cast<std::size_t>(control_.size()));
  control_.all_gather(CBuf(&mine, sizeof mine, DType::u8), Buf{all.data(), all.size() * sizeof mine, DType::u8});
  for (std::size_t q = 1; q < all.size(); ++q)
    if (all[q] != all[0])
      LC_INPUT_ERROR(r_.path, ": rank ", q, "'s resolved recipe differs from rank 0's; refusing to train (give every "
                     "rank the same recipe and overrides)");
}

}  // namespace laconic
