#include "framework/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <thread>

#include "collectives/netsim/cost_model.h"
#include "collectives/netsim/sim_communicator.h"
#include "framework/core/check.h"
#include "framework/core/timer.h"
#include "framework/core/units.h"
#include "framework/core/rng.h"
#include "framework/ops/dispatch.h"
#include "framework/data/sampler.h"
#include "framework/train/factory.h"
#include "optimizers/clip.h"
#include "optimizers/noise_scale.h"
#include "framework/sync/sync_strategy.h"
#include "framework/train/checkpoint.h"
#include "framework/train/run_dir.h"
#include "framework/train/world.h"

namespace laconic {
namespace {

double squared(double x) { return x * x; }

// No inf or NaN in x: an OR over the exponent bits (all ones only for inf and NaN) vectorises,
// unlike a float reduction, so the check costs one read of the gradients.
bool all_finite(std::span<const float> x, Device where) {
  // On a device, one norm pass: a sum of squares in double is finite iff every element is (the
  // largest float squared, times any count of elements, stays far below double's range).
  if (where != Device::cpu) return std::isfinite(global_grad_norm(x, where));
  const auto* bits = reinterpret_cast<const std::uint32_t*>(x.data());
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) bad |= static_cast<std::uint32_t>((bits[i] & 0x7f800000u) == 0x7f800000u);
  return bad == 0;
}

Algorithm to_algorithm(AlgorithmKind k) {
  switch (k) {
    case AlgorithmKind::native: return Algorithm::native;
    case AlgorithmKind::ring: return Algorithm::ring;
    case AlgorithmKind::recursive_doubling: return Algorithm::recursive_doubling;
    case AlgorithmKind::rabenseifner: return Algorithm::rabenseifner;
    case AlgorithmKind::hierarchical: return Algorithm::hierarchical;
    case AlgorithmKind::auto_: return Algorithm::auto_;
  }
  return Algorithm::native;
}

Topology make_topology(const Recipe& r) {
  const NetworkConfig& n = r.network;
  Topology t = grouped_topology(r.distributed.world_size, n.groups,
                                LinkSpec{n.intra_bandwidth.bytes_per_s, n.intra_latency.seconds},
                                LinkSpec{n.inter_bandwidth.bytes_per_s, n.inter_latency.seconds});
  set_stragglers(t, n.stragglers.ranks, n.straggler_slowdown);
  return t;
}

// The simulated network around the backend's communicator, when the recipe describes one.
std::unique_ptr<SimCommunicator> make_sim(const Recipe& r, Communicator& base) {
  if (r.network.groups == 0) return nullptr;
  return std::make_unique<SimCommunicator>(base, make_topology(r));
}

struct EvalResult {
  double loss = std::numeric_limits<double>::quiet_NaN();
  double accuracy = std::numeric_limits<double>::quiet_NaN();
};

// Full pass over `d` in chunks of `chunk` examples, dropout off; `order` holds 0..size-1. Each
// chunk's randomness (MLM masking) has a fixed key, so every evaluation sees the same batches.
EvalResult evaluate(Model& model, const DataSource& d, std::span<const std::int64_t> order, int chunk,
                    std::uint64_t seed, Batch& scratch) {
  double loss_sum = 0;
  std::int64_t counted = 0, correct = 0;
  ForwardOptions fo;
  fo.train = false;
  for (std::int64_t begin = 0, k = 0; begin < d.size(); begin += chunk, ++k) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(chunk, d.size() - begin));
    d.fill(scratch, order.subspan(static_cast<std::size_t>(begin), n), mlm_eval_key(seed, k));
    const ForwardResult r = model.forward(scratch, fo);
    loss_sum += static_cast<double>(r.loss) * static_cast<double>(r.counted);
    counted += r.counted;
    correct += r.correct;
  }
  if (counted == 0) return {};
  return {loss_sum / static_cast<double>(counted), static_cast<double>(correct) / static_cast<double>(counted)};
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) b /= 1000.0, ++u;
  std::ostringstream os;
  os << std::fixed << std::setprecision(b < 10 ? 2 : 1) << b << ' ' << units[u];
  return os.str();
}

std::string human_seconds(double s) {
  std::ostringstream os;
  if (s < 60) os << std::fixed << std::setprecision(1) << s << "s";
  else os << static_cast<long>(s) / 60 << "m" << std::setw(2) << std::setfill('0') << static_cast<long>(s) % 60 << "s";
  return os.str();
}

// Rank 0's reporting: log lines, metrics.jsonl, the live progress line.
class Reporter {
 public:
  // `resumed`: continue the run's metrics.jsonl instead of starting it afresh.
  Reporter(const TrainOptions& opts, const TrainPlan& plan, bool resumed) : opts_(opts), plan_(plan) {
    if (!opts.run_dir.empty()) metrics_ = std::make_unique<JsonlWriter>(opts.run_dir + "/metrics.jsonl", resumed);
  }

