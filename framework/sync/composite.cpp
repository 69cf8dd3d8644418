#include "framework/sync/composite.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"
#include "framework/sync/periodic.h"

namespace laconic {

// ---- Hierarchical ----

Hierarchical::Hierarchical(std::unique_ptr<SyncStrategy> inter, HierarchicalShards shards)
    : inter_(std::move(inter)), shards_(shards) {
  LC_CHECK(inter_ != nullptr, "Hierarchical needs a strategy between groups");
}

Hierarchical::~Hierarchical() = default;

void Hierarchical::prepare(std::int64_t first_step) {
  ParamStore& store = this->store();
  Communicator& comm = this->comm();
  // Its group communicators run our algorithms, whose arithmetic is host code.
  LC_CHECK(comm.memory() == Device::cpu, "hierarchical sync runs on host buffers only (device = \"cpu\")");
  const std::vector<int>& group_of = comm.groups();
  LC_CHECK(static_cast<int>(group_of.size()) == comm.size(),
           "hierarchical sync needs the network's groups (a [network] with groups >= 2)");
  groups_ = GroupLayout::of(group_of, comm.rank());
  group_members_ = groups_.members[groups_.mine];
  leaders_ = groups_.leaders();
  LC_CHECK(leaders_.size() >= 2, "hierarchical sync needs at least two groups, got ", leaders_.size());
  intra_ = std::make_unique<SubsetCommunicator>(comm, group_members_);
  intra_->set_tracer(comm.tracer());  // its collectives are traced (their messages are the world's)
  zero_.reset();
  across_.reset();
  LC_CHECK(!shards_.outer || dynamic_cast<PeriodicAveraging*>(inter_.get()) != nullptr,
           "the outer state shards for local SGD's family only (PeriodicAveraging), not ", inter_->describe());
  if (shards_.inner) {
    // Overlapped on the group's communication thread unless the strategy between the groups runs
    // async work of its own (streaming DiLoCo's fragments, eager): a rank's trace has one
    // communication lane, written by one thread (collectives/trace.h), which two would share.
    // In line then.
    const auto* periodic = dynamic_cast<const PeriodicAveraging*>(inter_.get());
    const bool overlap = shards_.overlap && periodic != nullptr && !periodic->reduces_async();
    zero_ = std::make_unique<ShardedDataParallel>(overlap, shards_.bucket_mb, shards_.gradients);
    zero_->bind(store, *intra_, first_step);
  }
  if (shards_.outer) return bind_sharded(first_step);
  if (group_members_.front() == comm.rank()) {
    across_ = std::make_unique<SubsetCommunicator>(comm, leaders_);
    // Async work between leaders (streaming DiLoCo's overlapped syncs) is traced like the
    // world's: its messages are the world communicator's, its operations on this one's queue.
    across_->set_tracer(comm.tracer());
    // bind, not start: the world's broadcast already gave every leader rank 0's parameters; a
    // second one among the leaders would send them across the uplink again.
    inter_->bind(store, *across_, first_step);
  }
}

void Hierarchical::bind_sharded(std::int64_t first_step) {
  // The ranks holding this rank's shard, one per group, in group order (all groups one size).
  const std::string uneven = groups_.uneven();
  LC_CHECK(uneven.empty(), "sharded outer state needs groups of one size: ", uneven,
           " (set distributed.world_size to a multiple of network.groups)");
  shard_peers_ = groups_.peers();
  across_ = std::make_unique<SubsetCommunicator>(comm(), shard_peers_);
  across_->set_tracer(comm().tracer());
  // With ZeRO, the shard the group's optimizer steps is the one the outer sync moves: no copy.
  if (!zero_) outer_shard_.cut(store(), intra_->rank(), intra_->size(), shards_.bucket_mb);
  static_cast<PeriodicAveraging&>(*inter_).shard_of(store(), zero_ ? zero_->shard_tensors() : outer_shard_.tensor_of);
  inter_->bind(outer_store(), *across_, first_step);
}

void Hierarchical::grads_ready(std::int64_t step, std::size_t from) {
  if (zero_) zero_->grads_ready(step, from);
}

void Hierarchical::after_backward(std::int64_t step) {
  ParamStore& store = this->store();
  Stopwatch t;
  if (zero_) {
    zero_->after_backward(step);  // the group's average of this rank's shard
    LC_CHECK(!inter_->reduces_gradients(step), "a sharded group's leaders hold no whole gradients to reduce");
  } else {
    intra_->all_reduce(store.grads(), ReduceOp::avg);
  }
  comm_s_ += t.seconds();
  if (!inter_->reduces_gradients(step)) return;
  if (inter_bound()) {
    const double before = inter_->comm_seconds();
    inter_->after_backward(step);
    comm_s_ += inter_->comm_seconds() - before;
  }
  t.reset();
  intra_->broadcast(Buf{store.grads().data(), store.size(), DType::f32}, 0);
  comm_s_ += t.seconds();
}

bool Hierarchical::after_update(std::int64_t step) {
  last_step_ = step;
  if (shards_.outer) return after_update_sharded(step);
  if (zero_) {  // the group's stepped shards, whole on every rank, before any outer sync
    Stopwatch t;
    zero_->after_update(step);
    comm_s_ += t.seconds();
  }
  if (!inter_->averages_params(step)) {
    if (across_) inter_->after_update(step);  // local bookkeeping only
    return false;
  }
  if (across_) {
    const double before = inter_->comm_seconds();
    inter_->after_update(step);
    comm_s_ += inter_->comm_seconds() - before;
  }
  spread();
  return true;
}

bool Hierarchical::after_update_sharded(std::int64_t step) {
  // The outer sync on the stepped shard first, so one all-gather spreads both updates.
  if (!zero_) outer_shard_.take(store());  // this step's weights (a copy of 1/N of them)
  const double before = inter_->comm_seconds();
  const bool changed = inter_->after_update(step);
  comm_s_ += inter_->comm_seconds() - before;
  if (zero_ || changed) spread();  // ZeRO's all-gather of the stepped shard either way
  return changed;
}

void Hierarchical::spread() {
  Stopwatch t;
  if (!shards_.outer) {
    intra_->broadcast(Buf{store().params().data(), store().size(), DType::f32}, 0);
    if (zero_) zero_->params_changed();  // the outer step's parameters are the shard's from now on
  } else if (zero_) {
    zero_->after_update(last_step_);
  } else {
    outer_shard_.gather(*intra_, store());
  }
  comm_s_ += t.seconds();
}

void Hierarchical::drain() {
  if (inter_bound()) inter_->drain();
  if (last_step_ >= 0 && inter_->averages_at_drain(last_step_)) spread();
}

std::string Hierarchical::describe() const {
  return std::string("hierarchical (") +
         (zero_ ? (shards_.gradients ? "inside each group the gradients and optimizer state sharded, ZeRO-2"
                                       : "inside each group the optimizer state sharded, ZeRO-1") : "dense fp32 all-reduce inside each group") +
         (shards_.outer ? "; the outer state sharded: between the groups' ranks holding the same shard, on it: "
                        : "; between group leaders: ") +
         inter_->describe() + ")";
}

// ---- Phased ----

Phased::Phased(std::vector<Phase> phases) : phases_(std::move(phases)) {
  LC_CHECK(!phases_.empty() && phases_.front().first_step == 0, "a strategy schedule starts at step 0");
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    LC_CHECK(phases_[i].strategy != nullptr, "phase ", i, " has no strategy");
    if (i > 0) LC_CHECK(phases_[i].first_step > phases_[i - 1].first_step, "phases must be in step order");
  }
}

