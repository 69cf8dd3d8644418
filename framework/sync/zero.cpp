#include "framework/sync/zero.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"

namespace laconic {

ShardRange shard_range(std::size_t size, int rank, int n) {
  LC_CHECK(n >= 1 && rank >= 0 && rank < n, "rank ", rank, " of ", n);
  const std::size_t q = size / static_cast<std::size_t>(n), r = static_cast<std::size_t>(rank);
  return {r * q, rank + 1 == n ? size : (r + 1) * q};
}

ParamStore make_shard_store(const ParamStore& whole, ShardRange range, std::vector<std::size_t>& tensor_of) {
  LC_CHECK(range.begin <= range.end && range.end <= whole.size(), "shard [", range.begin, ", ", range.end, ") of ",
           whole.size());
  ParamStore shard;
  tensor_of.clear();
  const auto& views = whole.views();
  for (std::size_t v = 0; v < views.size(); ++v) {
    const ParamView& w = views[v];
    const std::size_t lo = std::max(w.offset, range.begin), hi = std::min(w.offset + w.numel, range.end);
    if (lo >= hi) continue;
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

void ShardedDataParallel::prepare(std::int64_t /*first_step*/) {
  const ParamStore& whole = store();
  const int n = comm().size();
  range_ = shard_range(whole.size(), comm().rank(), n);
  block_ = whole.size() / static_cast<std::size_t>(n);
  counts_.assign(static_cast<std::size_t>(n), block_);
  counts_.back() = whole.size() - block_ * static_cast<std::size_t>(n - 1);
  shard_ = make_shard_store(whole, range_, tensor_of_);
  // The model now, for a strategy bound to the shard (an outer sync's anchor); again before the
  // first step, after a resume has loaded the whole model.
  copy_bytes(shard_.params().data(), shard_.device(), whole.params().data() + range_.begin, whole.device(),
             range_.size() * sizeof(float));
  fresh_ = true;
}

void ShardedDataParallel::after_backward(std::int64_t /*step*/) {
  LC_CHECK(bound(), "ShardedDataParallel::after_backward before start()");
  Stopwatch t;
  ParamStore& whole = store();
  // The shard's weights come from the whole model once, after start() and any resume loaded it.
  if (fresh_) {
    copy_bytes(shard_.params().data(), shard_.device(), whole.params().data() + range_.begin, whole.device(),
               range_.size() * sizeof(float));
    fresh_ = false;
  }
  const auto n = static_cast<std::size_t>(comm().size());
  const std::span<float> g = whole.grads();
  comm().reduce_scatter(CBuf{g.data(), block_ * n, DType::f32}, Buf{shard_.grads().data(), block_, DType::f32},
                        ReduceOp::avg);
  // The rest (fewer than n elements) belongs to the last rank: one small all-reduce.
  if (const std::size_t rest = whole.size() - block_ * n; rest > 0) {
    comm().all_reduce(Buf{g.data() + block_ * n, rest, DType::f32}, ReduceOp::avg);
    if (comm().rank() + 1 == comm().size())
      copy_bytes(shard_.grads().data() + block_, shard_.device(), g.data() + block_ * n, whole.device(),
                 rest * sizeof(float));
  }
  comm_s_ += t.seconds();
}

bool ShardedDataParallel::after_update(std::int64_t /*step*/) {
  Stopwatch t;
  comm().all_gather_v(CBuf{shard_.params().data(), range_.size(), DType::f32},
                      Buf{store().params().data(), store().size(), DType::f32}, counts_);
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
  if (bound()) os << "; this rank steps " << range_.size() << " of " << store().size() << " elements";
  os << ")";
  return os.str();
}

}  // namespace laconic
