#include "framework/sync/zero.h"

#include <algorithm>
#include <exception>
#include <numeric>
#include <sstream>

#include "core/check.h"
#include "core/ops/dispatch.h"
#include "core/timer.h"

namespace laconic {

ShardRange shard_range(std::size_t size, int rank, int n) {
  LC_CHECK(n >= 1 && rank >= 0 && rank < n, "rank ", rank, " of ", n);
  const std::size_t q = size / static_cast<std::size_t>(n), r = static_cast<std::size_t>(rank);
  return {r * q, rank + 1 == n ? size : (r + 1) * q};
}

ParamStore make_shard_store(const ParamStore& whole, std::span<const ShardRange> ranges,
                            std::vector<std::size_t>& tensor_of) {
  for (std::size_t i = 0; i < ranges.size(); ++i)
    LC_CHECK(ranges[i].begin <= ranges[i].end && ranges[i].end <= whole.size() &&
                 (i == 0 || ranges[i - 1].end <= ranges[i].begin),
             "shard range [", ranges[i].begin, ", ", ranges[i].end, ") of ", whole.size(), " out of order");
  ParamStore shard;
  tensor_of.clear();
  const auto& views = whole.views();
  std::size_t r = 0;
  for (std::size_t v = 0; v < views.size(); ++v) {
    const ParamView& w = views[v];
    while (r < ranges.size() && ranges[r].end <= w.offset) ++r;
    if (r == ranges.size()) break;
    const std::size_t lo = std::max(w.offset, ranges[r].begin), hi = std::min(w.offset + w.numel, ranges[r].end);
    if (lo >= hi) continue;
    LC_CHECK(r + 1 == ranges.size() || ranges[r + 1].begin >= w.offset + w.numel, "tensor '", w.name,
             "' meets two ranges of one shard");
    const bool cut = lo != w.offset || hi != w.offset + w.numel;
    // A piece of a matrix is no matrix: only Muon asks, and sharding refuses Muon (recipe checks).
    shard.add(w.name, cut ? std::vector<std::int64_t>{static_cast<std::int64_t>(hi - lo)} : w.shape, w.group,
              cut ? ParamKind::other : w.kind);
    tensor_of.push_back(v);
  }
  shard.finalize();
  shard.to(whole.device());
  return shard;
}

void Shard::cut(const ParamStore& whole, int position, int n, double bucket_mb) {
  std::vector<BucketLayout> buckets = make_buckets(whole, bucket_mb);
  std::sort(buckets.begin(), buckets.end(), [](const auto& a, const auto& b) { return a.begin < b.begin; });
  pieces.clear();
  std::vector<ShardRange> ranges;
  std::size_t offset = 0;
  for (const BucketLayout& b : buckets) {
    Piece p;
    p.begin = b.begin;
    p.size = b.size;
    p.block = b.size / static_cast<std::size_t>(n);
    const ShardRange r = shard_range(b.size, position, n);
    p.mine = {b.begin + r.begin, b.begin + r.end};
    p.offset = offset;
    offset += r.size();
    p.counts.assign(static_cast<std::size_t>(n), p.block);
    p.counts.back() = b.size - p.block * static_cast<std::size_t>(n - 1);
    ranges.push_back(p.mine);
    pieces.push_back(std::move(p));
  }
  store = make_shard_store(whole, ranges, tensor_of);
  LC_CHECK(store.size() == offset, "the shard's store holds ", store.size(), " elements, its pieces ", offset);
  take(whole);
}

void Shard::take(const ParamStore& whole) {
  for (const Piece& p : pieces)
    copy_bytes(store.params().data() + p.offset, store.device(), whole.params().data() + p.mine.begin, whole.device(),
               p.mine.size() * sizeof(float));
}

void Shard::gather(Communicator& comm, ParamStore& whole) const {
  for (const Piece& p : pieces)
    comm.all_gather_v(CBuf{store.params().data() + p.offset, p.mine.size(), DType::f32},
                      Buf{whole.params().data() + p.begin, p.size, DType::f32}, p.counts);
}

ShardedDataParallel::ShardedDataParallel(bool overlap, double bucket_mb, bool stage_grads)
    : overlap_(overlap), bucket_mb_(bucket_mb), stage_(stage_grads) {
  LC_CHECK(bucket_mb > 0.0, "bucket_mb ", bucket_mb);
}

ShardedDataParallel::~ShardedDataParallel() {
  try {  // a step that threw may have reductions queued that write into the shard
    wait_launched();
  } catch (...) {
  }
  if (stage_ && bound() && store().grads_staged()) store().stage_grads(nullptr);  // the store outlives us
}

GroupLayout GroupLayout::of(const std::vector<int>& group_of, int rank) {
  GroupLayout l;
  std::vector<int> ids;  // members[k]'s group
  for (int r = 0; r < static_cast<int>(group_of.size()); ++r) {
    const int g = group_of[static_cast<std::size_t>(r)];
    const auto k = static_cast<std::size_t>(std::find(ids.begin(), ids.end(), g) - ids.begin());
    if (k == ids.size()) {
      ids.push_back(g);
      l.members.emplace_back();
    }
    if (r == rank) {
      l.mine = k;
      l.place = static_cast<int>(l.members[k].size());
    }
    l.members[k].push_back(r);
  }
  return l;
}

std::vector<int> GroupLayout::leaders() const {
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m.front());
  return out;
}