  struct Record {
    std::int64_t step = 0;  // optimizer steps completed
    double loss = 0, lr = 0;
    ByteCounters bytes;
    double bytes_per_step = 0;  // sent by this rank per step since the previous record
    double comm_s = 0;          // reducing gradients, on whichever thread
    double exposed_comm_s = 0;  // what the step loop waited for communication (not overlapped)
    double compression_ratio = 1;
    double compute_s = 0, wall_s = 0;
    double examples_per_s = 0;
    const EvalResult* eval = nullptr;
    const SimCommunicator* sim = nullptr;  // the simulated network, when there is one
    double grad_norm = std::numeric_limits<double>::quiet_NaN();    // before clipping (when clipping)
    double noise_scale = std::numeric_limits<double>::quiet_NaN();  // B_simple (when estimated)
  };

  void record(const Record& r) {
    nlohmann::json j;
    j["step"] = r.step;
    j["epoch"] = epoch(r.step);
    j["loss"] = r.loss;
    j["lr"] = r.lr;
    j["bytes_sent"] = r.bytes.sent;
    j["bytes_recv"] = r.bytes.recv;
    j["bytes_per_step"] = r.bytes_per_step;
    j["comm_s"] = r.comm_s;
    j["exposed_comm_s"] = r.exposed_comm_s;
    j["compression_ratio"] = r.compression_ratio;
    j["compute_s"] = r.compute_s;
    j["wall_s"] = r.wall_s;
    j["examples_per_s"] = r.examples_per_s;
    if (!std::isnan(r.grad_norm)) j["grad_norm"] = r.grad_norm;
    if (!std::isnan(r.noise_scale)) j["noise_scale"] = r.noise_scale;
    if (r.sim) {
      j["sim_time_s"] = r.sim->clock();
      j["sim_comm_s"] = r.sim->comm_time();
      j["bytes_intra"] = r.sim->tier_bytes()[0].sent;
      j["bytes_inter"] = r.sim->tier_bytes()[1].sent;
    }
    if (r.eval) {
      j["eval_loss"] = r.eval->loss;
      j["eval_accuracy"] = r.eval->accuracy;
    }
    if (metrics_) metrics_->write_line(j.dump());
    if (!opts_.log) return;
    std::ostringstream line;
    line << "step " << std::setw(width()) << r.step << "/" << plan_.steps << " | epoch " << std::fixed
         << std::setprecision(2) << epoch(r.step) << " | loss " << std::setprecision(4) << r.loss
         << " | lr " << std::setprecision(5) << r.lr << " | " << std::setprecision(0) << r.examples_per_s
         << " ex/s | sent " << human_bytes(static_cast<double>(r.bytes.sent)) << " | comm "
         << std::setprecision(0) << 100.0 * r.exposed_comm_s / std::max(1e-9, r.wall_s) << "%";
    if (r.compression_ratio != 1.0) line << " | x" << std::setprecision(1) << r.compression_ratio;
    if (!std::isnan(r.noise_scale)) line << " | B_noise " << std::setprecision(0) << r.noise_scale;
    if (r.sim)
      line << " | sim " << human_seconds(r.sim->clock()) << " (comm " << std::setprecision(0)
           << 100.0 * r.sim->comm_time() / std::max(1e-12, r.sim->clock()) << "%)";
    if (r.eval)
      line << " | eval loss " << std::setprecision(4) << r.eval->loss << " acc " << std::setprecision(2)
           << 100.0 * r.eval->accuracy << "%";
    clear_progress();
    *opts_.log << line.str() << std::endl;
  }

  // Rewrites one terminal line in place, at most ~10 times a second.
  void progress(std::int64_t step, double wall_s) {
    if (!opts_.log || !opts_.progress_line || wall_s - last_progress_ < 0.1) return;
    last_progress_ = wall_s;
    const double frac = static_cast<double>(step) / static_cast<double>(plan_.steps);
    constexpr int kBar = 30;
    const int filled = static_cast<int>(frac * kBar);
    const double eta = step > 0 ? wall_s / static_cast<double>(step) * static_cast<double>(plan_.steps - step) : 0;
    *opts_.log << "\r\033[K[" << std::string(filled, '#') << std::string(kBar - filled, '.') << "] " << step
               << "/" << plan_.steps << " " << std::fixed << std::setprecision(1) << 100 * frac << "% eta "
               << human_seconds(eta) << std::flush;
    progress_shown_ = true;
  }

 private:
  double epoch(std::int64_t step) const {
    return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, plan_.steps_per_epoch));
  }
  int width() const { return static_cast<int>(std::to_string(plan_.steps).size()); }
  void clear_progress() {
    if (progress_shown_) *opts_.log << "\r\033[K";
    progress_shown_ = false;
  }

  const TrainOptions& opts_;
  const TrainPlan& plan_;
  std::unique_ptr<JsonlWriter> metrics_;
  double last_progress_ = -1;
  bool progress_shown_ = false;
};