std::size_t Phased::index_at(std::int64_t step) const {
  std::size_t i = 0;
  while (i + 1 < phases_.size() && phases_[i + 1].first_step <= step) ++i;
  return i;
}

void Phased::prepare(std::int64_t first_step) {
  bound_.assign(phases_.size(), false);
  take_over(first_step);
}

void Phased::take_over(std::int64_t step) {
  const std::size_t i = index_at(step);
  if (bound_[i]) return;
  phases_[i].strategy->bind(store(), comm(), step);
  bound_[i] = true;
}

void Phased::grads_ready(std::int64_t step, std::size_t from) { at(step).grads_ready(step, from); }

void Phased::after_backward(std::int64_t step) { at(step).after_backward(step); }

bool Phased::averages_params(std::int64_t step) const {
  // A boundary after this step: the outgoing strategy may average once more in finish().
  for (const auto& p : phases_)
    if (p.first_step == step + 1) return true;
  return at(step).averages_params(step);
}

bool Phased::replicas_agree_after(std::int64_t step) const {
  for (const auto& p : phases_)
    if (p.first_step == step + 1) return true;  // finish() leaves identical replicas
  return at(step).replicas_agree_after(step);
}

bool Phased::after_update(std::int64_t step) {
  SyncStrategy& now = at(step);
  bool changed = now.after_update(step);
  SyncStrategy& next = at(step + 1);
  if (&next != &now) {
    now.finish(step);
    take_over(step + 1);
    next.begin(step + 1);
    changed = true;
  }
  return changed;
}

std::string Phased::describe() const {
  std::ostringstream os;
  for (std::size_t i = 0; i < phases_.size(); ++i) {
    if (i > 0) os << "; ";
    os << "from step " << phases_[i].first_step << ": " << phases_[i].strategy->describe();
  }
  return os.str();
}

ReducerStats Phased::reducer_stats() const {
  ReducerStats s;
  for (const auto& p : phases_) s += p.strategy->reducer_stats();
  return s;
}

double Phased::comm_seconds() const {
  double s = 0;
  for (const auto& p : phases_) s += p.strategy->comm_seconds();
  return s;
}

void Phased::drain() {
  for (std::size_t i = 0; i < phases_.size(); ++i)
    if (bound_[i]) phases_[i].strategy->drain();
}

std::vector<StateTensor> Phased::state() {
  std::vector<StateTensor> out;
  for (std::size_t i = 0; i < phases_.size(); ++i)
    if (bound_.size() == phases_.size() && bound_[i])
      for (auto& t : phases_[i].strategy->state()) out.push_back({"phase" + std::to_string(i) + "." + t.name, t.data, t.device});
  return out;
}

}  // namespace laconic
