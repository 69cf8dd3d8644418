#include "framework/train/hooks.h"

#include <algorithm>
#include <set>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "core/check.h"
#include "core/units.h"
#include "framework/train/metrics.h"
#include "framework/train/run_dir.h"
#include "framework/train/options.h"
#include "framework/train/summary.h"
#include "optimizers/clip.h"
#include "optimizers/noise_scale.h"

namespace laconic {

double StepState::reduced_norm(const Loop& loop) {
  if (reduced_norm_) return *reduced_norm_;
  const double norm = global_grad_norm(loop.update_store().grads(), loop.device());
  if (TensorSums* sums = loop.sync.tensor_sums()) {  // sharded: the shards' squares, added
    double sq = norm * norm;
    sums->sum(std::span(&sq, 1));
    reduced_norm_ = std::sqrt(sq);
  } else {
    reduced_norm_ = norm;
  }
  return *reduced_norm_;
}

namespace {

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

// [guards] nonfinite: "skip" asks every rank before anything is reduced and skips the step on all
// of them (error-feedback residuals, optimizer state and parameters stay as they were); "abort"
// checks the reduced gradients.
class NonfiniteGuard final : public StepHook {
 public:
  explicit NonfiniteGuard(Loop& loop) : loop_(loop), g_(loop.spec.recipe.guards) {}

  bool admit(StepState& s) override {
    if (g_.nonfinite != NonfiniteKind::skip) return true;
    // ZeRO-2 holds no whole gradients, only its shard's, reduced already: a non-finite one
    // anywhere reached some rank's shard.
    const ParamStore& held = loop_.store().grads_staged() ? loop_.update_store() : loop_.store();
    float bad = all_finite(held.grads(), loop_.device()) ? 0.0f : 1.0f;
    loop_.comm.all_reduce(std::span(&bad, 1), ReduceOp::max);
    if (bad == 0.0f) {
      state_[1] = 0;
      return true;
    }
    ++state_[0];
    if (++state_[1] > g_.max_consecutive_skips)
      throw Error(detail::concat("non-finite gradients in ", state_[1], " consecutive steps (guards.max_consecutive_skips = ",
                                 g_.max_consecutive_skips, ")"));
    if (loop_.lead() && loop_.opts.log)
      *loop_.opts.log << "laconic: step " << s.step + 1 << ": non-finite gradient on some rank, step skipped ("
                      << state_[0] << " so far)" << std::endl;
    return false;
  }

  void after_reduce(StepState&) override {
    // Sharded, each rank checks the reduced gradients it holds (its shard): the rank that finds
    // one fails the run, as any rank's error does.
    if (g_.nonfinite == NonfiniteKind::abort && !all_finite(loop_.update_store().grads(), loop_.device()))
      throw Error("non-finite gradient (guards.nonfinite = \"abort\"; \"skip\" skips such steps)");
  }

  void save(ShardWriter& w) override { w.add("guard", std::span<const std::int64_t>(state_)); }
  void load(const ShardReader& r) override { r.read("guard", std::span<std::int64_t>(state_)); }
  void finish(TrainSummary& s) override { s.skipped_steps = state_[0]; }

 private:
  Loop& loop_;
  const GuardsConfig& g_;
  std::int64_t state_[2] = {0, 0};  // steps skipped, of them consecutive
};

// B_simple (McCandlish et al. 2018) from the mean of the workers' |g_b|^2 (one float on the wire)
// and |G_B|^2 of the averaged gradients.
class NoiseScale final : public StepHook {
 public:
  explicit NoiseScale(Loop& loop)
      : loop_(loop),
        est_(NoiseScaleOptions{static_cast<std::int64_t>(loop.spec.recipe.train.micro_batch) * loop.spec.recipe.train.grad_accum,
                               loop.spec.plan.global_batch}) {}

  void after_reduce(StepState& s) override {
    float mean_local = static_cast<float>(s.local_sq);
    loop_.comm.all_reduce(std::span(&mean_local, 1), ReduceOp::avg);
    const double norm = s.reduced_norm(loop_);
    est_.update(mean_local, norm * norm);
    s.noise_scale = est_.simple_noise_scale();
  }

  void save(ShardWriter& w) override {
    const NoiseScaleState& st = est_.state();
    state_[0] = std::bit_cast<std::int64_t>(st.grad_sq_ema);
    state_[1] = std::bit_cast<std::int64_t>(st.trace_ema);
    state_[2] = st.steps;
    w.add("noise_scale", std::span<const std::int64_t>(state_));
  }
  void load(const ShardReader& r) override {
    r.read("noise_scale", std::span<std::int64_t>(state_));
    est_.load({std::bit_cast<double>(state_[0]), std::bit_cast<double>(state_[1]), state_[2]});
  }