// Between the model's last backward of a step and the sync strategy: each range of gradients
// that backward reports final is first averaged over the micro-batches and its square norm
// taken (for the noise scale), then handed on, so the strategy may start reducing it.
class GradsReady final : public GradsReadyListener {
 public:
  GradsReady(ParamStore& store, SyncStrategy& sync, Communicator& comm) : store_(store), sync_(sync), comm_(comm) {}

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
    if (want_norm_) local_sq_ += squared(global_grad_norm(range, store_.device()));
    pending_ = from;
    sync_.grads_ready(store_, comm_, step_, from);
  }

  double local_sq() const { return local_sq_; }  // |g|^2 of this rank's (averaged) gradients

 private:
  ParamStore& store_;
  SyncStrategy& sync_;
  Communicator& comm_;
  std::int64_t step_ = 0;
  float scale_ = 1.0f;
  bool want_norm_ = false;
  double local_sq_ = 0;
  std::size_t pending_ = 0;  // gradients at [pending_, size) were handed on
};

// One rank's replica and loop.
class Worker {
 public:
  // `resume`: the checkpoint to continue from (null: start fresh); `ckpt_root`: where this run's
  // checkpoints go; `hash`: the resolved recipe's, which they carry.
  Worker(const Recipe& r, const TrainData& data, const TrainPlan& plan, const TrainOptions& opts,
         Communicator& base, const CheckpointInfo* resume, std::string ckpt_root, std::string hash)
      : r_(r), data_(data), plan_(plan), opts_(opts), resume_(resume), ckpt_root_(std::move(ckpt_root)),
        hash_(std::move(hash)), sim_(make_sim(r, base)),
        comm_(sim_ ? static_cast<Communicator&>(*sim_) : base),
        model_(make_model(r, data)),
        optimizer_(make_optimizer(r.optimizer)),
        // The simulated clock charges compute and messages in program order; overlapped
        // reductions would race it, so simulated runs reduce after backward. Skipping
        // non-finite steps needs every rank's verdict before any bucket leaves: no overlap.
        sync_(make_sync(r.sync, /*overlap=*/r.sync.overlap && r.network.groups == 0 &&
                                    r.guards.nonfinite != NonfiniteKind::skip,
                        resolve_device(r))),
        schedule_(make_schedule(r, plan.global_batch, plan.steps)),
        // One optimizer step consumes one global batch; this rank's slice of it is cut into
        // grad_accum micro-batches. So K ranks with micro-batch b, one rank accumulating K
        // micro-batches of b, and one rank with micro-batch K*b all see the same examples.
        sampler_(SamplerOptions{data.train->size(), r.run.seed, base.size(), base.rank(),
                                r.train.micro_batch * r.train.grad_accum}) {
    comm_.set_algorithm(to_algorithm(r.distributed.algorithm));
    if (sim_) comm_.set_algorithm_chooser(make_all_reduce_chooser(sim_->topology()));
    device_ = resolve_device(r);
    // After the host communicator is configured: a staging wrapper starts from its settings.
    const ByteCounters before = comm_.bytes();
    device_comm_ = make_device_communicator(r, comm_, sim_ != nullptr, separate_counts_);
    // NCCL's bootstrap (its id, broadcast over comm_) is not traffic a cpu run would have.
    if (separate_counts_) {
      boot_sent_ = comm_.bytes().sent - before.sent;
      boot_recv_ = comm_.bytes().recv - before.recv;
    }
    // Modeled compute: training FLOPs of one step's examples at the described device's speed.
    modeled_step_s_ = model_->flops_per_example() * r.train.micro_batch * r.train.grad_accum /
                      (r.network.device_tflops * 1e12 * r.network.mfu);
    if (data.eval) {  // evaluation order, allocated once
      eval_order_.resize(static_cast<std::size_t>(data.eval->size()));
      for (std::size_t i = 0; i < eval_order_.size(); ++i) eval_order_[i] = static_cast<std::int64_t>(i);
    }
    // The noise scale compares per-worker and averaged gradients: it needs more than one worker,
    // and the exact average (a compressed one, or averaged velocities, would bias |G|^2).
    if (r.train.noise_scale && r.sync.strategy == SyncKind::allreduce && r.sync.momentum == 0 &&
        plan.global_batch > static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum)
      noise_.emplace(NoiseScaleOptions{static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum,
                                       plan.global_batch});
  }

