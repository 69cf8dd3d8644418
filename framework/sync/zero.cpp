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

void Shard::cut(const ParamStore& whole, int rank, int n) {
  range = shard_range(whole.size(), rank, n);
  block = whole.size() / static_cast<std::size_t>(n);
  counts.assign(static_cast<std::size_t>(n), block);
  counts.back() = whole.size() - block * static_cast<std::size_t>(n - 1);
  store = make_shard_store(whole, range, tensor_of);
  take(whole);
}

void Shard::take(const ParamStore& whole) {
  copy_bytes(store.params().data(), store.device(), whole.params().data() + range.begin, whole.device(),
             range.size() * sizeof(float));
}

void Shard::gather(Communicator& comm, ParamStore& whole) const {
  comm.all_gather_v(CBuf{store.params().data(), range.size(), DType::f32},
                    Buf{whole.params().data(), whole.size(), DType::f32}, counts);
}

void ShardedDataParallel::prepare(std::int64_t /*first_step*/) {
  // The model now, for a strategy bound to the shard (an outer sync's anchor); again before the
  // first step, after a resume has loaded the whole model.
  shard_.cut(store(), comm().rank(), comm().size());
  fresh_ = true;
}

void ShardedDataParallel::after_backward(std::int64_t /*step*/) {
  LC_CHECK(bound(), "ShardedDataParallel::after_backward before start()");
  Stopwatch t;
  ParamStore& whole = store();
  // The shard's weights come from the whole model once, after start() and any resume loaded it.
  if (fresh_) {
    shard_.take(whole);
    fresh_ = false;
  }
  const auto n = static_cast<std::size_t>(comm().size());
  const std::size_t block = shard_.block;
  const std::span<float> g = whole.grads();
  comm().reduce_scatter(CBuf{g.data(), block * n, DType::f32}, Buf{shard_.store.grads().data(), block, DType::f32},
                        ReduceOp::avg);
  // The rest (fewer than n elements) belongs to the last rank: one small all-reduce.
  if (const std::size_t rest = whole.size() - block * n; rest > 0) {
    comm().all_reduce(Buf{g.data() + block * n, rest, DType::f32}, ReduceOp::avg);
    if (comm().rank() + 1 == comm().size())
      copy_bytes(shard_.store.grads().data() + block, shard_.store.device(), g.data() + block * n, whole.device(),
                 rest * sizeof(float));
  }
  comm_s_ += t.seconds();
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
  if (bound()) os << "; this rank steps " << shard_.range.size() << " of " << store().size() << " elements";
  os << ")";
  return os.str();
}

}  // namespace laconic