 private:
  Loop& loop_;
  NoiseScaleEstimator est_;
  std::int64_t state_[3] = {};
};

// optimizer.grad_clip: the global norm after averaging, so every rank scales identically.
class Clipping final : public StepHook {
 public:
  explicit Clipping(Loop& loop) : loop_(loop) {}
  void after_reduce(StepState& s) override {
    const double norm = s.reduced_norm(loop_);
    clip_to_norm(loop_.update_store().grads(), norm, loop_.spec.recipe.optimizer.grad_clip, loop_.device());
    s.grad_norm = norm;
  }

 private:
  Loop& loop_;
};

// TrainOptions::on_step: tests observe every rank's replica after every step.
class OnStep final : public StepHook {
 public:
  explicit OnStep(Loop& loop) : loop_(loop) {}
  void after_step(StepState& s) override { loop_.opts.on_step(loop_.rank(), s.step, loop_.store()); }

 private:
  Loop& loop_;
};

// The parameters on the host: the store's own span on cpu, else a copy in `stage`.
const float* on_host(const Loop& loop, std::vector<float>& stage) {
  const std::span<const float> params = loop.store().params();
  if (loop.device() == Device::cpu) return params.data();
  if (stage.size() < params.size()) stage.resize(params.size());
  copy_bytes(stage.data(), Device::cpu, params.data(), loop.device(), params.size_bytes());
  return stage.data();
}

// guards.check_every: the ranks compare a 64-bit hash of each parameter tensor whenever the
// strategy says replicas agree; the first that differs names the drift.
class ReplicaCheck final : public StepHook {
 public:
  explicit ReplicaCheck(Loop& loop) : loop_(loop), every_(loop.spec.recipe.guards.check_every) {}

  void after_step(StepState& s) override {
    if ((s.step + 1) % every_ != 0 || !loop_.sync.replicas_agree_after(s.step)) return;
    const auto& views = loop_.store().views();
    const std::size_t n = views.size();
    const int world = loop_.comm.size();
    hashes_.resize(n * (static_cast<std::size_t>(world) + 1));
    std::uint64_t* mine = hashes_.data();
    const float* params = on_host(loop_, stage_);
    for (std::size_t v = 0; v < n; ++v) mine[v] = hash_bytes(params + views[v].offset, views[v].numel * sizeof(float));
    std::uint64_t* all = mine + n;
    loop_.control.all_gather(CBuf(mine, n * 8, DType::u8), Buf{all, n * 8 * static_cast<std::size_t>(world), DType::u8});
    for (int q = 1; q < world; ++q)
      for (std::size_t v = 0; v < n; ++v)
        if (all[static_cast<std::size_t>(q) * n + v] != all[v])
          throw Error(detail::concat("replica drift: rank ", q, "'s ", views[v].name, " differs from rank 0's (",
                                     "guards.check_every = ", every_, ")"));
  }

 private:
  Loop& loop_;
  std::int64_t every_;
  std::vector<std::uint64_t> hashes_;  // mine, then everyone's
  std::vector<float> stage_;
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

std::string human_seconds(double s) {
  std::ostringstream os;
  if (s < 60) os << std::fixed << std::setprecision(1) << s << "s";
  else os << static_cast<long>(s) / 60 << "m" << std::setw(2) << std::setfill('0') << static_cast<long>(s) % 60 << "s";
  return os.str();
}


// The run's reporting: every rank adds its examples' losses to the interval; rank 0 writes the log
// lines, metrics.jsonl and the live progress line.
class Reporter final : public StepHook {
 public:
  Reporter(Loop& loop, const Evaluator& eval) : loop_(loop), eval_(eval), plan_(loop.spec.plan) {
    // The bytes of a fresh run's first record count from here (the session makes the hooks after
    // the strategy's start broadcast); a resume's load() then sets the checkpoint's.
    state_[2] = std::bit_cast<std::int64_t>(static_cast<double>(loop.ledger.totals().bytes.sent));
    const NetworkConfig& n = loop.spec.recipe.network;
    if (loop.spec.simulate && std::count(n.stragglers.ranks.begin(), n.stragglers.ranks.end(), loop.rank()))
      slowdown_ = n.straggler_slowdown;
  }