  TrainSummary run() {
    model_->init(r_.run.seed);  // on the host, then to where it trains
    model_->to(device_);
    ParamStore& store = model_->params();
    const bool modeled = r_.network.compute == ComputeKind::modeled;
    check_same_recipe();
    Communicator& data = data_comm();
    sync_->start(store, data);
    std::int64_t first_step = 0;
    if (resume_) first_step = load(*resume_);
    const bool lead = comm_.rank() == 0;
    std::unique_ptr<Reporter> reporter;
    if (lead) reporter = std::make_unique<Reporter>(opts_, plan_, resume_ != nullptr);

    Stopwatch wall;
    GradsReady ready(store, *sync_, data);
    double exposed_s = 0, compute_s = 0, interval_loss = 0, last_loss = 0;
    std::int64_t interval_steps = 0, last_log_step = first_step, skipped = 0, consecutive_skips = 0;
    std::uint64_t last_log_sent = traffic().sent;  // after the start broadcast
    double last_log_wall = 0, grad_norm = std::numeric_limits<double>::quiet_NaN();
    const int accum = r_.train.grad_accum;
    EvalResult last_eval;

    std::int64_t step = first_step;
    try {
    for (; step < plan_.steps; ++step) {
      inject_fault(step);
      Stopwatch t;
      store.zero_grad();
      // An injected NaN goes in before backward accumulates, so it travels with the gradients
      // (reduction may start during backward).
      if (r_.fault.kind == FaultKind::nan && r_.fault.step == step && r_.fault.rank == comm_.rank())
      {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        copy_bytes(store.grads().data(), device_, &nan, Device::cpu, sizeof nan);
      }
      ready.begin_step(step, 1.0f / static_cast<float>(accum), noise_.has_value());
      double loss = 0;
      const std::span<const std::int64_t> slice = sampler_.next();
      const auto micro = static_cast<std::size_t>(r_.train.micro_batch);
      for (int a = 0; a < accum; ++a) {
        data_.train->fill(batch_, slice.subspan(static_cast<std::size_t>(a) * micro, micro),
                          rng::key({r_.run.seed, static_cast<std::uint64_t>(comm_.rank()),
                                    static_cast<std::uint64_t>(step * accum + a), rng::kData}));
        ForwardOptions fo;
        fo.train = true;
        fo.seed = r_.run.seed;
        fo.rank = comm_.rank();
        fo.step = step * accum + a;
        loss += model_->forward(batch_, fo).loss;
        // Only the last backward of the step makes final gradients.
        model_->set_grads_ready_listener(a + 1 == accum ? &ready : nullptr);
        model_->backward();
      }
      ready.grads_ready(0);  // whatever the model did not report (the mean over micro-batches)
      synchronize_kernels(device_);  // on a GPU, backward is queued work until here
      double step_compute = t.seconds();
      t.reset();
      if (sim_) sim_->advance_compute(modeled ? modeled_step_s_ : step_compute);
      if (r_.guards.nonfinite == NonfiniteKind::skip) {
        // Every rank's verdict before any reduction: a skipped step leaves error-feedback
        // residuals, optimizer state and parameters as they were.
        float bad = all_finite(store.grads(), device_) ? 0.0f : 1.0f;
        comm_.all_reduce(std::span(&bad, 1), ReduceOp::max);
        if (bad != 0.0f) {
          ++skipped;
          if (++consecutive_skips > r_.guards.max_consecutive_skips)
            throw Error(detail::concat("non-finite gradients in ", consecutive_skips,
                                       " consecutive steps (guards.max_consecutive_skips = ",
                                       r_.guards.max_consecutive_skips, ")"));
          if (lead && opts_.log)
            *opts_.log << "laconic: step " << step + 1 << ": non-finite gradient on some rank, step skipped ("
                       << skipped << " so far)" << std::endl;
          exposed_s += t.seconds();
          continue;
        }
        consecutive_skips = 0;
      }
      sync_->after_backward(store, data, step);
      if (r_.guards.nonfinite == NonfiniteKind::abort && !all_finite(store.grads(), device_))
        throw Error("non-finite gradient (guards.nonfinite = \"abort\"; \"skip\" skips such steps)");
      // Mean of the workers' |g_b|^2 (one float on the wire), for the noise scale.
      float mean_local = static_cast<float>(ready.local_sq());
      if (noise_) comm_.all_reduce(std::span(&mean_local, 1), ReduceOp::avg);
      exposed_s += t.seconds();
      t.reset();
      // One pass for the norm of the averaged gradients, shared by the noise scale (|G_B|^2)
      // and clipping (after averaging: every rank sees the same norm and scales identically).
      if (noise_ || r_.optimizer.grad_clip > 0) {
        const double norm = global_grad_norm(store.grads(), device_);
        if (noise_) noise_->update(mean_local, squared(norm));
        if (r_.optimizer.grad_clip > 0) {
          clip_to_norm(store.grads(), norm, r_.optimizer.grad_clip, device_);
          grad_norm = norm;
        }
      }
      const double lr = schedule_.at(step);
      optimizer_->step(store, lr);
      synchronize_kernels(device_);
      if (sim_ && !modeled) sim_->advance_compute(t.seconds());
      step_compute += t.seconds();
      compute_s += step_compute;
      t.reset();
      sync_->after_update(store, data, step);
      exposed_s += t.seconds();
      if (opts_.on_step) opts_.on_step(comm_.rank(), step, store);
      if (r_.guards.check_every > 0 && (step + 1) % r_.guards.check_every == 0 && sync_->replicas_agree_after(step))
        check_replicas(store);
      if (r_.checkpoint.every > 0 && (step + 1) % r_.checkpoint.every == 0) save(step + 1);

      interval_loss += loss / accum;
      ++interval_steps;
      if (!lead) continue;
      const std::int64_t done = step + 1;
      const bool last = done == plan_.steps;
      const bool eval_now = data_.eval && (last || (r_.train.eval_every > 0 && done % r_.train.eval_every == 0));
      double eval_s = 0;
      if (eval_now) {
        Stopwatch te;
        last_eval = evaluate(*model_, *data_.eval, eval_order_, r_.train.micro_batch, r_.run.seed, eval_batch_);
        eval_s = te.seconds();
      }
      if (last || eval_now || done % r_.train.log_every == 0) {
        const double now = wall.seconds();
        last_loss = interval_loss / static_cast<double>(interval_steps);
        Reporter::Record rec;
        rec.step = done;
        rec.loss = last_loss;
        rec.lr = lr;
        rec.bytes = traffic();
        rec.bytes_per_step = static_cast<double>(rec.bytes.sent - last_log_sent) / static_cast<double>(done - last_log_step);
        last_log_sent = rec.bytes.sent;
        rec.comm_s = sync_->comm_seconds();
        rec.exposed_comm_s = exposed_s;
        rec.compression_ratio = sync_->reducer_stats().compression_ratio();
        rec.compute_s = compute_s;
        rec.wall_s = now;
        // Training throughput: the evaluation just run is not training time.
        rec.examples_per_s = static_cast<double>((done - last_log_step) * plan_.global_batch) /
                             std::max(1e-9, now - last_log_wall - eval_s);
        rec.eval = eval_now ? &last_eval : nullptr;
        rec.sim = sim_.get();
        rec.grad_norm = grad_norm;
        rec.noise_scale = noise_ ? noise_->simple_noise_scale() : std::numeric_limits<double>::quiet_NaN();
        reporter->record(rec);
        interval_loss = 0;
        interval_steps = 0;
        last_log_step = done;
        last_log_wall = now;
      } else {
        reporter->progress(done, wall.seconds());
      }
    }
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      // Name where it happened; a peer's failure already names its rank.
      throw Error(detail::concat("rank ", comm_.rank(), " at step ", step + 1, ": ", e.what()));
    }

    TrainSummary s;
    s.steps = plan_.steps;
    s.first_step = first_step;
    s.skipped_steps = skipped;
    s.final_loss = last_loss;
    s.eval_loss = last_eval.loss;
    s.eval_accuracy = last_eval.accuracy;
    s.bytes_sent = traffic().sent;
    s.bytes_recv = traffic().recv;
    const ReducerStats rs = sync_->reducer_stats();
    s.compression_ratio = rs.compression_ratio();
    s.comm_s = sync_->comm_seconds();
    s.exposed_comm_s = exposed_s;
    s.compute_s = compute_s;
    s.wall_s = wall.seconds();
    if (sim_) s.sim_time_s = sim_->clock();
    if (lead) {
      s.final_params.resize(store.size());
      copy_bytes(s.final_params.data(), Device::cpu, store.params().data(), device_, store.params().size_bytes());
    }
    return s;
  }

