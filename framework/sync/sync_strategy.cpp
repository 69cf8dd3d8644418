#include "framework/sync/sync_strategy.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"
#include "core/ops/dispatch.h"

namespace laconic {

void SyncStrategy::start(ParamStore& store, Communicator& comm, std::int64_t first_step) {
  comm.broadcast(store.params().data(), store.params().size_bytes(), 0);
  bind(store, comm, first_step);
}

void SyncStrategy::bind(ParamStore& store, Communicator& comm, std::int64_t first_step) {
  store_ = &store;
  comm_ = &comm;
  prepare(first_step);
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

DataParallel::~DataParallel() {
  // A step that threw midway may have reductions queued that write into the gradients.
  try {
    wait_launched();
  } catch (...) {
  }
}

void DataParallel::prepare(std::int64_t /*first_step*/) {
  ParamStore& store = this->store();
  buckets_ = make_buckets(store, opts_.bucket_mb);
  reducer_->prepare(buckets_);
  if (opts_.momentum > 0) velocity_ = DeviceArray<float>(store.device(), store.size());  // zeroed
  work_.clear();
  for (std::size_t i = 0; i < buckets_.size(); ++i) work_.push_back(std::make_unique<Work>());
  if (opts_.overlap) comm().reserve_async(buckets_.size());
}

void DataParallel::reduce_bucket(std::size_t i) {
  Stopwatch t;
  const BucketLayout& b = buckets_[i];
  float* g = store().grads().data() + b.begin;
  if (opts_.momentum > 0) {
    float* u = velocity_.data() + b.begin;
    const auto mu = static_cast<float>(opts_.momentum);
    if (velocity_.device() == Device::cpu) {  // one fused pass
      for (std::size_t j = 0; j < b.size; ++j) g[j] = u[j] = mu * u[j] + g[j];
    } else {  // u = mu u + g; g = u, with the device's kernels (same roundings: mu u, then + g)
      const ops::Kernels& k = ops::kernels(velocity_.device());
      k.scale(u, mu, b.size);
      k.axpy(u, 1.0f, g, b.size);
      copy_bytes(g, velocity_.device(), u, velocity_.device(), b.size * sizeof(float));
    }
  }
  reducer_->reduce(std::span<float>(g, b.size), b, step_, comm());
  comm_s_ += t.seconds();
}

void DataParallel::launch(std::int64_t step) {
  // Only at a step's first bucket: later buckets of the step may run on the communication thread
  // while this one is launched, and they read it (the queue's mutex publishes it).
  if (launched_ == 0) step_ = step;
  const std::size_t i = launched_++;
  if (!opts_.overlap) {
    reduce_bucket(i);
    return;
  }
  comm().run_async(*work_[i], [this, i] { reduce_bucket(i); },  // two words: no allocation
                   OpLabel{OpLabel::bucket, static_cast<std::int32_t>(i)});
}

void DataParallel::wait_launched() {
  std::exception_ptr first;
  for (std::size_t i = 0; i < launched_ && opts_.overlap; ++i) {
    try {
      work_[i]->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  launched_ = 0;
  if (first) std::rethrow_exception(first);
}

void DataParallel::grads_ready(std::int64_t step, std::size_t from) {
  if (!opts_.overlap) return;
  while (launched_ < buckets_.size() && buckets_[launched_].begin >= from) launch(step);
}

void DataParallel::after_backward(std::int64_t step) {
  LC_CHECK(bound(), "DataParallel::after_backward before start()");
  while (launched_ < buckets_.size()) launch(step);
  wait_launched();
}

std::vector<StateTensor> DataParallel::state() {
  std::vector<StateTensor> out = reducer_->state();
  if (!velocity_.empty()) out.push_back({"data_parallel.velocity", velocity_.span(), velocity_.device()});
  return out;
}

std::string DataParallel::describe() const {
  std::ostringstream os;
  os << "data parallel (" << reducer_->describe() << ", " << buckets_.size() << " buckets of <= "
     << opts_.bucket_mb << " MiB, " << (opts_.overlap ? "overlapped with backward" : "after backward") << ")";
  return os.str();
}

}  // namespace laconic