  // A record at every multiple of train.log_every, at every evaluation and at the last step. Its
  // loss is the mean over every rank's examples since the last multiple of log_every (records
  // between multiples do not restart the interval), so a run resumed from any checkpoint, which
  // holds the interval so far, writes the same records as the uninterrupted run.
  void after_step(StepState& s) override {
    interval_sum_ += s.loss_sum;
    interval_count_ += s.loss_count;
    const std::int64_t done = s.step + 1;
    const bool grid = done % loop_.spec.recipe.train.log_every == 0, last = done == plan_.steps;
    const bool eval_now = eval_.due(done);
    if (!(grid || last || eval_now)) {
      if (loop_.lead()) progress(done, loop_.ledger.wall_s());
      return;
    }
    // Every rank's (sum, count) as doubles, added in rank order: exact and the same on every
    // backend (a native all-reduce would add in an order of its own); and its compute per step.
    const double per_step = (loop_.ledger.compute_s() - last_compute_) * slowdown_ / static_cast<double>(done - last_step_);
    last_compute_ = loop_.ledger.compute_s();
    const double mine[3] = {interval_sum_, interval_count_, per_step};
    gathered_.resize(3 * static_cast<std::size_t>(loop_.control.size()));
    loop_.control.all_gather(CBuf(mine, sizeof mine, DType::u8), Buf{gathered_.data(), gathered_.size() * sizeof(double), DType::u8});
    double sum = 0, count = 0;
    for (std::size_t q = 0; q < gathered_.size(); q += 3) sum += gathered_[q], count += gathered_[q + 1];
    last_loss_ = sum / std::max(1.0, count);
    if (grid || last) interval_sum_ = interval_count_ = 0;
    if (loop_.lead()) {
      step_times_.clear();
      for (std::size_t q = 2; q < gathered_.size(); q += 3) step_times_.push_back(gathered_[q]);
      write(s, done, eval_now);
    }
    last_step_ = done;
  }

  // The interval so far, the previous record's step and bytes, and the last loss.
  void save(ShardWriter& w) override {
    state_[0] = std::bit_cast<std::int64_t>(interval_sum_);
    state_[1] = std::bit_cast<std::int64_t>(interval_count_);
    state_[3] = std::bit_cast<std::int64_t>(last_loss_);
    state_[4] = last_step_;
    w.add("reporter", std::span<const std::int64_t>(state_));
  }
  void load(const ShardReader& r) override {
    r.read("reporter", std::span<std::int64_t>(state_));
    interval_sum_ = std::bit_cast<double>(state_[0]);
    interval_count_ = std::bit_cast<double>(state_[1]);
    last_loss_ = std::bit_cast<double>(state_[3]);
    last_step_ = state_[4];
  }

  void finish(TrainSummary& s) override {
    s.final_loss = last_loss_;
    s.records = std::move(records_);
  }

 private:
  void write(const StepState& s, std::int64_t done, bool eval_now) {
    if (!metrics_ && !loop_.opts.run_dir.empty()) open_metrics();
    const double now = loop_.ledger.wall_s();
    const RunCounters c = loop_.ledger.totals();
    MetricsRecord r;
    r.step = done;
    r.epoch = epoch(done);
    r.loss = last_loss_;
    r.lr = s.lr;
    r.bytes_sent = c.bytes.sent;
    r.bytes_recv = c.bytes.recv;
    r.bytes_per_step = (static_cast<double>(c.bytes.sent) - std::bit_cast<double>(state_[2])) /
                       static_cast<double>(done - last_step_);
    r.comm_s = loop_.sync.comm_seconds();
    r.exposed_comm_s = loop_.ledger.exposed_comm_s();
    r.compression_ratio = c.reducer.compression_ratio();
    r.compute_s = loop_.ledger.compute_s();
    r.wall_s = now;
    // Training throughput: the evaluation just run is not training time.
    r.examples_per_s = static_cast<double>((done - std::max(last_step_, loop_.ledger.first_step())) * plan_.global_batch) /
                       std::max(1e-9, now - last_wall_ - (eval_now ? eval_.last_seconds() : 0.0));
    r.grad_norm = s.grad_norm;
    r.noise_scale = s.noise_scale;
    if (const SimCommunicator* sim = loop_.sim) {  // the live estimate; the replay replaces it
      r.sim_time_s = sim->clock();
      r.sim_comm_s = sim->comm_time();
    }
    if (loop_.spec.simulate) {
      r.bytes_intra = loop_.comm.tier_bytes(0).sent;
      r.bytes_inter = loop_.comm.tier_bytes(1).sent;
    }
    if (eval_now) {
      r.eval_loss = eval_.last().loss;
      r.eval_accuracy = eval_.last().accuracy;
    }
    step_times(r);
    if (loop_.elastic && loop_.elastic->syncs() > 0) r.quorum_size = loop_.elastic->last_quorum_size();
    if (metrics_ || loop_.opts.on_record) {
      const std::string line = to_json_line(r);
      if (metrics_) metrics_->write_line(line);
      if (loop_.opts.on_record) loop_.opts.on_record(line);
    }
    records_.push_back(r);
    if (loop_.opts.log) log(r);
    last_wall_ = now;
    state_[2] = std::bit_cast<std::int64_t>(static_cast<double>(c.bytes.sent));
  }

