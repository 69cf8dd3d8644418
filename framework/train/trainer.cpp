#include "framework/train/trainer.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "collectives/netsim/cost_model.h"
#include "collectives/trace.h"
#include "collectives/netsim/sim_communicator.h"
#include "core/check.h"
#include "core/timer.h"
#include "core/units.h"
#include "core/rng.h"
#include "core/ops/dispatch.h"
#include "framework/data/sampler.h"
#include "framework/recipe/factory.h"
#include "optimizers/clip.h"
#include "framework/sync/sync_strategy.h"
#include "framework/train/banner.h"
#include "framework/train/checkpoint.h"
#include "framework/train/elastic_hook.h"
#include "framework/train/export.h"
#include "framework/train/resume.h"
#include "framework/train/stop.h"
#include "framework/train/run_dir.h"
#include "framework/train/simulate.h"
#include "framework/train/world.h"

namespace laconic {
namespace {

// The simulated network around the backend's communicator, when the recipe describes one.
std::unique_ptr<SimCommunicator> make_sim(const RunSpec& spec, Communicator& base) {
  if (!spec.live_clock) return nullptr;
  return std::make_unique<SimCommunicator>(base, make_topology(spec.recipe));
}

ReducerStats minus(ReducerStats a, const ReducerStats& b) {
  a.calls -= b.calls;
  a.input_bytes -= b.input_bytes;
  a.value_bytes -= b.value_bytes;
  a.index_bytes -= b.index_bytes;
  a.scale_bytes -= b.scale_bytes;
  a.meta_bytes -= b.meta_bytes;
  return a;
}

// A compute span of the trace (collectives/trace.h), from construction to destruction.
class TraceSpan {
 public:
  TraceSpan(Tracer* t, SpanKind k) : t_(t), k_(k) {
    if (t_) t_->span_begin(k_);
  }
  ~TraceSpan() {
    if (t_) t_->span_end(k_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  Tracer* t_;
  SpanKind k_;
};

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
    const auto range = store_.grads().subspan(from, pending_ - from);
    if (scale_ != 1.0f) ops::kernels(store_.device()).scale(range.data(), scale_, range.size());
    if (want_norm_) {
      const double norm = global_grad_norm(range, store_.device());
      local_sq_ += norm * norm;
    }
    pending_ = from;
    sync_.grads_ready(step_, from);
  }

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

// One rank's replica, its step loop and the hooks around it.
class Worker {
 public:
  // `resume`: the checkpoint to continue from (null: start fresh).
  // `elastic`: the replica group of an elastic run (null: the world is this run's ranks).
  Worker(const RunSpec& spec, const TrainData& data, const TrainOptions& opts, Communicator& base,
         Communicator& control, const CheckpointInfo* resume, ElasticGroup* elastic)
      : spec_(spec), r_(spec.recipe), data_(data), opts_(opts), resume_(resume), control_(control), elastic_(elastic),
        shard_(data_shard(base, elastic)),
        sim_(make_sim(spec, base)),
        comm_(sim_ ? static_cast<Communicator&>(*sim_) : base),
        model_(make_model(r_, data)),
        optimizer_(make_optimizer(r_)),
        sync_(make_sync(r_, spec.overlap, spec.device,
                        [lr = make_schedule(r_, spec.plan.global_batch, spec.plan.steps)](std::int64_t step) {
                          return lr.at(step);
                        })),
        schedule_(make_schedule(r_, spec.plan.global_batch, spec.plan.steps)),
        // One optimizer step consumes one global batch; this rank's slice of it is cut into
        // grad_accum micro-batches. So K ranks with micro-batch b, one rank accumulating K
        // micro-batches of b, and one rank with micro-batch K*b all see the same examples.
        sampler_(SamplerOptions{data.train->size(), r_.run.seed, shard_.ranks, shard_.rank,
                                r_.train.micro_batch * r_.train.grad_accum}),
        loop_{spec, data, opts, comm_, control, sim_.get(), *model_, *optimizer_, *sync_, sampler_,
              [this] { return counters(); }, elastic, /*first_step=*/0, /*compute_s=*/0, /*exposed_comm_s=*/0, Stopwatch{}} {
    comm_.set_algorithm(r_.distributed.algorithm);
    if (spec.simulate) {
      // The described network's groups decide the link tiers and the hierarchical levels, and its
      // cost model picks the algorithm (the live clock's wrapper set them on itself already).
      const Topology topo = make_topology(r_);
      if (!sim_) comm_.set_groups(topo.group_of);
      comm_.set_algorithm_chooser(make_all_reduce_chooser(topo));
    }
    // A staging wrapper shares the host communicator's settings (set above); NCCL runs its own.
    device_comm_ = make_device_communicator(spec, comm_, control_);
    // Modeled compute: training FLOPs of one step's examples at the described device's speed.
    modeled_step_s_ = model_->flops_per_example() * r_.train.micro_batch * r_.train.grad_accum /
                      (r_.network.device_tflops * 1e12 * r_.network.mfu);
  }