 private:
  // At start, the ranks compare the hash of their resolved recipe (under MPI each read its own
  // file): training on different recipes would drift silently.
  void check_same_recipe() {
    if (comm_.size() == 1) return;
    const std::uint64_t mine = hash_bytes(hash_.data(), hash_.size());
    std::vector<std::uint64_t> all(static_cast<std::size_t>(comm_.size()));
    comm_.all_gather(CBuf(&mine, sizeof mine, DType::u8), Buf{all.data(), all.size() * sizeof mine, DType::u8});
    for (std::size_t q = 1; q < all.size(); ++q)
      if (all[q] != all[0])
        LC_INPUT_ERROR(r_.path, ": rank ", q, "'s resolved recipe differs from rank 0's; refusing to train (give every "
                       "rank the same recipe and overrides)");
  }

  // Rank `fault.rank` fails at step `fault.step` as the recipe's [fault] says (tests of the
  // failure paths: the others must stop within distributed.timeout_s, never hang).
  void inject_fault(std::int64_t step) {
    const FaultConfig& f = r_.fault;
    if (f.kind == FaultKind::none || f.kind == FaultKind::nan || f.kind == FaultKind::crash || f.step != step ||
        f.rank != comm_.rank())
      return;
    const std::string what = detail::concat("fault injected: rank ", f.rank, " ", name_of(f.kind), " at step ", step + 1);
    switch (f.kind) {
      case FaultKind::throw_:
        throw Error(what);
      case FaultKind::exit:
        std::fprintf(stderr, "laconic: %s\n", what.c_str());
        std::fflush(stderr);
        std::_Exit(3);
      case FaultKind::stall:  // stops answering; gives up long after the others' timeout
        std::this_thread::sleep_for(std::chrono::duration<double>(2 * r_.distributed.timeout_s + 1));
        throw Error(what + " (stalled rank giving up)");
      default:
        return;
    }
  }

  // The ranks compare a 64-bit hash of each parameter tensor; the first that differs names the drift.
  void check_replicas(const ParamStore& store) {
    const auto& views = store.views();
    const std::size_t n = views.size();
    replica_hashes_.resize(n * (static_cast<std::size_t>(comm_.size()) + 1));
    std::uint64_t* mine = replica_hashes_.data();
    const float* params = on_host(store.params());
    for (std::size_t v = 0; v < n; ++v)
      mine[v] = hash_bytes(params + views[v].offset, views[v].numel * sizeof(float));
    std::uint64_t* all = mine + n;
    comm_.all_gather(CBuf(mine, n * 8, DType::u8), Buf{all, n * 8 * static_cast<std::size_t>(comm_.size()), DType::u8});
    for (int q = 1; q < comm_.size(); ++q)
      for (std::size_t v = 0; v < n; ++v)
        if (all[static_cast<std::size_t>(q) * n + v] != all[v])
          throw Error(detail::concat("replica drift: rank ", q, "'s ", views[v].name, " differs from rank 0's (",
                                     "guards.check_every = ", r_.guards.check_every, ")"));
  }

