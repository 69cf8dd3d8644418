#include "framework/sync/zero.h"

#include <algorithm>
#include <exception>
#include <sstream>

#include "core/check.h"
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

void Shard::cut(const ParamStore& whole, int rank, int n, double bucket_mb) {
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
    const ShardRange r = shard_range(b.size, rank, n);
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

ShardedDataParallel::ShardedDataParallel(bool overlap, double bucket_mb) : overlap_(overlap), bucket_mb_(bucket_mb) {
  LC_CHECK(bucket_mb > 0.0, "bucket_mb ", bucket_mb);
}

ShardedDataParallel::~ShardedDataParallel() {
  try {  // a step that threw may have reductions queued that write into the shard
    wait_launched();
  } catch (...) {
  }
}

void ShardedDataParallel::prepare(std::int64_t /*first_step*/) {
  // The model now, for a strategy bound to the shard (an outer sync's anchor); again before the
  // first step, after a resume has loaded the whole model.
  shard_.cut(store(), comm().rank(), comm().size(), bucket_mb_);
  fresh_ = true;
  work_.clear();
  for (std::size_t i = 0; i < shard_.pieces.size(); ++i) work_.push_back(std::make_unique<Work>());
  launched_ = 0;
  if (overlap_) comm().reserve_async(shard_.pieces.size());
}

void ShardedDataParallel::reduce_piece(std::size_t i) {
  Stopwatch t;
  const Shard::Piece& p = shard_.pieces[i];
  const auto n = static_cast<std::size_t>(comm().size());
  float* g = store().grads().data() + p.begin;
  float* mine = shard_.store.grads().data() + p.offset;
  comm().reduce_scatter(CBuf{g, p.block * n, DType::f32}, Buf{mine, p.block, DType::f32}, ReduceOp::avg);
  // The rest (fewer than n elements) belongs to the last rank: one small all-reduce.
  if (const std::size_t rest = p.size - p.block * n; rest > 0) {
    comm().all_reduce(Buf{g + p.block * n, rest, DType::f32}, ReduceOp::avg);
    if (comm().rank() + 1 == comm().size())
      copy_bytes(mine + p.block, shard_.store.device(), g + p.block * n, store().device(), rest * sizeof(float));
  }
  comm_s_ += t.seconds();
}

void ShardedDataParallel::launch() {
  const std::size_t i = shard_.pieces.size() - 1 - launched_++;
  if (!overlap_) return reduce_piece(i);
  comm().run_async(*work_[i], [this, i] { reduce_piece(i); }, OpLabel{OpLabel::bucket, static_cast<std::int32_t>(i)});
}

void ShardedDataParallel::wait_launched() {
  std::exception_ptr first;
  for (std::size_t k = 0; k < launched_ && overlap_; ++k) {
    try {
      work_[shard_.pieces.size() - 1 - k]->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  launched_ = 0;
  if (first) std::rethrow_exception(first);
}

void ShardedDataParallel::grads_ready(std::int64_t /*step*/, std::size_t from) {
  if (!overlap_) return;
  const std::size_t n = shard_.pieces.size();
  while (launched_ < n && shard_.pieces[n - 1 - launched_].begin >= from) launch();
}

void ShardedDataParallel::after_backward(std::int64_t /*step*/) {
  LC_CHECK(bound(), "ShardedDataParallel::after_backward before start()");
  // The shard's weights come from the whole model once, after start() and any resume loaded it.
  if (fresh_) {
    shard_.take(store());
    fresh_ = false;
  }
  while (launched_ < shard_.pieces.size()) launch();
  wait_launched();  // reduce_piece counted its seconds, on whichever thread ran it
}

bool ShardedDataParallel::after_update(std::int64_t /*step*/) {
  Stopwatch t;
  shard_.gather(comm(), store());
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
  os << "data parallel, optimizer state sharded (ZeRO-1: reduce-scatter, optimizer on the shard, all-gather";
  if (bound())
    os << "; this rank steps " << shard_.store.size() << " of " << store().size() << " elements, in "
       << shard_.pieces.size() << (shard_.pieces.size() == 1 ? " bucket" : " buckets")
       << (overlap_ ? ", each reduce-scattered as backward produces it" : "");
  os << ")";
  return os.str();
}

}  // namespace laconic