  // The ranks' compute per step in this record, and the straggler warning: a rank slower than
  // guards.straggler_factor x the median in guards.straggler_records records in a row, once.
  void step_times(MetricsRecord& r) {
    const auto slowest = std::max_element(step_times_.begin(), step_times_.end());
    r.slowest_rank = slowest - step_times_.begin();
    r.step_time_max_s = *slowest;
    sorted_ = step_times_;
    std::sort(sorted_.begin(), sorted_.end());
    const std::size_t n = sorted_.size();
    r.step_time_median_s = n % 2 ? sorted_[n / 2] : 0.5 * (sorted_[n / 2 - 1] + sorted_[n / 2]);
    const GuardsConfig& g = loop_.spec.recipe.guards;
    const bool slow = n > 1 && r.step_time_max_s > g.straggler_factor * r.step_time_median_s;
    run_ = slow && r.slowest_rank == run_rank_ ? run_ + 1 : slow ? 1 : 0;
    run_rank_ = slow ? r.slowest_rank : -1;
    if (run_ == g.straggler_records && loop_.opts.log && warned_.insert(r.slowest_rank).second) {
      clear_progress();
      *loop_.opts.log << "laconic: warning: rank " << r.slowest_rank << " is a straggler: " << std::defaultfloat
                      << std::setprecision(3) << 1e3 * r.step_time_max_s << " ms of compute per step against a median of "
                      << 1e3 * r.step_time_median_s << " ms (" << r.step_time_max_s / r.step_time_median_s << "x) in "
                      << run_ << " records in a row (guards.straggler_factor = " << g.straggler_factor << ")" << std::endl;
    }
  }

  void log(const MetricsRecord& r) {
    std::ostringstream line;
    line << "step " << std::setw(static_cast<int>(std::to_string(plan_.steps).size())) << r.step << "/" << plan_.steps;
    if (!std::isnan(r.epoch)) line << " | epoch " << std::fixed << std::setprecision(2) << r.epoch;
    line << " | loss " << std::fixed << std::setprecision(4) << r.loss
         << " | lr " << std::setprecision(5) << r.lr << " | " << std::setprecision(0) << r.examples_per_s
         << " ex/s | sent " << format_bytes(static_cast<double>(r.bytes_sent)) << " | comm " << std::setprecision(0)
         << 100.0 * r.exposed_comm_s / std::max(1e-9, r.wall_s) << "%";
    if (r.compression_ratio != 1.0) line << " | x" << std::setprecision(1) << r.compression_ratio;
    if (!std::isnan(r.noise_scale)) line << " | B_noise " << std::setprecision(0) << r.noise_scale;
    if (!std::isnan(r.sim_time_s))
      line << " | sim " << human_seconds(r.sim_time_s) << " (comm " << std::setprecision(0)
           << 100.0 * r.sim_comm_s / std::max(1e-12, r.sim_time_s) << "%)";
    if (!std::isnan(r.eval_loss)) line << " | eval loss " << std::setprecision(4) << r.eval_loss;
    if (!std::isnan(r.eval_accuracy)) line << " acc " << std::setprecision(2) << 100.0 * r.eval_accuracy << "%";
    clear_progress();
    *loop_.opts.log << line.str() << std::endl;
  }

  // metrics.jsonl, opened at the first record; a resumed run keeps the records up to the step it
  // resumed from and drops any the interrupted run wrote after its checkpoint.
  void open_metrics() {
    const std::string path = loop_.opts.run_dir + "/metrics.jsonl";
    const bool resumed = loop_.ledger.resumed();
    if (resumed && std::filesystem::exists(path)) {
      std::ifstream in(path);
      std::string kept;
      for (std::string line; std::getline(in, line);) {
        const nlohmann::json rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (rec.is_object() && rec.value("step", std::int64_t{0}) <= loop_.ledger.first_step()) kept += line + "\n";
      }
      write_file_atomic(path, kept);
    }
    metrics_ = std::make_unique<JsonlWriter>(path, resumed);
  }