std::string GroupLayout::uneven() const {
  for (const auto& m : members)
    if (m.size() != members[mine].size())
      return detail::concat("group of rank ", m.front(), " has ", m.size(), " ranks, this rank's ", members[mine].size());
  return "";
}

std::vector<int> GroupLayout::peers() const {
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m[static_cast<std::size_t>(place)]);
  return out;
}

std::unique_ptr<ShardLevels> ShardLevels::of(Communicator& comm) {
  if (static_cast<int>(comm.groups().size()) != comm.size() || comm.memory() != Device::cpu) return nullptr;
  const GroupLayout layout = GroupLayout::of(comm.groups(), comm.rank());
  if (layout.members.size() < 2 || layout.members[layout.mine].size() < 2 || !layout.uneven().empty()) return nullptr;
  auto l = std::make_unique<ShardLevels>();
  l->groups = static_cast<int>(layout.members.size());
  l->place = layout.place;
  l->group = layout.members[layout.mine];
  l->peers = layout.peers();
  l->intra = std::make_unique<SubsetCommunicator>(comm, l->group);
  l->across = std::make_unique<SubsetCommunicator>(comm, l->peers);
  l->intra->set_tracer(comm.tracer());  // their messages are the world's, traced
  l->across->set_tracer(comm.tracer());
  return l;
}

// Each bucket's all-gather counts at both levels: G blocks make a part, L parts the bucket, and
// the leftover rides with the last position's block (the last place's part, its last group).
void ShardedDataParallel::size_levels() {
  const auto n = static_cast<std::size_t>(comm().size()), G = static_cast<std::size_t>(levels_->groups);
  const auto L = static_cast<std::size_t>(levels_->intra->size());
  const bool last_place = static_cast<std::size_t>(levels_->place) + 1 == L;
  across_counts_.clear();
  intra_counts_.clear();
  std::size_t most = 0;
  for (const Shard::Piece& p : shard_.pieces) {
    const std::size_t rest = p.size - p.block * n;
    across_counts_.emplace_back(G, p.block);
    if (last_place) across_counts_.back().back() += rest;
    intra_counts_.emplace_back(L, p.block * G);
    intra_counts_.back().back() += rest;
    most = std::max(most, p.block * G + rest);
  }
  part_ = DeviceArray<float>(store().device(), most);
}