  ~Worker() {
    // A run that failed mid-step: the communicators outlive this rank's tracer.
    comm_.set_tracer(nullptr);
    if (device_comm_) device_comm_->set_tracer(nullptr);
  }

  TrainSummary run() {
    model_->init(r_.run.seed);  // on the host, then to where it trains
    if (spec_.plan.init_weights) load_model_weights(*spec_.plan.init_weights, r_.model.init_from.path, *model_, "model.init_from");
    model_->to(spec_.device);
    check_same_recipe();
    start_trace();
    sync_->start(loop_.store(), data_comm(), resume_ ? resume_->step : 0);
    inter_at_start_ = comm_.tier_bytes(1).sent;
    ready_.emplace(loop_.store(), *sync_);
    make_hooks();
    if (resume_) {
      loop_.first_step = checkpointer_->resume(*resume_);
      at_start_ = {traffic(), sync_->reducer_stats()};  // the checkpoint's totals already hold the start
    }
    loop_.wall.reset();
    std::int64_t step = loop_.first_step;
    int why = 0;  // a signal, kTimeLimit, or 0 (ran to the end)
    std::string checkpoint;
    try {
      while (step < spec_.plan.steps && why == 0) {
        run_step(step);
        for (auto& h : hooks_) h->end_step(step);
        why = agree_to_stop(step++);
      }
      sync_->drain();  // nothing in flight: a stop's checkpoint holds the step whole
      for (auto& h : hooks_) h->after_loop(step, why != 0);
      // A stop's step (the last step was written by the checkpointer already: this names it).
      if (!spec_.checkpoint_root.empty()) checkpoint = checkpointer_->write(step);
      finish_trace(step);
    } catch (const InputError&) {
      throw;
    } catch (const ReplicaDropped&) {
      throw;
    } catch (const std::exception& e) {
      // Name where it happened; a peer's failure already names its rank.
      throw Error(detail::concat("rank ", comm_.rank(), " at step ", step + 1, ": ", e.what()));
    }
    TrainSummary s = summary();
    s.steps = step;
    s.planned_steps = spec_.plan.steps;
    s.checkpoint = checkpoint;
    s.baseline_loss = data_.baseline_loss;
    if (why != 0) {
      s.stopped = why == kTimeLimit ? "time_limit" : "signal";
      s.stop_signal = why == kTimeLimit ? 0 : why;
      if (s.stop_signal) s.signal = signal_name(why);
    }
    return s;
  }

 private:
  static constexpr int kTimeLimit = 1 << 20;  // beyond every signal number

  // After each step: whether to stop now, agreed by every rank (a signal any rank caught; the
  // time limit by rank 0's clock, one mean step early). 0: go on; kTimeLimit or the signal.
  int agree_to_stop(std::int64_t step) {
    const double limit = r_.train.time_limit.seconds;
    // The last step ends the run anyway (every rank knows which step is last).
    if ((!opts_.stop_on_signals && limit <= 0) || step + 1 == spec_.plan.steps) return 0;
    std::int32_t why = opts_.stop_on_signals ? SignalStop::received() : 0;
    if (why == 0 && limit > 0 && comm_.rank() == 0) {
      const double elapsed = loop_.wall.seconds();
      const double mean_step = elapsed / static_cast<double>(step + 1 - loop_.first_step);
      if (elapsed + mean_step >= limit) why = kTimeLimit;
    }
    control_.all_reduce(Buf{&why, 1, DType::i32}, ReduceOp::max);
    return why;
  }

