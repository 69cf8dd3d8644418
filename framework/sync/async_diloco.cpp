#include "framework/sync/async_diloco.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"

namespace laconic {

AsyncDiloco::AsyncDiloco(AsyncDilocoOptions opts) : opts_(std::move(opts)) {
  LC_CHECK(opts_.period >= 1, "async_diloco: period ", opts_.period, ": expected at least 1");
  LC_CHECK(opts_.outer_lr > 0, "async_diloco: outer_lr ", opts_.outer_lr, ": expected > 0");
  LC_CHECK(opts_.momentum >= 0 && opts_.momentum < 1, "async_diloco: momentum ", opts_.momentum, ": expected [0, 1)");
  LC_CHECK(opts_.window >= 0, "async_diloco: window ", opts_.window, ": expected >= 0");
  LC_CHECK(opts_.activation >= 0, "async_diloco: activation ", opts_.activation, ": expected >= 0");
  LC_CHECK(opts_.first_step >= 0, "async_diloco: first_step ", opts_.first_step);
  for (const double f : opts_.slowdown) LC_CHECK(f >= 1, "async_diloco: slowdown ", f, ": expected >= 1");
}

AsyncDiloco::~AsyncDiloco() = default;

void AsyncDiloco::prepare(std::int64_t /*first_step*/) {
  if (store().device() != Device::cpu)
    LC_INPUT_ERROR("sync.strategy = \"async_diloco\" runs on the host only (no CUDA kernels yet): use device = \"cpu\"");
  world_ = comm().size();
  me_ = comm().rank();
  window_ = opts_.window > 0 ? opts_.window : world_;
  LC_CHECK(opts_.activation <= 1.0 / static_cast<double>(window_), "async_diloco: activation ", opts_.activation,
           ": expected at most 1/window = ", 1.0 / static_cast<double>(window_));
  const auto world = static_cast<std::size_t>(world_);
  q_.assign(world, 100.0f);
  if (opts_.speeds == ReplicaSpeeds::network && !opts_.slowdown.empty()) {
    LC_CHECK(opts_.slowdown.size() == world, "async_diloco: ", opts_.slowdown.size(), " slowdowns for ", world_, " ranks");
    const double fastest = *std::min_element(opts_.slowdown.begin(), opts_.slowdown.end());
    for (std::size_t r = 0; r < world; ++r)
      q_[r] = static_cast<float>(std::llround(100.0 * opts_.slowdown[r] / fastest));
  }
  if (opts_.speeds == ReplicaSpeeds::measured) {
    std::fill(q_.begin(), q_.end(), 0.0f);  // until the first round has been timed
    calibration_.assign(static_cast<std::size_t>(opts_.period), 0.0f);
    gathered_.assign(world, 0.0f);
  }
  const ParamStore& store = this->store();
  const std::span<const float> p = store.params();
  anchor_.assign(p.begin(), p.end());
  sum_.assign(p.size(), 0.0f);
  server_ = ParamStore();
  for (const ParamView& v : store.views()) server_.add(v.name, v.shape, v.group);
  server_.finalize();
  std::copy(p.begin(), p.end(), server_.params().begin());
  if (opts_.delayed_nesterov) {
    momentum_.assign(p.size(), 0.0f);
  } else {
    outer_ = std::make_unique<Sgd>(SgdOptions{opts_.momentum, opts_.momentum > 0, 0.0});
    outer_->prepare(server_);
  }
  arriving_.reserve(world);
  count_ = -1;
}

// Measured speeds start after the first round, which every replica computes whole.
std::int64_t AsyncDiloco::origin() const { return opts_.speeds == ReplicaSpeeds::measured ? opts_.period : 0; }

bool AsyncDiloco::calibrating(std::int64_t u) const { return u < origin(); }

std::int64_t AsyncDiloco::local_steps(int r, std::int64_t u) const {
  if (u < 0) return 0;
  const std::int64_t origin = this->origin();
  if (u + 1 <= origin) return u + 1;
  const auto q = static_cast<std::int64_t>(q_[static_cast<std::size_t>(r)]);
  LC_CHECK(q >= 100, "async_diloco: replica ", r, "'s speed is not known at tick ", u);
  return origin + (u + 1 - origin) * 100 / q;
}

std::int64_t AsyncDiloco::round(int r) const {
  const auto q = static_cast<std::int64_t>(q_[static_cast<std::size_t>(r)]);
  if (!opts_.dylu || q == 0) return opts_.period;
  const auto fastest = static_cast<std::int64_t>(*std::min_element(q_.begin(), q_.end()));
  return std::max<std::int64_t>(1, opts_.period * fastest / q);
}

bool AsyncDiloco::arrives(int r, std::int64_t u) const {
  const std::int64_t l = local_steps(r, u);
  if (u < 0 || l == local_steps(r, u - 1)) return false;
  const std::int64_t origin = this->origin();
  if (l <= origin) return l == origin;  // the timed first round ends
  return (l - origin) % round(r) == 0;
}

// The arrivals of ticks [0, u): each replica's finished rounds.
std::int64_t AsyncDiloco::arrivals_before(std::int64_t u) const {
  const std::int64_t origin = this->origin();
  std::int64_t n = 0;
  for (int r = 0; r < world_; ++r) {
    const std::int64_t l = local_steps(r, u - 1);
    if (origin > 0 && l >= origin) ++n;
    if (l > origin) n += (l - origin) / round(r);
  }
  return n;
}

bool AsyncDiloco::computes(std::int64_t step) const {
  LC_CHECK(bound(), "AsyncDiloco::computes before start()");
  const std::int64_t u = step - opts_.first_step;
  return u < 0 || local_steps(me_, u) > local_steps(me_, u - 1);
}

bool AsyncDiloco::averages_params(std::int64_t step) const {
  if (step == opts_.last_step) return true;
  const std::int64_t u = step - opts_.first_step;
  for (int r = 0; r < world_; ++r)
    if (arrives(r, u)) return true;
  return false;
}

void AsyncDiloco::step_computed(std::int64_t step, double seconds) {
  const std::int64_t u = step - opts_.first_step;
  if (calibrating(u) && u >= 0) calibration_[static_cast<std::size_t>(u)] = static_cast<float>(seconds);
}

// Every rank's median forward and backward time over the first round, relative to the fastest's,
// rounded to 0.1: the slowdowns from here on.
void AsyncDiloco::calibrate() {
  std::vector<float>& t = calibration_;
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  std::fill(gathered_.begin(), gathered_.end(), 0.0f);
  gathered_[static_cast<std::size_t>(me_)] = std::max(t[t.size() / 2], 1e-9f);
  Stopwatch timer;
  comm().all_reduce(std::span<float>(gathered_), ReduceOp::sum);
  comm_s_ += timer.seconds();
  const float fastest = *std::min_element(gathered_.begin(), gathered_.end());
  for (std::size_t r = 0; r < q_.size(); ++r)
    q_[r] = static_cast<float>(10 * std::max<long long>(10, std::llround(10.0 * gathered_[r] / fastest)));
}

bool AsyncDiloco::after_update(std::int64_t step) {
  LC_CHECK(bound(), "AsyncDiloco::after_update before start()");
  const std::int64_t u = step - opts_.first_step;
  if (u < 0) return false;
  if (opts_.speeds == ReplicaSpeeds::measured && u == opts_.period - 1 && q_[0] == 0) calibrate();
  if (count_ < 0) count_ = arrivals_before(u);
  arriving_.clear();
  const bool last = step == opts_.last_step;
  for (int r = 0; r < world_; ++r)
    if (last || arrives(r, u))
      arriving_.push_back({local_steps(r, u) * static_cast<std::int64_t>(q_[static_cast<std::size_t>(r)]), r});
  if (arriving_.empty()) return false;
  std::sort(arriving_.begin(), arriving_.end(), [](const Arrival& a, const Arrival& b) {
    return a.finished != b.finished ? a.finished < b.finished : a.rank < b.rank;
  });
  bool mine = false;
  for (std::size_t i = 0; i < arriving_.size();) {
    const std::int64_t room = window_ - count_ % window_;  // arrivals up to the window's boundary
    const auto k = static_cast<std::size_t>(std::min<std::int64_t>(room, static_cast<std::int64_t>(arriving_.size() - i)));
    const std::span<const Arrival> run(arriving_.data() + i, k);
    for (const Arrival& a : run) mine = mine || a.rank == me_;
    apply(run, static_cast<std::int64_t>(k) == room);
    i += k;
  }
  return mine;
}

// One run of arrivals inside a window: their pseudo-gradients' sum reaches every rank, the server
// steps, and the run's replicas restart from its parameters.
void AsyncDiloco::apply(std::span<const Arrival> run, bool boundary) {
  const std::span<float> p = store().params();
  const std::size_t n = p.size();
  bool in = false;
  for (const Arrival& a : run) in = in || a.rank == me_;
  if (in) {
    for (std::size_t i = 0; i < n; ++i) sum_[i] = anchor_[i] - p[i];
  } else {
    std::fill(sum_.begin(), sum_.end(), 0.0f);
  }
  Stopwatch timer;
  if (run.size() == 1) {
    comm().broadcast(buf(std::span<float>(sum_)), run[0].rank);
  } else {
    comm().all_reduce(std::span<float>(sum_), ReduceOp::sum);
  }
  comm_s_ += timer.seconds();
  ++stats_.calls;
  stats_.input_bytes += n * sizeof(float);
  stats_.value_bytes += n * sizeof(float);
  // D += sum / N (divided as an average is, so N equal arrivals give the all-reduce's mean bits).
  const auto N = static_cast<float>(window_);
  const bool fresh = count_ % window_ == 0;
  float* theta = server_.params().data();
  float* d = server_.grads().data();
  for (std::size_t i = 0; i < n; ++i) {
    sum_[i] /= N;
    d[i] = fresh ? sum_[i] : d[i] + sum_[i];
  }
  const auto eps = static_cast<float>(opts_.outer_lr);
  if (opts_.delayed_nesterov) {
    const auto beta = static_cast<float>(opts_.momentum);
    const auto c = static_cast<float>(opts_.activation);
    // The arrivals before the boundary see the old momentum at weight c each; the boundary's the
    // new one at 1 - cN + c.
    const float old_share = c * static_cast<float>(boundary ? run.size() - 1 : run.size());
    const float new_share = 1.0f - c * N + c;
    for (std::size_t i = 0; i < n; ++i) {
      const float m = momentum_[i];
      if (boundary) {
        const float m_new = beta * m + d[i];
        theta[i] -= eps * (old_share * beta * m + new_share * beta * m_new + sum_[i]);
        momentum_[i] = m_new;
      } else {
        theta[i] -= eps * (old_share * beta * m + sum_[i]);
      }
    }
  } else if (boundary) {
    outer_->step(server_, opts_.outer_lr);  // DiLoCo's outer step on D
  }
  if (boundary) std::fill(d, d + n, 0.0f);
  count_ += static_cast<std::int64_t>(run.size());
  if (in) {
    std::copy(theta, theta + n, p.begin());
    std::copy(theta, theta + n, anchor_.begin());
  }
}

std::vector<StateTensor> AsyncDiloco::state() {
  std::vector<StateTensor> out{{"async.anchor", std::span<float>(anchor_), Device::cpu},
                               {"async.server", server_.params(), Device::cpu},
                               {"async.buffer", server_.grads(), Device::cpu}};
  if (opts_.delayed_nesterov) {
    out.push_back({"async.momentum", std::span<float>(momentum_), Device::cpu});
  } else {
    for (const StateTensor& s : outer_->state()) out.push_back({"async.outer." + s.name, s.data, s.device});
  }
  if (opts_.speeds == ReplicaSpeeds::measured) {
    out.push_back({"async.speeds", std::span<float>(q_), Device::cpu});
    out.push_back({"async.calibration", std::span<float>(calibration_), Device::cpu});
  }
  return out;
}

std::string AsyncDiloco::describe() const {
  std::ostringstream os;
  os << "asynchronous DiLoCo (rounds of " << opts_.period << " local steps" << (opts_.dylu ? " scaled by speed (DyLU)" : "")
     << ", each arrival applied at once: "
     << (opts_.delayed_nesterov ? "Delayed Nesterov" : "buffered Nesterov") << " outer lr " << opts_.outer_lr
     << " momentum " << opts_.momentum << " over windows of "
     << (opts_.window > 0 ? std::to_string(opts_.window) + " arrivals" : std::string("as many arrivals as replicas"))
     << "; speeds "
     << (opts_.speeds == ReplicaSpeeds::network ? "from [network]" : "measured over the first round") << ")";
  return os.str();
}

}  // namespace laconic