  // Everything a step depends on, as this rank's shard of checkpoint `step`.
  void save(std::int64_t step) {
    const bool lead = comm_.rank() == 0;
    if (lead) prepare_staging(ckpt_root_, step);
    comm_.barrier();
    ShardWriter w;
    std::vector<StateTensor> tensors = checkpoint_tensors();
    stage(tensors, /*download=*/true);
    for (const StateTensor& t : tensors) w.add(t.name, std::span<const float>(t.data));
    const auto c = sampler_.cursor();
    const std::int64_t cursor[2] = {c.epoch, c.position};
    w.add("sampler", std::span<const std::int64_t>(cursor));
    if (r_.fault.kind == FaultKind::crash && r_.fault.step == step && r_.fault.rank == comm_.rank())
      checkpoint_hooks::after_shard_chunk = [](std::uint64_t) { std::raise(SIGKILL); };  // mid-write
    w.write(shard_path(staging_dir(ckpt_root_, step), comm_.rank()));
    comm_.barrier();  // every shard is on disk before the commit
    if (lead) {
      const CheckpointInfo info = commit_checkpoint(ckpt_root_, step, comm_.size(), hash_, r_.checkpoint.keep_latest);
      if (opts_.log) *opts_.log << "laconic: checkpoint " << info.dir << std::endl;
    }
  }

  // Every float tensor of a checkpoint, named as in the shard, wherever it lives.
  std::vector<StateTensor> checkpoint_tensors() {
    ParamStore& store = model_->params();
    std::vector<StateTensor> all{{"params", store.params(), store.device()}};
    for (StateTensor& t : optimizer_->state()) all.push_back({"optimizer." + t.name, t.data, t.device});
    for (StateTensor& t : sync_->state()) all.push_back({"sync." + t.name, t.data, t.device});
    return all;
  }

  // Points each device tensor of `ts` at a host copy in host_stage_ (filled from the device when
  // `download`); host tensors stay as they are. A cpu run never copies.
  void stage(std::vector<StateTensor>& ts, bool download) {
    std::size_t total = 0;
    for (const StateTensor& t : ts)
      if (t.device != Device::cpu) total += t.data.size();
    if (host_stage_.size() < total) host_stage_.resize(total);
    std::size_t at = 0;
    for (StateTensor& t : ts) {
      if (t.device == Device::cpu) continue;
      const std::span<float> host(host_stage_.data() + at, t.data.size());
      if (download) copy_bytes(host.data(), Device::cpu, t.data.data(), t.device, t.data.size_bytes());
      t = {t.name, host, Device::cpu};
      at += host.size();
    }
  }

  // The parameters on the host (a copy in host_stage_ when they live on a device).
  const float* on_host(std::span<const float> params) {
    if (device_ == Device::cpu) return params.data();
    if (host_stage_.size() < params.size()) host_stage_.resize(params.size());
    copy_bytes(host_stage_.data(), Device::cpu, params.data(), device_, params.size_bytes());
    return host_stage_.data();
  }

  // The communicator the sync strategy uses: on a device, the device communicator over comm_.
  Communicator& data_comm() { return device_comm_ ? *device_comm_ : comm_; }
  // This rank's traffic: comm_ counts everything unless the device communicator is separate (NCCL).
  ByteCounters traffic() const {
    ByteCounters b = comm_.bytes();
    if (separate_counts_) {
      const ByteCounters d = device_comm_->bytes();
      b.sent += d.sent - boot_sent_;
      b.recv += d.recv - boot_recv_;
      b.messages_sent += d.messages_sent;
    }
    return b;
  }

