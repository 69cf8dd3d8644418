#include "framework/sync/sync_strategy.h"

#include <algorithm>
#include <sstream>

#include "framework/core/check.h"

namespace laconic {

void SyncStrategy::start(ParamStore& store, Communicator& comm) {
  comm.broadcast(store.params().data(), store.params().size_bytes(), 0);
}

std::vector<BucketLayout> make_buckets(const ParamStore& store, double bucket_mb) {
  LC_CHECK(bucket_mb > 0.0, "bucket_mb ", bucket_mb);
  const auto cap = static_cast<std::size_t>(bucket_mb * 1024.0 * 1024.0) / sizeof(float);
  const auto& views = store.views();
  std::vector<BucketLayout> out;
  // Walk the tensors from the last (whose gradients backward finishes first); close a bucket
  // when it reaches the cap. A bucket spans views [first, last] of the (ascending) buffer.
  std::size_t last = views.size();
  std::size_t size = 0;
  for (std::size_t v = views.size(); v-- > 0;) {
    size += views[v].numel;
    if (size >= cap || v == 0) {
      BucketLayout b;
      b.id = static_cast<int>(out.size());
      b.begin = views[v].offset;
      for (std::size_t t = v; t < last; ++t) {
        const auto& view = views[t];
        LC_CHECK(view.offset == b.begin + b.size, "parameter views are not contiguous at ", view.name);
        const auto rows = view.shape.empty() ? std::size_t{1} : static_cast<std::size_t>(view.shape[0]);
        b.tensors.push_back(TensorShape{b.size, rows, rows ? view.numel / rows : 1});
        b.size += view.numel;
      }
      out.push_back(std::move(b));
      last = v;
      size = 0;
    }
  }
  return out;
}

DataParallel::DataParallel(DataParallelOptions opts, std::unique_ptr<Reducer> reducer)
    : opts_(opts), reducer_(std::move(reducer)) {
  LC_CHECK(opts_.bucket_mb > 0.0, "bucket_mb ", opts_.bucket_mb);
  LC_CHECK(reducer_ != nullptr, "DataParallel needs a reducer");
}

void DataParallel::start(ParamStore& store, Communicator& comm) {
  SyncStrategy::start(store, comm);
  buckets_ = make_buckets(store, opts_.bucket_mb);
  reducer_->prepare(buckets_);
}

void DataParallel::after_backward(ParamStore& store, Communicator& comm, std::int64_t step) {
  auto grads = store.grads();
  for (const BucketLayout& b : buckets_) reducer_->reduce(grads.subspan(b.begin, b.size), b, step, comm);
}

std::string DataParallel::describe() const {
  std::ostringstream os;
  os << "allreduce (" << reducer_->describe() << ", buckets of " << opts_.bucket_mb << " MB)";
  return os.str();
}

}  // namespace laconic
