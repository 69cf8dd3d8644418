#include "framework/sync/periodic.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"
#include "core/ops/dispatch.h"
#include "optimizers/adamw.h"

namespace laconic {

namespace {

// Weight decay 0 in the outer step: the inner optimizer already decays. The constructors check
// the options (momentum and Nesterov; Adam's betas and eps).
std::unique_ptr<Optimizer> make_outer(const PeriodicOptions& o) {
  if (o.outer_optimizer == OuterOptimizer::adam) {
    LC_CHECK(!o.nesterov, "Nesterov momentum is outer SGD's; expected nesterov = false with the outer Adam");
    return std::make_unique<AdamW>(AdamWOptions{o.outer_momentum, o.outer_beta2, o.outer_eps, 0.0});
  }
  return std::make_unique<Sgd>(SgdOptions{o.outer_momentum, o.nesterov, 0.0});
}

}  // namespace

struct PeriodicAveraging::Fragment {
  explicit Fragment(std::unique_ptr<Optimizer> o) : outer(std::move(o)) {}
  std::size_t begin = 0, size = 0;  // elements of the flat parameter buffer
  ParamStore shadow;                // params() = theta_global of the fragment, grads() = Delta
  ParamStore eager;                 // eager only: params() = d_m of the last sync, reduced in place to
                                    // G; grads() = d_m of the last sync (this replica's own)
  std::unique_ptr<Optimizer> outer;
  std::vector<BucketLayout> buckets;
  Work work;                    // the reduction on the communication thread (tau > 0)
  bool queued = false;          // work queued and not yet waited for
  std::int64_t in_flight = -1;  // the step whose sync awaits its merge (tau > 0), else -1
  bool held = false;            // freeze: held_ has this fragment's current parameters
  std::int64_t outer_step = 0;  // the reducer's step of the sync being reduced
  int index = 0;                // which fragment
  // The step of the sync being reduced, and of this fragment's previous one (warmup_steps - 1
  // before the first): what a replica group weighs the pseudo-gradient by.
  std::int64_t sync_step = -1, last_sync_step = -1;
  double comm_s = 0;            // written by whichever thread reduces; read after the wait
  // Waits for the queued reduction, if any (rethrows its failure).
  void wait() {
    if (!queued) return;
    queued = false;
    work.wait();
  }
};

std::vector<std::size_t> fragment_bounds(const ParamStore& store, int fragments) {
  const auto& views = store.views();
  LC_CHECK(fragments >= 1 && static_cast<std::size_t>(fragments) <= views.size(), "fragments: expected 1 to ",
           views.size(), " (the model's tensors), got ", fragments);
  // The linear partition minimising the largest fragment (the peak bytes of a sync): best[f][i]
  // = the smallest possible largest fragment when views [0, i) form f fragments. Ties keep the
  // earliest cut. A model has tens to hundreds of tensors: O(F T^2) is nothing.
  const std::size_t t = views.size(), F = static_cast<std::size_t>(fragments);
  std::vector<std::size_t> prefix(t + 1, 0);
  for (std::size_t v = 0; v < t; ++v) prefix[v + 1] = prefix[v] + views[v].numel;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::vector<std::size_t>> best(F + 1, std::vector<std::size_t>(t + 1, kNone)), cut = best;
  best[0][0] = 0;
  for (std::size_t f = 1; f <= F; ++f)
    for (std::size_t i = f; i <= t; ++i)
      for (std::size_t j = f - 1; j < i; ++j) {
        if (best[f - 1][j] == kNone) continue;
        const std::size_t worst = std::max(best[f - 1][j], prefix[i] - prefix[j]);
        if (worst < best[f][i]) {
          best[f][i] = worst;
          cut[f][i] = j;
        }
      }
  std::vector<std::size_t> bounds(F + 1, t);
  for (std::size_t f = F; f > 0; --f) bounds[f - 1] = cut[f][bounds[f]];
  return bounds;
}

std::vector<std::size_t> shard_fragment_bounds(const ParamStore& whole, std::span<const std::size_t> tensor_of,
                                               int fragments) {
  const std::vector<std::size_t> outer = fragment_bounds(whole, fragments);
  std::vector<std::size_t> bounds(outer.size());
  for (std::size_t f = 0; f < outer.size(); ++f)
    bounds[f] = static_cast<std::size_t>(std::lower_bound(tensor_of.begin(), tensor_of.end(), outer[f]) - tensor_of.begin());
  return bounds;
}

PeriodicAveraging::PeriodicAveraging(PeriodicOptions opts, std::unique_ptr<Reducer> reducer)
    : opts_(std::move(opts)), reducer_(std::move(reducer)) {
  LC_CHECK(opts_.period >= 1, "period ", opts_.period);
  LC_CHECK(opts_.warmup_steps >= 0, "warmup_steps ", opts_.warmup_steps);
  LC_CHECK(opts_.outer_lr > 0.0, "outer_lr ", opts_.outer_lr);
  LC_CHECK(opts_.bucket_mb > 0.0, "bucket_mb ", opts_.bucket_mb);
  LC_CHECK(opts_.fragments >= 1, "fragments ", opts_.fragments);
  LC_CHECK(opts_.mixing >= 0.0 && opts_.mixing < 1.0, "mixing ", opts_.mixing, " (expected [0, 1))");
  LC_CHECK(opts_.overlap_steps >= 0, "overlap_steps ", opts_.overlap_steps);
  LC_CHECK(!opts_.freeze || opts_.fragments > 1, "freeze: expected fragments > 1 (one fragment is always the next ",
           "to sync), got ", opts_.fragments);
  LC_CHECK(!opts_.freeze || !opts_.sparta, "freeze: SPARTA averages every fragment between syncs; expected no sparta");
  LC_CHECK(!opts_.eager || opts_.overlap_steps == 0, "eager: the reduction overlaps the whole next period; expected ",
           "overlap_steps = 0, got ", opts_.overlap_steps);
  if (opts_.schedule.empty()) opts_.schedule.push_back({0, opts_.period});
  for (std::size_t j = 0; j < opts_.schedule.size(); ++j) {
    const PeriodSegment& seg = opts_.schedule[j];
    const bool last = j + 1 == opts_.schedule.size();
    LC_CHECK(seg.period >= 1, "period_schedule[", j, "].period ", seg.period);
    LC_CHECK(seg.steps >= 0 && (seg.steps > 0 || last), "period_schedule[", j, "].steps ", seg.steps,
             " (only the last segment runs to the end)");
    LC_CHECK(seg.steps % seg.period == 0, "period_schedule[", j, "].steps ", seg.steps,
             " is not a multiple of its period ", seg.period);
    LC_CHECK(opts_.overlap_steps < seg.period, "overlap_steps ", opts_.overlap_steps,
             " must be below every period (", seg.period, ")");
  }
  LC_CHECK(reducer_ != nullptr, "PeriodicAveraging needs a reducer");
  if (opts_.sparta) sparta_ = std::make_unique<Sparta>(*opts_.sparta);
  make_outer(opts_);  // checks the outer optimizer's options
}

PeriodicAveraging::~PeriodicAveraging() {
  // A step that threw may have left reductions queued that write into the fragments.
  for (auto& f : fragments_) {
    try {
      f->wait();
    } catch (...) {
    }
  }
}

std::int64_t PeriodicAveraging::syncs_through(std::int64_t c, int fragment) const {
  std::int64_t done = 0, base = 0;
  for (const PeriodSegment& seg : opts_.schedule) {
    const std::int64_t h = seg.period;
    const std::int64_t offset = static_cast<std::int64_t>(fragment) * h / opts_.fragments;
    const std::int64_t first = offset == 0 ? h : offset;  // fragment 0 after a whole period
    const std::int64_t len = seg.steps == 0 ? c - base : std::min(c - base, seg.steps);
    if (len >= first) done += (len - first) / h + 1;
    if (seg.steps == 0 || c - base <= seg.steps) break;
    base += seg.steps;
  }
  return done;
}

bool PeriodicAveraging::launches(std::int64_t step, int fragment) const {
  const std::int64_t c = step + 1 - opts_.warmup_steps;
  return c >= 1 && syncs_through(c, fragment) > syncs_through(c - 1, fragment);
}

std::int64_t PeriodicAveraging::next_launch(std::int64_t step) const {
  // Fragments launch staggered by about H/F steps, so this looks a few steps ahead; the last
  // segment of the schedule repeats forever, so it ends.
  const auto any = [this](std::int64_t s) {
    for (int f = 0; f < opts_.fragments; ++f)
      if (launches(s, f)) return true;
    return false;
  };
  std::int64_t s = std::max(step, opts_.warmup_steps);
  while (!any(s)) ++s;
  return s;
}

bool PeriodicAveraging::trains(std::int64_t step, int fragment) const {
  return !opts_.freeze || step < opts_.warmup_steps || launches(next_launch(step), fragment);
}

bool PeriodicAveraging::averages_params(std::int64_t step) const {
  if (sparta_ && step >= opts_.warmup_steps && sparta_->syncs(step)) return true;
  for (int f = 0; f < opts_.fragments; ++f)
    if (launches(step - opts_.overlap_steps, f)) return true;
  return false;
}

bool PeriodicAveraging::replicas_agree_after(std::int64_t step) const {
  if (reduces_gradients(step)) return true;
  if (opts_.mixing > 0 || opts_.eager) return false;
  for (int f = 0; f < opts_.fragments; ++f)
    if (!launches(step - opts_.overlap_steps, f)) return false;
  return true;
}

const std::vector<BucketLayout>& PeriodicAveraging::buckets(int fragment) const {
  return fragments_.at(static_cast<std::size_t>(fragment))->buckets;
}

void PeriodicAveraging::prepare(std::int64_t first_step) {
  const ParamStore& store = this->store();
  const auto& views = store.views();
  const std::vector<std::size_t> bounds = whole_ ? shard_fragment_bounds(*whole_, shard_tensor_of_, opts_.fragments)
                                                 : fragment_bounds(store, opts_.fragments);
  fragments_.clear();
  std::vector<BucketLayout> all;
  for (int fi = 0; fi < opts_.fragments; ++fi) {
    auto f = std::make_unique<Fragment>(make_outer(opts_));
    f->index = fi;
    f->last_sync_step = opts_.warmup_steps - 1;
    for (std::int64_t s = first_step - 1; s >= opts_.warmup_steps; --s)
      if (launches(s, fi)) {
        f->last_sync_step = s;
        break;
      }
    for (std::size_t v = bounds[fi]; v < bounds[fi + 1]; ++v) f->shadow.add(views[v].name, views[v].shape, views[v].group);
    f->shadow.finalize();
    f->shadow.to(store.device());  // theta_global and the outer optimizer live beside the parameters
    f->begin = bounds[fi] < views.size() ? views[bounds[fi]].offset : store.size();  // a shard may hold none of it
    f->size = f->shadow.size();
    for (std::size_t v = bounds[fi]; v < bounds[fi + 1]; ++v)
      LC_CHECK(f->shadow.view(v - bounds[fi]).offset + f->begin == views[v].offset, "parameter '", views[v].name,
               "' is not where its shape puts it");
    f->outer->prepare(f->shadow);
    if (opts_.eager) {  // zeros: G^-1 = d^-1 = 0
      for (std::size_t v = bounds[fi]; v < bounds[fi + 1]; ++v) f->eager.add(views[v].name, views[v].shape, views[v].group);
      f->eager.finalize();
      f->eager.to(store.device());
    }
    f->buckets = make_buckets(f->shadow, opts_.bucket_mb);
    const auto first_id = static_cast<int>(all.size());
    for (BucketLayout& b : f->buckets) {
      b.id += first_id;
      all.push_back(b);
    }
    fragments_.push_back(std::move(f));
  }
  LC_CHECK(fragments_.back()->begin + fragments_.back()->size == store.size(), "fragments do not cover the parameters");
  anchor(store);
  held_ = opts_.freeze ? DeviceArray<float>(store.device(), store.size()) : DeviceArray<float>();
  if (sparta_) sparta_->bind(this->store(), comm(), first_step);
  reducer_->prepare(all);
  stats_ = reducer_->stats();
  if (reduces_async()) comm().reserve_async(fragments_.size());
  // A resumed run: a fragment launched in the tau steps before first_step is in flight; its
  // reduced pseudo-gradient comes from the checkpoint (state()), its merge is still to come.
  for (int fi = 0; fi < opts_.fragments; ++fi)
    for (std::int64_t s = first_step - opts_.overlap_steps; s < first_step; ++s)
      if (launches(s, fi)) fragments_[static_cast<std::size_t>(fi)]->in_flight = s;
}

void PeriodicAveraging::after_backward(std::int64_t step) {
  if (step >= opts_.warmup_steps) {  // a local step
    if (opts_.freeze) hold_frozen(step);
    return;
  }
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
  if (opts_.freeze) restore_frozen(step);  // before any merge writes a fragment
  bool changed = sparta_ && sparta_->after_update(step);  // before the step's outer sync, as the paper
  // Due merges (at or, after a step the non-finite guard skipped on every rank, past their step).
  for (auto& f : fragments_)
    if (f->in_flight >= 0 && f->in_flight + opts_.overlap_steps <= step) {
      merge(*f, false);
      changed = true;
    }
  for (int fi = 0; fi < opts_.fragments; ++fi) {
    if (!launches(step, fi)) continue;
    Fragment& f = *fragments_[static_cast<std::size_t>(fi)];
    if (f.in_flight >= 0) {  // a segment boundary of the schedule brought the next sync early
      merge(f, false);
      changed = true;
    }
    f.outer_step = syncs_through(step + 1 - opts_.warmup_steps, fi) - 1;
    f.sync_step = step;
    if (opts_.eager) {
      eager_sync(f);
      changed = true;
      continue;
    }
    launch(f, step);
    if (opts_.overlap_steps == 0) {
      merge(f, false);
      changed = true;
    }
  }
  return changed;
}

void PeriodicAveraging::begin(std::int64_t /*step*/) {
  LC_CHECK(bound(), "PeriodicAveraging::begin before start()");
  anchor(store());
  for (auto& f : fragments_) f->held = false;  // another strategy moved the parameters
}

void PeriodicAveraging::hold_frozen(std::int64_t step) {
  const std::int64_t next = next_launch(step);
  const ParamStore& store = this->store();
  for (auto& f : fragments_) {
    if (f->held || launches(next, f->index)) continue;
    copy_bytes(held_.data() + f->begin, held_.device(), store.params().data() + f->begin, store.device(),
               f->size * sizeof(float));
    f->held = true;
  }
}

void PeriodicAveraging::restore_frozen(std::int64_t step) {
  const std::int64_t next = next_launch(step);
  ParamStore& store = this->store();
  for (auto& f : fragments_) {
    if (launches(next, f->index)) {  // trained by this step: its copy is stale from now on
      f->held = false;
      continue;
    }
    LC_CHECK(f->held, "freeze: after_backward(", step, ") must precede after_update(", step, ")");
    copy_bytes(store.params().data() + f->begin, store.device(), held_.data() + f->begin, held_.device(),
               f->size * sizeof(float));
  }
}

void PeriodicAveraging::anchor(const ParamStore& store) {
  for (auto& f : fragments_)
    copy_bytes(f->shadow.params().data(), f->shadow.device(), store.params().data() + f->begin, store.device(),
               f->size * sizeof(float));
}

void PeriodicAveraging::set_replica_group(ReplicaGroup* group) {
  LC_CHECK(group == nullptr || !opts_.eager,
           "eager DiLoCo cannot run across elastic replicas: their quorum shares one anchor, eager replicas do not");
  replicas_ = group;
}

void PeriodicAveraging::shard_of(const ParamStore& whole, std::vector<std::size_t> tensor_of) {
  LC_CHECK(!bound(), "PeriodicAveraging::shard_of after bind()");
  LC_CHECK(!opts_.sparta, "SPARTA's random elements are drawn over the whole model: it cannot run on a shard");
  whole_ = &whole;
  shard_tensor_of_ = std::move(tensor_of);
}

void PeriodicAveraging::finish(std::int64_t step) {
  LC_CHECK(bound(), "PeriodicAveraging::finish before start()");
  if (step < opts_.warmup_steps || replicas_agree_after(step)) return;
  if (opts_.eager) {  // the replicas' parameters averaged once; the next strategy starts from them
    for (auto& f : fragments_) {
      collect(*f);
    }
    Stopwatch t;
    comm().all_reduce(store().params(), ReduceOp::avg);
    comm_s_ += t.seconds();
    anchor(store());
    return;
  }
  const std::int64_t c = step + 1 - opts_.warmup_steps;
  for (int fi = 0; fi < opts_.fragments; ++fi) {
    Fragment& f = *fragments_[static_cast<std::size_t>(fi)];
    if (f.in_flight >= 0) {
      merge(f, true);
    } else if (!(opts_.overlap_steps == 0 && launches(step, fi))) {  // not merged at this step
      f.outer_step = syncs_through(c, fi);  // the syncs before this one
      f.sync_step = step;
      launch(f, -1);
      merge(f, true);
    } else if (opts_.mixing > 0) {  // merged at this step with mixing: adopt the anchor
      copy_bytes(store().params().data() + f.begin, store().device(), f.shadow.params().data(), f.shadow.device(),
                 f.size * sizeof(float));
      f.held = false;
    }
  }
}

void PeriodicAveraging::eager_sync(Fragment& f) {
  collect(f);  // the previous sync's reduction: eager.params() = G^(t-1)
  const ops::Kernels& k = ops::kernels(store().device());
  const std::span<float> step_delta = f.shadow.grads(), sent = f.eager.params(), own = f.eager.grads();
  const Device dev = f.shadow.device();
  const auto bytes = step_delta.size_bytes();
  const float inv_m = 1.0f / static_cast<float>(comm().size());
  copy_bytes(step_delta.data(), dev, sent.data(), dev, bytes);                  // G^(t-1)
  pseudo_gradient(f, sent);                                                     // d_m^t
  k.axpy(step_delta.data(), inv_m, sent.data(), f.size);                       // + d_m^t / M
  k.axpy(step_delta.data(), -inv_m, own.data(), f.size);                       // - d_m^(t-1) / M
  copy_bytes(own.data(), dev, sent.data(), dev, bytes);
  f.queued = true;  // G^t = mean_m d_m^t, ready by the next sync
  comm().run_async(f.work, [this, &f] { reduce(f); }, OpLabel{OpLabel::fragment, f.index});
  outer_update(f, false);
}

void PeriodicAveraging::pseudo_gradient(const Fragment& f, std::span<float> out) {
  // theta_global - theta_local, as a copy and an axpy with -1 (g + (-1)p rounds exactly like
  // g - p, fused or not), on whichever device the parameters are.
  const ParamStore& store = this->store();
  copy_bytes(out.data(), f.shadow.device(), f.shadow.params().data(), f.shadow.device(), out.size_bytes());
  ops::kernels(store.device()).axpy(out.data(), -1.0f, store.params().data() + f.begin, f.size);
}

void PeriodicAveraging::launch(Fragment& f, std::int64_t step) {
  pseudo_gradient(f, f.shadow.grads());
  if (opts_.overlap_steps == 0 || step < 0) return reduce(f);
  f.in_flight = step;
  f.queued = true;
  comm().run_async(f.work, [this, &f] { reduce(f); }, OpLabel{OpLabel::fragment, f.index});
}

void PeriodicAveraging::reduce(Fragment& f) {
  Stopwatch t;
  const std::span<float> delta = opts_.eager ? f.eager.params() : f.shadow.grads();
  auto reduce_over = [&](Communicator& c) {
    for (const BucketLayout& b : f.buckets) reducer_->reduce(delta.subspan(b.begin, b.size), b, f.outer_step, c);
  };
  if (replicas_ == nullptr) {
    reduce_over(comm());
  } else {
    // Across replicas: the replica's mean first (its own links, dense), then its rank 0 in the
    // group's quorum, then the result to the replica's other ranks.
    if (comm().size() > 1) comm().all_reduce(delta, ReduceOp::avg);
    if (comm().rank() == 0) {
      ReplicaSync s;
      s.step = f.sync_step;
      s.fragment = f.index;
      s.local_steps = f.sync_step - f.last_sync_step;
      s.share = static_cast<double>(f.size) / static_cast<double>(store().size());
      s.delta = delta;
      s.anchor = f.shadow.params();
      s.reducer_state = reducer_->state();
      s.reduce = reduce_over;
      replicas_->reduce(s);
    }
    if (comm().size() > 1) comm().broadcast(buf(delta), 0);
  }
  f.last_sync_step = f.sync_step;
  f.comm_s += t.seconds();
}

bool PeriodicAveraging::averages_at_drain(std::int64_t last_step) const {
  for (std::int64_t s = last_step + 1; s <= last_step + opts_.overlap_steps; ++s)
    if (averages_params(s)) return true;
  return false;
}

void PeriodicAveraging::drain() {
  for (auto& f : fragments_) {
    if (f->in_flight >= 0) merge(*f, false);
    if (opts_.eager) {  // waited for, not applied (periodic.h)
      collect(*f);
    }
  }
}

void PeriodicAveraging::wait_in_flight() {
  for (auto& f : fragments_) f->wait();
}

void PeriodicAveraging::collect(Fragment& f) {
  f.wait();
  comm_s_ += f.comm_s;
  f.comm_s = 0;
  if (std::none_of(fragments_.begin(), fragments_.end(), [](const auto& g) { return g->queued; }))
    stats_ = reducer_->stats();  // no reduction running: safe to read
}

void PeriodicAveraging::merge(Fragment& f, bool adopt) {
  collect(f);
  outer_update(f, adopt);
}

void PeriodicAveraging::outer_update(Fragment& f, bool adopt) {
  // Every rank holds the same anchor and (the reducer guarantees) the same averaged Delta, so the
  // outer step gives every rank the same bits (eager: each its own, periodic.h).
  f.outer->step(f.shadow, opts_.outer_lr);
  ParamStore& store = this->store();
  float* params = store.params().data() + f.begin;
  const float* global = f.shadow.params().data();
  if (adopt || opts_.mixing == 0) {
    copy_bytes(params, store.device(), global, f.shadow.device(), f.size * sizeof(float));
  } else {
    const ops::Kernels& k = ops::kernels(store.device());
    k.scale(params, static_cast<float>(opts_.mixing), f.size);
    k.axpy(params, static_cast<float>(1.0 - opts_.mixing), global, f.size);
  }
  f.held = false;  // the merge wrote the fragment
  f.in_flight = -1;
}

std::vector<StateTensor> PeriodicAveraging::state() {
  wait_in_flight();
  std::vector<StateTensor> out;
  const bool one = fragments_.size() == 1;
  for (std::size_t i = 0; i < fragments_.size(); ++i) {
    Fragment& f = *fragments_[i];
    std::string suffix;
    if (!one) suffix.append(".").append(std::to_string(i));
    out.push_back({"periodic.global" + suffix, f.shadow.params(), f.shadow.device()});
    for (const StateTensor& s : f.outer->state()) {
      std::string name = "periodic.outer.";
      name += s.name;
      name += suffix;
      out.push_back({std::move(name), s.data, s.device});
    }
    if (opts_.overlap_steps > 0) out.push_back({"periodic.delta" + suffix, f.shadow.grads(), f.shadow.device()});
    if (opts_.eager) {
      out.push_back({"periodic.eager.global" + suffix, f.eager.params(), f.eager.device()});
      out.push_back({"periodic.eager.local" + suffix, f.eager.grads(), f.eager.device()});
    }
  }
  for (StateTensor& s : reducer_->state()) out.push_back(std::move(s));
  return out;
}

std::string PeriodicAveraging::describe() const {
  std::ostringstream os;
  // Named by the options unless the caller names the algorithm (SparseLoCo: outer_lr 1 without
  // momentum is not a parameter average there, its reducer keeps what it did not send).
  const bool plain = opts_.name.empty() && is_local_sgd();
  os << (!opts_.name.empty() ? opts_.name.c_str() : plain ? "local SGD" : is_streaming() ? "streaming DiLoCo" : "DiLoCo")
     << " (every ";
  if (opts_.schedule.size() == 1) {
    os << opts_.schedule[0].period;
  } else {
    for (std::size_t j = 0; j < opts_.schedule.size(); ++j)
      os << (j ? ", then " : "") << opts_.schedule[j].period
         << (opts_.schedule[j].steps ? " for " + std::to_string(opts_.schedule[j].steps) : std::string());
  }
  os << " steps";
  if (opts_.warmup_steps > 0) os << " after " << opts_.warmup_steps << " synchronous steps";
  if (opts_.fragments > 1) os << ", " << opts_.fragments << " staggered fragments";
  if (opts_.overlap_steps > 0) os << ", each overlapping " << opts_.overlap_steps << " inner steps";
  if (opts_.mixing > 0) os << ", mixing " << opts_.mixing;
  if (opts_.eager) os << ", eager outer steps (each all-reduce overlaps the next period)";
  if (opts_.freeze) os << ", training only the fragment synced next (the others frozen)";
  if (opts_.sparta)
    os << ", SPARTA between syncs (each parameter averaged with chance " << opts_.sparta->fraction << " every "
       << opts_.sparta->period << " steps)";
  if (!plain) {
    if (opts_.outer_optimizer == OuterOptimizer::adam) {
      os << ", outer Adam lr " << opts_.outer_lr << " betas (" << opts_.outer_momentum << ", " << opts_.outer_beta2
         << ") eps " << opts_.outer_eps;
    } else {
      os << ", outer SGD lr " << opts_.outer_lr;
      if (opts_.outer_momentum > 0)
        os << (opts_.nesterov ? " Nesterov " : " momentum ") << opts_.outer_momentum;
    }
  }
  std::size_t buckets = 0;
  for (const auto& f : fragments_) buckets += f->buckets.size();
  os << ", " << (plain ? "parameter deltas" : "pseudo-gradients") << " by " << reducer_->describe()
     << ", " << buckets << " buckets of <= " << opts_.bucket_mb << " MiB)";
  return os.str();
}

}  // namespace laconic