void ShardedDataParallel::prepare(std::int64_t /*first_step*/) {
  // The model now, for a strategy bound to the shard (an outer sync's anchor); again before the
  // first step, after a resume has loaded the whole model.
  levels_ = ShardLevels::of(comm());
  shard_.cut(store(), position(), comm().size(), bucket_mb_);
  if (levels_) size_levels();
  fresh_ = true;
  work_.clear();
  for (std::size_t i = 0; i < shard_.pieces.size(); ++i) work_.push_back(std::make_unique<Work>());
  launched_ = 0;
  if (overlap_) comm().reserve_async(shard_.pieces.size());
  if (!stage_) return;
  // Slots are made at the first step, each as large as the buckets it has held.
  slot_of_.assign(shard_.pieces.size(), -1);
  slots_.clear();
  scratch_.clear();
  free_.clear();
  released_ = 0;
  micro_ = 0;
  store().stage_grads(this);
}

// A slot for a bucket of `size`: the smallest free one that holds it, else a free one grown to it;
// with none free, the oldest reduction's once it is done (with two slots made: one written, one
// reduced), else a new one. The same calls every step, so slots grow at the first step only.
int ShardedDataParallel::acquire(std::size_t size) {
  for (;;) {
    int fit = -1;
    for (const int k : free_)
      if (slots_[k].size() >= size && (fit < 0 || slots_[k].size() < slots_[fit].size())) fit = k;
    if (fit < 0 && !free_.empty()) {
      fit = free_.back();
      grow(slots_[fit], size);
    }
    if (fit >= 0) {
      free_.erase(std::find(free_.begin(), free_.end(), fit));
      return fit;
    }
    if (released_ < launched_ && slots_.size() >= 2) {
      Stopwatch t;
      work_[shard_.pieces.size() - 1 - released_]->wait();
      if (!in_ready_) blocked_s_ += t.seconds();  // grads_ready() charges its own
      release(released_);
      continue;
    }
    slots_.emplace_back(store().device(), size);
    scratch_.emplace_back(store().device());  // sized at a second micro-batch's first use
    return static_cast<int>(slots_.size()) - 1;
  }
}

void ShardedDataParallel::grow(DeviceArray<float>& a, std::size_t n) {
  if (a.size() < n) a = DeviceArray<float>(a.device(), n);  // nothing in it to keep
}

std::size_t ShardedDataParallel::piece_of(std::size_t offset) const {
  const auto& ps = shard_.pieces;
  const auto it = std::upper_bound(ps.begin(), ps.end(), offset, [](std::size_t o, const Shard::Piece& p) { return o < p.begin; });
  LC_CHECK(it != ps.begin() && offset < std::prev(it)->begin + std::prev(it)->size, "gradient element ", offset,
           " outside the model's ", store().size());
  return static_cast<std::size_t>(it - ps.begin()) - 1;
}

std::size_t ShardedDataParallel::piece_end(std::size_t offset) const {
  const Shard::Piece& p = shard_.pieces[piece_of(offset)];
  return p.begin + p.size;
}

float* ShardedDataParallel::at(std::size_t offset, std::size_t n) {
  const std::size_t i = piece_of(offset);
  const Shard::Piece& p = shard_.pieces[i];
  LC_CHECK(offset + n <= p.begin + p.size, "gradients [", offset, ", ", offset + n, ") cross a bucket's end (",
           p.begin + p.size, "): a model writes one tensor's gradient through ParamStore::grad(view)");
  LC_CHECK(!launched(i), "gradients at ", offset, " written after backward reported them final (grads_ready)");
  if (slot_of_[i] < 0) {
    slot_of_[i] = acquire(p.size);
    fill_zero(store().device(), slots_[static_cast<std::size_t>(slot_of_[i])].data(), p.size * sizeof(float));
  }
  return slots_[static_cast<std::size_t>(slot_of_[i])].data() + (offset - p.begin);
}