  // One optimizer step: the micro-batches' forward and backward, the strategy's reduction, the
  // optimizer, the strategy's parameter sync, and the hooks between them.
  void run_step(std::int64_t step) {
    ParamStore& store = loop_.store();
    StepState s;
    s.step = step;
    Tracer* tr = tracer_.get();
    if (tr) tr->step(step);
    store.zero_grad();
    for (auto& h : hooks_) h->before_step(s);
    Stopwatch t;
    forward_backward(s);
    s.local_sq = ready_->local_sq();
    double compute = charge_compute(t.seconds(), /*backward=*/true);
    t.reset();
    bool admitted = true;
    for (auto& h : hooks_) admitted = admitted && h->admit(s);
    if (!admitted) {
      loop_.exposed_comm_s += t.seconds();
      return;
    }
    {
      TraceSpan span(tr, SpanKind::sync);
      sync_->after_backward(step);
    }
    loop_.exposed_comm_s += t.seconds();
    t.reset();
    for (auto& h : hooks_) h->after_reduce(s);
    s.lr = schedule_.at(step);
    {
      TraceSpan span(tr, SpanKind::optimizer);
      optimizer_->step(store, s.lr);
      synchronize_kernels(spec_.device);
    }
    compute += charge_compute(t.seconds(), /*backward=*/false);
    loop_.compute_s += compute;
    t.reset();
    {
      TraceSpan span(tr, SpanKind::sync);
      sync_->after_update(step);
    }
    loop_.exposed_comm_s += t.seconds();
    for (auto& h : hooks_) h->after_step(s);
  }

  // This rank's slice of the global batch in grad_accum micro-batches.
  void forward_backward(StepState& s) {
    const std::int64_t step = s.step;
    const int accum = r_.train.grad_accum;
    ready_->begin_step(step, 1.0f / static_cast<float>(accum), spec_.noise_scale);
    const std::span<const std::int64_t> slice = sampler_.next();
    const auto micro = static_cast<std::size_t>(r_.train.micro_batch);
    for (int a = 0; a < accum; ++a) {
      const auto at = static_cast<std::uint64_t>(step * accum + a);
      data_.train->fill(batch_, slice.subspan(static_cast<std::size_t>(a) * micro, micro),
                        rng::key({r_.run.seed, static_cast<std::uint64_t>(shard_.rank), at, rng::kData}));
      TraceSpan span(tracer_.get(), SpanKind::forward_backward);
      ForwardOptions fo;
      fo.train = true;
      fo.seed = r_.run.seed;
      fo.rank = shard_.rank;
      fo.step = static_cast<std::int64_t>(at);
      const ForwardResult f = model_->forward(batch_, fo);
      s.loss_sum += static_cast<double>(f.loss) * static_cast<double>(f.counted);
      s.loss_count += static_cast<double>(f.counted);
      // Only the last backward of the step makes final gradients.
      model_->set_grads_ready_listener(a + 1 == accum ? &*ready_ : nullptr);
      model_->backward();
      // The last micro-batch's span ends with the gradients handed on, on the device as well.
      if (a + 1 == accum) {
        ready_->grads_ready(0);  // whatever the model did not report (the mean over micro-batches)
        synchronize_kernels(spec_.device);  // on a GPU, backward is queued work until here
      }
    }
  }

  // Measured compute `seconds`, charged to the simulated clock: modeled compute replaces the
  // whole step's (charged once, with backward), measured is charged as it happens.
  double charge_compute(double seconds, bool backward) {
    const bool modeled = r_.network.compute == ComputeKind::modeled;
    if (sim_ && (backward || !modeled)) sim_->advance_compute(modeled ? modeled_step_s_ : seconds);
    return seconds;
  }

  // The event trace (train.trace): every rank starts its clock after one barrier, so the ranks'
  // timelines line up; the run's communicators record into it.
  void start_trace() {
    if (spec_.trace_dir.empty()) return;
    control_.barrier();
    tracer_ = std::make_unique<Tracer>(spec_.trace_dir, comm_.rank(), comm_.size(), std::chrono::steady_clock::now());
    comm_.set_tracer(tracer_.get());
    if (device_comm_) device_comm_->set_tracer(tracer_.get());
  }
  // After the last step: the final mark, the files closed, and rank 0 writes trace/meta.json once
  // every rank's files are complete.
  void finish_trace(std::int64_t end) {
    if (!tracer_) return;
    data_comm().wait_all();
    tracer_->step(end);
    comm_.set_tracer(nullptr);
    if (device_comm_) device_comm_->set_tracer(nullptr);
    tracer_->close();
    control_.barrier();
    if (comm_.rank() != 0) return;
    nlohmann::ordered_json m;
    m["version"] = 1;
    m["world_size"] = comm_.size();
    m["first_step"] = loop_.first_step;
    m["steps"] = end;
    m["log_every"] = r_.train.log_every;
    m["parameters"] = spec_.plan.parameters;
    m["flops_per_example"] = model_->flops_per_example();
    m["examples_per_rank_step"] = r_.train.micro_batch * r_.train.grad_accum;
    m["overlap"] = spec_.overlap;
    m["backend"] = comm_.backend();
    write_file_atomic(spec_.trace_dir + "/meta.json", m.dump(2) + "\n");
  }

