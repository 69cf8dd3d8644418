#include "framework/sync/periodic.h"

#include <algorithm>
#include <sstream>

#include "framework/core/check.h"
#include "framework/core/timer.h"
#include "framework/ops/dispatch.h"

namespace laconic {

PeriodicAveraging::PeriodicAveraging(PeriodicOptions opts, std::unique_ptr<Reducer> reducer)
    : opts_(opts),
      reducer_(std::move(reducer)),
      // weight decay 0: the inner optimizer already decays; Sgd checks momentum and Nesterov.
      outer_(SgdOptions{opts.outer_momentum, opts.nesterov, 0.0}) {
  LC_CHECK(opts_.period >= 1, "period ", opts_.period);
  LC_CHECK(opts_.warmup_steps >= 0, "warmup_steps ", opts_.warmup_steps);
  LC_CHECK(opts_.outer_lr > 0.0, "outer_lr ", opts_.outer_lr);
  LC_CHECK(opts_.bucket_mb > 0.0, "bucket_mb ", opts_.bucket_mb);
  LC_CHECK(reducer_ != nullptr, "PeriodicAveraging needs a reducer");
}

void PeriodicAveraging::prepare(std::int64_t /*first_step*/) {
  const ParamStore& store = this->store();
  shadow_ = ParamStore();
  for (const auto& v : store.views()) shadow_.add(v.name, v.shape, v.group);
  shadow_.finalize();
  shadow_.to(store.device());  // theta_global and the outer optimizer live beside the parameters
  for (std::size_t i = 0; i < store.views().size(); ++i)
    LC_CHECK(shadow_.view(i).offset == store.view(i).offset, "parameter '", store.view(i).name,
             "' is not where its shape puts it");
  anchor(store);
  outer_.prepare(shadow_);
  buckets_ = make_buckets(store, opts_.bucket_mb);
  reducer_->prepare(buckets_);
}

void PeriodicAveraging::after_backward(std::int64_t step) {
  if (step >= opts_.warmup_steps) return;  // a local step
  Stopwatch t;
  comm().all_reduce(store().grads(), ReduceOp::avg);
  comm_s_ += t.seconds();
}

bool PeriodicAveraging::after_update(std::int64_t step) {
  LC_CHECK(bound(), "PeriodicAveraging::after_update before start()");
  if (step < opts_.warmup_steps) {  // synchronous: every replica holds the same parameters
    anchor(store());
    return false;
  }
  if (!averages_params(step)) return false;
  sync((step + 1 - opts_.warmup_steps) / opts_.period - 1);
  return true;
}

void PeriodicAveraging::begin(std::int64_t /*step*/) {
  LC_CHECK(bound(), "PeriodicAveraging::begin before start()");
  anchor(store());
}

void PeriodicAveraging::anchor(const ParamStore& store) {
  copy_bytes(shadow_.params().data(), shadow_.device(), store.params().data(), store.device(),
             store.params().size_bytes());
}

void PeriodicAveraging::finish(std::int64_t step) {
  LC_CHECK(bound(), "PeriodicAveraging::finish before start()");
  if (step < opts_.warmup_steps || averages_params(step)) return;
  sync((step + 1 - opts_.warmup_steps) / opts_.period);  // the syncs before this one
}

void PeriodicAveraging::sync(std::int64_t outer_step) {
  ParamStore& store = this->store();
  Communicator& comm = this->comm();
  const std::span<const float> params = store.params();
  const std::span<const float> global = shadow_.params();
  const std::span<float> delta = shadow_.grads();
  // Delta = theta_global - theta_local, as a copy and an axpy with -1 (g + (-1)p rounds exactly
  // like g - p, fused or not), on whichever device the parameters are.
  const ops::Kernels& k = ops::kernels(store.device());
  copy_bytes(delta.data(), shadow_.device(), global.data(), shadow_.device(), delta.size_bytes());
  k.axpy(delta.data(), -1.0f, params.data(), delta.size());
  Stopwatch t;
  for (const BucketLayout& b : buckets_)
    reducer_->reduce(delta.subspan(b.begin, b.size), b, outer_step, comm);
  comm_s_ += t.seconds();
  // Every rank holds the same anchor and (the reducer guarantees) the same averaged Delta, so the
  // outer step gives every rank the same bits.
  outer_.step(shadow_, opts_.outer_lr);
  copy_bytes(store.params().data(), store.device(), global.data(), shadow_.device(), global.size_bytes());
}

std::vector<StateTensor> PeriodicAveraging::state() {
  std::vector<StateTensor> out;
  out.push_back({"periodic.global", shadow_.params(), shadow_.device()});
  for (const StateTensor& s : outer_.state()) out.push_back({"periodic.outer." + s.name, s.data, s.device});
  for (StateTensor& s : reducer_->state()) out.push_back(std::move(s));
  return out;
}

std::string PeriodicAveraging::describe() const {
  std::ostringstream os;
  os << (is_local_sgd() ? "local SGD" : "DiLoCo") << " (every " << opts_.period << " steps";
  if (opts_.warmup_steps > 0) os << " after " << opts_.warmup_steps << " synchronous steps";
  if (!is_local_sgd()) {
    os << ", outer SGD lr " << opts_.outer_lr;
    if (opts_.outer_momentum > 0)
      os << (opts_.nesterov ? " Nesterov " : " momentum ") << opts_.outer_momentum;
  }
  os << ", " << (is_local_sgd() ? "parameter deltas" : "pseudo-gradients") << " by " << reducer_->describe()
     << ", " << buckets_.size() << " buckets of <= " << opts_.bucket_mb << " MiB)";
  return os.str();
}

}  // namespace laconic