void ShardedDataParallel::release(std::size_t k) {
  const std::size_t i = shard_.pieces.size() - 1 - k;
  free_.push_back(slot_of_[i]);
  slot_of_[i] = -1;
  released_ = k + 1;
}

void ShardedDataParallel::zero() {
  LC_CHECK(released_ == launched_ && free_.size() == slots_.size(), "ZeRO-2's staging zeroed with ",
           slots_.size() - free_.size(), " buckets still held");
  launched_ = released_ = 0;
  micro_ = 0;
}

std::uint64_t ShardedDataParallel::bytes() const {
  std::uint64_t n = 0;
  for (std::size_t k = 0; k < slots_.size(); ++k) n += (slots_[k].size() + scratch_[k].size()) * sizeof(float);
  return n;
}

void ShardedDataParallel::reduce_piece(std::size_t i) {
  Stopwatch t;
  const Shard::Piece& p = shard_.pieces[i];
  const auto n = static_cast<std::size_t>(comm().size());
  // Staged, a later micro-batch's average lands in the slot's scratch and is added to the shard.
  const bool adds = stage_ && micro_ > 0;
  float* g = stage_ ? slots_[static_cast<std::size_t>(slot_of_[i])].data() : store().grads().data() + p.begin;
  float* mine = shard_.store.grads().data() + p.offset;
  float* out = adds ? scratch_[static_cast<std::size_t>(slot_of_[i])].data() : mine;
  if (levels_) {  // inside the group into parts of G blocks, then between the groups
    const std::size_t part = p.block * static_cast<std::size_t>(levels_->groups);
    levels_->intra->reduce_scatter(CBuf{g, p.block * n, DType::f32}, Buf{part_.data(), part, DType::f32}, ReduceOp::avg);
    levels_->across->reduce_scatter(CBuf{part_.data(), part, DType::f32}, Buf{out, p.block, DType::f32}, ReduceOp::avg);
  } else {
    comm().reduce_scatter(CBuf{g, p.block * n, DType::f32}, Buf{out, p.block, DType::f32}, ReduceOp::avg);
  }
  // The rest (fewer than n elements) belongs to the last position: one small all-reduce.
  const std::size_t rest = p.size - p.block * n;
  if (rest > 0) {
    comm().all_reduce(Buf{g + p.block * n, rest, DType::f32}, ReduceOp::avg);
    if (position() + 1 == comm().size())
      copy_bytes(out + p.block, shard_.store.device(), g + p.block * n, store().device(), rest * sizeof(float));
  }
  if (adds) ops::kernels(shard_.store.device()).axpy(mine, 1.0f, out, p.mine.size());
  comm_s_ += t.seconds();
}

void ShardedDataParallel::launch() {
  const std::size_t i = shard_.pieces.size() - 1 - launched_;
  if (stage_) {
    if (slot_of_[i] < 0) at(shard_.pieces[i].begin, 0);  // no gradient written: a zeroed slot
    const Shard::Piece& p = shard_.pieces[i];
    if (micro_ > 0) grow(scratch_[static_cast<std::size_t>(slot_of_[i])], p.size - p.block * (comm().size() - 1));
  }
  ++launched_;
  if (!overlap_) {
    reduce_piece(i);
    if (stage_) release(launched_ - 1);
    return;
  }
  comm().run_async(*work_[i], [this, i] { reduce_piece(i); }, OpLabel{OpLabel::bucket, static_cast<std::int32_t>(i)});
}