  // The hooks in the order they run: the caller's, then the built-in ones. The checkpointer comes
  // after every hook with state, so that a checkpoint of step N holds their state after step N;
  // an elastic replica's hook (it sends the checkpointer's checkpoints, keeps no state) follows.
  void make_hooks() {
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
    auto ckpt = std::make_unique<Checkpointer>(loop_, hooks_, [this](const RunCounters& c) { resumed_ = c; });
    checkpointer_ = ckpt.get();
    add(std::move(ckpt));
    add(make_elastic_hook(loop_, elastic_, *checkpointer_));
  }
  void add(std::unique_ptr<StepHook> h) {
    if (h) hooks_.push_back(std::move(h));
  }

  TrainSummary summary() {
    TrainSummary s;
    s.steps = spec_.plan.steps;
    s.first_step = loop_.first_step;
    const RunCounters c = counters();
    s.bytes_sent = c.bytes.sent;
    s.bytes_recv = c.bytes.recv;
    s.compression_ratio = c.reducer.compression_ratio();
    s.comm_s = sync_->comm_seconds();
    s.exposed_comm_s = loop_.exposed_comm_s;
    s.compute_s = loop_.compute_s;
    s.wall_s = loop_.wall.seconds();
    if (sim_) s.sim_time_s = sim_->clock();
    if (spec_.simulate) s.bytes_inter_start = inter_at_start_;
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
  void check_same_recipe() {
    if (control_.size() == 1) return;
    const std::uint64_t mine = hash_bytes(spec_.hash.data(), spec_.hash.size());
    std::vector<std::uint64_t> all(static_cast<std::size_t>(control_.size()));
    control_.all_gather(CBuf(&mine, sizeof mine, DType::u8), Buf{all.data(), all.size() * sizeof mine, DType::u8});
    for (std::size_t q = 1; q < all.size(); ++q)
      if (all[q] != all[0])
        LC_INPUT_ERROR(r_.path, ": rank ", q, "'s resolved recipe differs from rank 0's; refusing to train (give every "
                       "rank the same recipe and overrides)");
  }

  // The communicator the sync strategy uses: on a device, the device communicator over comm_.
  Communicator& data_comm() { return device_comm_ ? *device_comm_ : comm_; }
  // This rank's traffic: every ledger of its communicators once (staging shows comm_'s; NCCL
  // moves and counts its own bytes).
  ByteCounters traffic() const {
    ByteCounters b = total_bytes({&comm_, device_comm_.get()});
    if (elastic_ && comm_.rank() == 0) b = b + elastic_->bytes();  // across replicas, over gloo
    return b;
  }
  // The run's totals: what a resumed checkpoint had counted, plus what this process has since.
  RunCounters counters() const {
    const ByteCounters now = traffic();
    RunCounters c = resumed_;
    c.bytes.sent += now.sent - at_start_.bytes.sent;
    c.bytes.recv += now.recv - at_start_.bytes.recv;
    c.bytes.messages_sent += now.messages_sent - at_start_.bytes.messages_sent;
    c.reducer += minus(sync_->reducer_stats(), at_start_.reducer);
    return c;
  }

  const RunSpec& spec_;
  const Recipe& r_;
  const TrainData& data_;
  const TrainOptions& opts_;
  const CheckpointInfo* resume_;
  Communicator& control_;                 // the control plane (world.h)
  ElasticGroup* elastic_;                 // elastic training (null: not elastic)
  DataShard shard_;                       // which shard of the data this rank reads
  std::unique_ptr<SimCommunicator> sim_;  // wraps the backend's communicator when simulating
  Communicator& comm_;                    // what the step loop talks to: sim_ or the backend's
  std::unique_ptr<Communicator> device_comm_;  // device = cuda: NCCL or staging over comm_
  std::unique_ptr<Tracer> tracer_;        // train.trace (the communicators point at it until the end)
  double modeled_step_s_ = 0;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<SyncStrategy> sync_;
  LrSchedule schedule_;
  ShardedSampler sampler_;
  Loop loop_;
  std::optional<GradsReady> ready_;  // made once the strategy has started
  Hooks hooks_;
  Checkpointer* checkpointer_ = nullptr;
  RunCounters resumed_;   // the totals of the checkpoint resumed from (zero when fresh)
  RunCounters at_start_;  // after a resume: this process's counts when the loop started
  std::uint64_t inter_at_start_ = 0;  // inter-tier bytes sent by start()
  Batch batch_;
};


// What the recipe resolved to, appended to recipe.resolved.toml as comments (the keys above
// stay the ones the user wrote, so the file still loads as a recipe).
std::string resolved_comment(const TrainPlan& p, const TrainData& d) {
  std::ostringstream os;
  os << std::setprecision(17) << "\n# Resolved at start:\n"
     << "#   model           = " << p.model << "\n"
     << "#   data            = " << d.describe << "\n"
     << "#   global_batch    = " << p.global_batch << "\n"
     << "#   steps           = " << p.steps << " (" << p.steps_per_epoch << " per epoch)\n"
     << "#   effective_lr    = " << p.lr << "\n"
     << "#   warmup_steps    = " << p.warmup_steps << "\n";
  if (!std::isnan(d.baseline_loss)) os << "#   unigram_loss    = " << d.baseline_loss << "\n";
  return os.str();
}

}  // namespace

TrainSummary train(const Recipe& recipe, const TrainData& data, const TrainOptions& options) {
  const RunSpec spec = resolve(recipe, data, options.run_dir);  // every cross-field error, before anything is written
  const TrainPlan& plan = spec.plan;
  const std::string& root = spec.checkpoint_root;
  // An elastic replica joining a run in progress resumes from the state a member sent it.
  std::unique_ptr<ElasticGroup> elastic;
  std::optional<TrainOptions> joined;
  if (options.elastic.replicas > 0) {
    elastic = make_elastic_group(recipe, spec, options);
    joined = join_run(*elastic, root, options);
  }
  const TrainOptions& opts = joined ? *joined : options;
  const std::optional<CheckpointInfo> resume = resolve_resume(spec, opts, root);
  // An unusable checkpoint directory is bad input: found before anything else is written (every
  // run with a directory checkpoints its last step).
  if (!opts.run_dir.empty()) check_writable_directory(opts.run_dir, "run directory");
  if (!root.empty()) check_writable_directory(root, "checkpoint directory (checkpoint.dir)");
  TrainSummary summary;
  bool led = false;  // this process ran rank 0
  std::mutex mu;
  const int gemm_threads = gemm_threads_for(spec);
  ops::cpu::set_gemm_threads(gemm_threads);
  std::optional<SignalStop> signals;  // for the run's duration
  if (opts.stop_on_signals) signals.emplace();
  try {
    run_world(spec, [&](Communicator& comm, Communicator& control) {
      const bool lead = comm.rank() == 0;  // rank 0 alone writes the run directory and the log
      if (lead && !opts.run_dir.empty()) {
        make_directories(opts.run_dir);
        write_file_atomic(opts.run_dir + "/recipe.resolved.toml", to_toml(recipe) + resolved_comment(plan, data));
      }
      if (lead && opts.log) start_banner(*opts.log, spec, data, comm, gemm_threads, opts.run_dir);
      const std::optional<CheckpointInfo> agreed = agree_on_resume(control, opts, resume, root);
      Worker worker(spec, data, opts, comm, control, agreed ? &*agreed : nullptr, elastic.get());
      TrainSummary s = worker.run();
      if (lead) {
        std::lock_guard lock(mu);
        summary = std::move(s);
        led = true;
      }
    });
  } catch (const std::exception&) {
    if (elastic && !elastic->dropped().empty()) throw ReplicaDropped(elastic->dropped());
    throw;
  }
  if (!led) return summary;
  if (!opts.run_dir.empty()) write_summary(opts.run_dir, summary);
  replay_after_run(spec, opts.run_dir, opts.log, summary);
  return summary;
}


}  // namespace laconic

namespace laconic {

TrainSummary train(const Recipe& recipe, const TrainOptions& opts) {
  LoadOptions load;
  load.cache_dir = recipe.run.out_dir;
  return train(recipe, load_data(recipe, load), opts);
}

}  // namespace laconic