  // Restores this rank's shard; returns the step to continue from.
  std::int64_t load(const CheckpointInfo& info) {
    const ShardReader rd = open_shard(info, comm_.rank());  // checked against the manifest too
    optimizer_->prepare(model_->params());  // sizes the state that state() then exposes
    const std::vector<StateTensor> tensors = checkpoint_tensors();
    std::vector<StateTensor> staged = tensors;
    stage(staged, /*download=*/false);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      rd.read(staged[i].name, staged[i].data);
      copy_bytes(tensors[i].data.data(), tensors[i].device, staged[i].data.data(), Device::cpu,
                 tensors[i].data.size_bytes());  // nothing to do for host tensors (same pointer)
    }
    std::int64_t cursor[2] = {0, 0};
    rd.read("sampler", std::span<std::int64_t>(cursor));
    sampler_.seek({cursor[0], cursor[1]});
    if (comm_.rank() == 0 && opts_.log) *opts_.log << "laconic: resumed from " << info.dir << std::endl;
    return info.step;
  }

  const Recipe& r_;
  const TrainData& data_;
  const TrainPlan& plan_;
  const TrainOptions& opts_;
  const CheckpointInfo* resume_;
  std::string ckpt_root_;
  std::string hash_;
  std::vector<std::uint64_t> replica_hashes_;  // mine, then everyone's
  std::vector<std::int64_t> eval_order_;
  std::optional<NoiseScaleEstimator> noise_;
  std::unique_ptr<SimCommunicator> sim_;  // wraps the backend's communicator when simulating
  Communicator& comm_;                    // what the step loop talks to: sim_ or the backend's
  Device device_ = Device::cpu;           // where the model, optimizer and sync state live
  std::unique_ptr<Communicator> device_comm_;  // device = cuda: NCCL or staging over comm_
  bool separate_counts_ = false;          // device_comm_ counts bytes comm_ does not (NCCL)
  std::uint64_t boot_sent_ = 0, boot_recv_ = 0;  // NCCL's bootstrap on comm_, left out of traffic()
  std::vector<float> host_stage_;         // host copies of device tensors (checkpoints, checksums)
  double modeled_step_s_ = 0;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<SyncStrategy> sync_;
  LrSchedule schedule_;
  ShardedSampler sampler_;
  Batch batch_, eval_batch_;
};

std::string summary_json(const TrainSummary& s) {
  nlohmann::json j;
  j["steps"] = s.steps;
  j["final_loss"] = s.final_loss;
  j["eval_loss"] = s.eval_loss;
  j["eval_accuracy"] = s.eval_accuracy;
  j["bytes_sent"] = s.bytes_sent;
  j["bytes_recv"] = s.bytes_recv;
  j["compression_ratio"] = s.compression_ratio;
  j["comm_s"] = s.comm_s;
  j["exposed_comm_s"] = s.exposed_comm_s;
  j["compute_s"] = s.compute_s;
  j["wall_s"] = s.wall_s;
  if (!std::isnan(s.sim_time_s)) j["sim_time_s"] = s.sim_time_s;
  return j.dump(2) + "\n";
}

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

TrainPlan make_plan(const Recipe& r, const TrainData& data) {
  LC_CHECK(data.train, "no training data");
  TrainPlan p;
  p.global_batch = static_cast<std::int64_t>(r.train.micro_batch) * r.train.grad_accum * r.distributed.world_size;
  p.steps_per_epoch = data.train->size() / p.global_batch;
  const ScaledLr lr = resolve_lr(r, p.global_batch);
  p.lr = lr.lr;
  p.warmup_steps = lr.warmup_steps;
  if (p.steps_per_epoch == 0)
    LC_INPUT_ERROR(r.path, ": the global batch (micro_batch ", r.train.micro_batch, " x grad_accum ",
                   r.train.grad_accum, " x world_size ", r.distributed.world_size, " = ", p.global_batch,
                   ") is larger than the training set (", data.train->size(), " examples)");
  p.steps = r.train.steps > 0 ? r.train.steps
                              : static_cast<std::int64_t>(std::ceil(r.train.epochs * static_cast<double>(p.steps_per_epoch)));
  p.steps = std::max<std::int64_t>(1, p.steps);
  const auto model = make_model(r, data);
  p.parameters = static_cast<std::int64_t>(model->params().size());
  p.model = model->describe();
  return p;
}

std::string recipe_hash(const Recipe& recipe) {
  // What decides the numbers only: not where the run is written, how often it logs, evaluates
  // or checkpoints, nor the fault injected into it.
  Recipe r = recipe;
  r.path.clear();
  r.run.name = RunConfig{}.name;
  r.run.out_dir = RunConfig{}.out_dir;
  r.train.log_every = TrainConfig{}.log_every;
  r.train.eval_every = TrainConfig{}.eval_every;
  r.checkpoint = CheckpointConfig{};
  r.guards.check_every = GuardsConfig{}.check_every;
  r.fault = FaultConfig{};
  return hash_text(to_toml(r));
}

std::string checkpoint_root(const Recipe& recipe, const std::string& run_dir) {
  const std::filesystem::path dir(recipe.checkpoint.dir);
  if (dir.is_absolute() || run_dir.empty()) return dir.string();
  return (std::filesystem::path(run_dir) / dir).string();
}