void ShardedDataParallel::wait_launched() {
  std::exception_ptr first;
  for (std::size_t k = released_; k < launched_ && overlap_; ++k) {
    try {
      work_[shard_.pieces.size() - 1 - k]->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (stage_) {
    for (std::size_t k = released_; k < launched_; ++k) release(k);
    released_ = 0;
  }
  launched_ = 0;
  if (first) std::rethrow_exception(first);
}

void ShardedDataParallel::grads_ready(std::int64_t /*step*/, std::size_t from) {
  if (!overlap_ && !stage_) return;
  // Staged, all of it holds backward's thread: charged as communication (blocked_s_).
  struct Charge {
    ShardedDataParallel& z;
    Stopwatch t;
    explicit Charge(ShardedDataParallel& z) : z(z) { z.in_ready_ = true; }
    ~Charge() {
      z.in_ready_ = false;
      if (z.stage_) z.blocked_s_ += t.seconds();
    }
  } charge(*this);
  const std::size_t n = shard_.pieces.size();
  while (launched_ < n && shard_.pieces[n - 1 - launched_].begin >= from) launch();
  // Staged, a micro-batch ends with every bucket in the shard and the slots free for the next.
  if (stage_ && launched_ == n) {
    wait_launched();
    ++micro_;
  }
}

void ShardedDataParallel::after_backward(std::int64_t /*step*/) {
  LC_CHECK(bound(), "ShardedDataParallel::after_backward before start()");
  // The shard's weights come from the whole model once, after start() and any resume loaded it.
  if (fresh_) {
    shard_.take(store());
    fresh_ = false;
  }
  if (stage_) {
    LC_CHECK(micro_ > 0 && launched_ == 0, "ZeRO-2: the step's last backward was not reported whole (grads_ready(step, 0))");
    return;
  }
  while (launched_ < shard_.pieces.size()) launch();
  wait_launched();  // reduce_piece counted its seconds, on whichever thread ran it
}

void ShardedDataParallel::gather() {
  if (!levels_) return shard_.gather(comm(), store());
  for (std::size_t i = 0; i < shard_.pieces.size(); ++i) {
    const Shard::Piece& p = shard_.pieces[i];
    const std::size_t part = std::accumulate(across_counts_[i].begin(), across_counts_[i].end(), std::size_t{0});
    levels_->across->all_gather_v(CBuf{shard_.store.params().data() + p.offset, p.mine.size(), DType::f32},
                                  Buf{part_.data(), part, DType::f32}, across_counts_[i]);
    levels_->intra->all_gather_v(CBuf{part_.data(), part, DType::f32},
                                 Buf{store().params().data() + p.begin, p.size, DType::f32}, intra_counts_[i]);
  }
}

bool ShardedDataParallel::after_update(std::int64_t /*step*/) {
  Stopwatch t;
  gather();
  comm_s_ += t.seconds();
  return false;  // the optimizer's update, completed: no replica was averaged
}

void ShardedDataParallel::sum(std::span<double> values) {
  const auto n = static_cast<std::size_t>(comm().size());
  gathered_.resize(values.size() * n);  // allocates at the first step only
  comm().all_gather(CBuf{values.data(), values.size_bytes(), DType::u8},
                    Buf{gathered_.data(), values.size_bytes() * n, DType::u8});
  for (std::size_t i = 0; i < values.size(); ++i) {
    double s = 0.0;
    for (std::size_t r = 0; r < n; ++r) s += gathered_[r * values.size() + i];
    values[i] = s;
  }
}

std::string ShardedDataParallel::describe() const {
  std::ostringstream os;
  os << (stage_ ? "data parallel, gradients and optimizer state sharded (ZeRO-2: each bucket reduce-scattered from a "
                  "staging slot as backward makes it, optimizer on the shard, all-gather"
                : "data parallel, optimizer state sharded (ZeRO-1: reduce-scatter, optimizer on the shard, all-gather");
  if (bound())
    os << "; this rank steps " << shard_.store.size() << " of " << store().size() << " elements, in "
       << shard_.pieces.size() << (shard_.pieces.size() == 1 ? " bucket" : " buckets")
       << (overlap_ && !stage_ ? ", each reduce-scattered as backward produces it" : "")
       << (stage_ ? ", " + std::to_string(slots_.size()) + " staging slots" : "");
  os << ")";
  return os.str();
}

}  // namespace laconic