  // Rewrites one terminal line in place, at most ~10 times a second.
  void progress(std::int64_t step, double wall_s) {
    std::ostream* log = loop_.opts.log;
    if (!log || !loop_.opts.progress_line || wall_s - last_progress_ < 0.1) return;
    last_progress_ = wall_s;
    const double frac = static_cast<double>(step) / static_cast<double>(plan_.steps);
    constexpr int kBar = 30;
    const int filled = static_cast<int>(frac * kBar);
    const double eta = step > 0 ? wall_s / static_cast<double>(step) * static_cast<double>(plan_.steps - step) : 0;
    *log << "\r\033[K[" << std::string(filled, '#') << std::string(kBar - filled, '.') << "] " << step << "/"
         << plan_.steps << " " << std::fixed << std::setprecision(1) << 100 * frac << "% eta " << human_seconds(eta)
         << std::flush;
    progress_shown_ = true;
  }
  void clear_progress() {
    if (progress_shown_) *loop_.opts.log << "\r\033[K";
    progress_shown_ = false;
  }
  double epoch(std::int64_t step) const {
    if (plan_.external) return kAbsent;  // the caller's data: Laconic does not know its epochs
    return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, plan_.steps_per_epoch));
  }

  Loop& loop_;
  const Evaluator& eval_;
  const TrainPlan& plan_;
  std::unique_ptr<JsonlWriter> metrics_;
  double interval_sum_ = 0, interval_count_ = 0;  // this rank's, since the last multiple of log_every
  double last_loss_ = 0, last_wall_ = 0, last_progress_ = -1;
  std::int64_t last_step_ = 0;  // of the previous record
  std::int64_t state_[5] = {};  // checkpoint entry; [2] holds the bytes sent at the previous record
  std::vector<double> gathered_;  // every rank's interval (sum, count, compute per step)
  double last_compute_ = 0;       // loop_.ledger.compute_s() at the previous record
  double slowdown_ = 1;           // this rank's [network] straggler slowdown when simulated
  std::vector<double> step_times_, sorted_;  // rank 0: every rank's compute per step
  std::int64_t run_ = 0, run_rank_ = -1;     // records in a row the same rank was too slow
  std::set<std::int64_t> warned_;            // ranks named once already
  std::vector<MetricsRecord> records_;  // written by this process
  bool progress_shown_ = false;
};

}  // namespace

std::unique_ptr<StepHook> make_nonfinite_guard(Loop& loop) { return std::make_unique<NonfiniteGuard>(loop); }
std::unique_ptr<StepHook> make_noise_scale(Loop& loop) {
  return loop.spec.noise_scale ? std::make_unique<NoiseScale>(loop) : nullptr;
}
std::unique_ptr<StepHook> make_clipping(Loop& loop) {
  return loop.spec.recipe.optimizer.grad_clip > 0 ? std::make_unique<Clipping>(loop) : nullptr;
}
std::unique_ptr<StepHook> make_on_step(Loop& loop) { return loop.opts.on_step ? std::make_unique<OnStep>(loop) : nullptr; }
std::unique_ptr<StepHook> make_replica_check(Loop& loop) {
  return loop.spec.recipe.guards.check_every > 0 ? std::make_unique<ReplicaCheck>(loop) : nullptr;
}
std::unique_ptr<StepHook> make_reporter(Loop& loop, const Evaluator& eval) { return std::make_unique<Reporter>(loop, eval); }

// ---- Evaluator ----

Evaluator::Evaluator(Loop& loop) : loop_(loop) {
  if (!loop.data.eval) return;
  order_.resize(static_cast<std::size_t>(loop.data.eval->size()));
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::int64_t>(i);
}

bool Evaluator::due(std::int64_t done) const {
  const std::int64_t every = loop_.spec.recipe.train.eval_every;
  return (loop_.data.eval || loop_.opts.evaluate) && (done == loop_.spec.plan.steps || (every > 0 && done % every == 0));
}

void Evaluator::after_step(StepState& s) {
  if (!loop_.lead() || !due(s.step + 1)) return;
  Stopwatch t;
  const Recipe& r = loop_.spec.recipe;
  last_ = loop_.opts.evaluate ? loop_.opts.evaluate()
                              : evaluate(loop_.model, *loop_.data.eval, order_, r.train.micro_batch, r.run.seed, batch_);
  last_s_ = t.seconds();
}

void Evaluator::finish(TrainSummary& s) {
  s.eval_loss = last_.loss;
  s.eval_accuracy = last_.accuracy;
}

}  // namespace laconic