namespace {

// The checkpoint `opts.resume` names, checked against this run (nullopt: start fresh).
std::optional<CheckpointInfo> resolve_resume(const Recipe& recipe, const TrainOptions& opts, const std::string& root,
                                             const std::string& hash) {
  if (opts.resume.empty()) return std::nullopt;
  std::optional<CheckpointInfo> info;
  if (opts.resume == "auto") {
    info = find_latest_checkpoint(root);
    if (!info) {
      if (opts.log) *opts.log << "laconic: --resume auto: no complete checkpoint under " << root << ", starting fresh" << std::endl;
      return std::nullopt;
    }
  } else {
    info = read_checkpoint_info(opts.resume);
  }
  if (info->world_size != recipe.distributed.world_size)
    LC_INPUT_ERROR(info->dir, ": checkpoint of ", info->world_size, " ranks; this run has distributed.world_size = ",
                   recipe.distributed.world_size, " (every rank's state is its own: resume with the same world size)");
  if (info->recipe_hash != hash && !opts.resume_any_recipe)
    LC_INPUT_ERROR(info->dir, ": checkpoint of a different recipe (hash ", info->recipe_hash, ", this one ", hash,
                   "; compare with its run's recipe.resolved.toml, or pass --resume-any-recipe to continue anyway)");
  return info;
}

// `--resume auto` is resolved by every process on its own view of the checkpoint directory; under
// MPI those views can differ (a node-local disk, a commit racing the listing). Rank 0's choice
// wins: it broadcasts the step (-1: start fresh) and every rank reads that checkpoint, which then
// fails loudly on a rank that cannot see it instead of silently resuming elsewhere.
std::optional<CheckpointInfo> agree_on_resume(Communicator& comm, const TrainOptions& opts,
                                              const std::optional<CheckpointInfo>& mine, const std::string& root) {
  if (opts.resume != "auto" || comm.size() == 1) return mine;
  std::int64_t step = mine ? mine->step : -1;
  comm.broadcast(&step, sizeof step, 0);
  if (step < 0) return std::nullopt;
  if (mine && mine->step == step) return mine;
  return read_checkpoint_info(checkpoint_dir(root, step));
}

}  // namespace

TrainSummary train(const Recipe& recipe, const TrainData& data, const TrainOptions& opts) {
  const TrainPlan plan = make_plan(recipe, data);
  const std::string hash = recipe_hash(recipe);
  const std::string root = checkpoint_root(recipe, opts.run_dir);
  if (recipe.checkpoint.every > 0 && root.empty())
    LC_INPUT_ERROR(recipe.path, ": checkpoint.every = ", recipe.checkpoint.every, " needs a run directory or an absolute checkpoint.dir");
  resolve_device(recipe);  // cuda without CUDA or a device is bad input, found before anything is written
  const std::optional<CheckpointInfo> resume = resolve_resume(recipe, opts, root, hash);
  // An unusable checkpoint directory is bad input: found before anything else is written.
  if (recipe.checkpoint.every > 0) make_directories(root);
  TrainSummary summary;
  std::mutex mu;
  run_world(recipe, [&](Communicator& comm) {
    const bool lead = comm.rank() == 0;  // rank 0 alone writes the run directory and the log
    if (lead && !opts.run_dir.empty()) {
      make_directories(opts.run_dir);
      write_file_atomic(opts.run_dir + "/recipe.resolved.toml", to_toml(recipe) + resolved_comment(plan, data));
    }
    if (lead && opts.log) {
      *opts.log << "laconic: " << plan.model << ", " << comm.size() << " ranks (" << comm.backend()
                << " backend, " << name_of(recipe.distributed.algorithm) << " all-reduce), global batch "
                << plan.global_batch << ", " << plan.steps << " steps (" << std::fixed << std::setprecision(2)
                << static_cast<double>(plan.steps) / static_cast<double>(plan.steps_per_epoch) << " epochs)"
                << std::endl;
      *opts.log << "laconic: data " << data.describe << std::endl;
      *opts.log << "laconic: " << name_of(recipe.optimizer.name) << ", peak lr " << std::defaultfloat
                << std::setprecision(6) << plan.lr << " (" << name_of(recipe.schedule.scaling_rule)
                << " scaling from batch " << (recipe.schedule.base_batch > 0 ? recipe.schedule.base_batch : plan.global_batch)
                << " at lr " << recipe.optimizer.lr << "), warmup " << plan.warmup_steps << " steps, "
                << name_of(recipe.schedule.decay) << " decay" << std::endl;
      if (!std::isnan(data.baseline_loss))
        *opts.log << "laconic: unigram baseline (context-free) MLM loss " << std::fixed << std::setprecision(3)
                  << data.baseline_loss << " nats" << std::endl;
      if (recipe.network.groups > 0)
        *opts.log << "laconic: simulating " << recipe.network.groups << " groups, "
                  << format_bandwidth(recipe.network.intra_bandwidth.bytes_per_s) << " / "
                  << format_duration(recipe.network.intra_latency.seconds) << " inside, "
                  << format_bandwidth(recipe.network.inter_bandwidth.bytes_per_s) << " / "
                  << format_duration(recipe.network.inter_latency.seconds) << " between; compute "
                  << name_of(recipe.network.compute) << std::endl;
      if (!opts.run_dir.empty()) *opts.log << "laconic: writing " << opts.run_dir << "/" << std::endl;
    }
    const std::optional<CheckpointInfo> agreed = agree_on_resume(comm, opts, resume, root);
    Worker worker(recipe, data, plan, opts, comm, agreed ? &*agreed : nullptr, root, hash);
    TrainSummary s = worker.run();
    if (lead) {
      if (!opts.run_dir.empty()) write_file_atomic(opts.run_dir + "/summary.json", summary_json(s));
      std::lock_guard lock(mu);
      summary = std::move(s);
    }
  });
  return summary;
}

}  // namespace laconic
