#include "framework/sync/sync_strategy.h"

#include <algorithm>
#include <sstream>

#include "framework/core/check.h"

namespace laconic {

void SyncStrategy::start(ParamStore& store, Communicator& comm) {
  comm.broadcast(store.params().data(), store.params().size_bytes(), 0);
}

DataParallel::DataParallel(DataParallelOptions opts, std::unique_ptr<Reducer> reducer)
    : opts_(opts), reducer_(std::move(reducer)) {
  LC_CHECK(opts_.bucket_mb > 0.0, "bucket_mb ", opts_.bucket_mb);
  LC_CHECK(reducer_ != nullptr, "DataParallel needs a reducer");
}

void DataParallel::after_backward(ParamStore& store, Communicator& comm, std::int64_t step) {
  auto grads = store.grads();
  const auto cap = std::max<std::size_t>(
      1, static_cast<std::size_t>(opts_.bucket_mb * 1024.0 * 1024.0) / sizeof(float));
  // Walk from the end of the buffer (the last layer, whose gradients backward finishes first).
  for (std::size_t end = grads.size(); end > 0;) {
    const std::size_t begin = end > cap ? end - cap : 0;
    reducer_->reduce(grads.subspan(begin, end - begin), comm);
    end = begin;
  }
}

std::string DataParallel::describe() const {
  std::ostringstream os;
  os << "allreduce (" << reducer_->describe() << ", buckets of " << opts_.bucket_mb << " MB)";
  return os.str();
}

}  // namespace laconic
