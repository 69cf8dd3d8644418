#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "compression/reducer.h"
#include "core/check.h"

// Plain C++; its functions are defined (and called) only with LACONIC_HAVE_CUDA.
#include "compression/cuda/reducers_cuda.h"

namespace laconic {

BucketLayout flat_bucket(std::size_t n, int id) {
  BucketLayout b;
  b.id = id;
  b.size = n;
  b.tensors.push_back(TensorShape{0, n, 1});
  return b;
}

RankChunks::RankChunks(std::size_t elements, int ranks)
    : n(elements), world(static_cast<std::size_t>(ranks)) {
  LC_CHECK(ranks >= 1, "world size ", ranks);
  chunk = (n + 8 * world - 1) / (8 * world) * 8;
}

std::size_t RankChunks::real(std::size_t j) const {
  const std::size_t b = std::min(begin(j), n);
  return std::min(chunk, n - b);
}

ReducerStats& ReducerStats::operator+=(const ReducerStats& o) {
  for (auto count : kReducerCounts) this->*count += o.*count;
  return *this;
}

ReducerStats& ReducerStats::operator-=(const ReducerStats& o) {
  for (auto count : kReducerCounts) this->*count -= o.*count;
  return *this;
}

void check_reducer_device(Device device, const char* reducer) {
  LC_CHECK(device == Device::cpu || built_with_cuda(), "the ", reducer,
           " reducer cannot run on cuda: this build has no CUDA (configure with -DLACONIC_CUDA=ON)");
}

void no_cuda_build(const char* reducer) {
  LC_CHECK(false, reducer, " on cuda in a build without CUDA");
  std::abort();  // LC_CHECK(false) throws; this only tells the compiler
}

void Reducer::reduce_dense(std::span<float> data, Communicator& comm) {
  ReducerStats s;
  s.calls = 1;
  s.input_bytes = data.size_bytes();
  s.value_bytes = data.size_bytes();
  account(s);
  comm.all_reduce(data, ReduceOp::avg);
}

void check_comm_memory(Device device, const Communicator& comm, const char* reducer) {
  LC_CHECK(comm.memory() == device, "the ", reducer, " reducer keeps its buffers on ", name_of(device),
           " but the '", comm.backend(), "' communicator takes ", name_of(comm.memory()),
           " buffers: use a communicator for ", name_of(device), " memory (",
           device == Device::cuda ? "NCCL or the staging wrapper" : "threads or MPI", ")");
}

DenseReducer::DenseReducer(DType wire, Device device) : wire_(wire), device_(device), half_(device) {
  LC_CHECK(wire == DType::f32 || wire == DType::bf16 || wire == DType::f16,
           "dense reducer wire format must be f32, bf16 or f16, not ", name_of(wire));
  check_reducer_device(device, "dense");
}

void DenseReducer::prepare(std::span<const BucketLayout> buckets) {
  if (wire_ == DType::f32) return;
  std::size_t largest = 0;
  for (const auto& b : buckets) largest = std::max(largest, b.size);
  half_.resize(largest);
}

void DenseReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t /*step*/,
                          Communicator& comm) {
  LC_CHECK(data.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements, got ",
           data.size());
  check_comm_memory(device_, comm, "dense");
  ReducerStats s;
  s.calls = 1;
  s.input_bytes = data.size_bytes();
  s.value_bytes = data.size() * dtype_size(wire_);
  account(s);
  if (wire_ == DType::f32) {
    comm.all_reduce(data, ReduceOp::avg);
    return;
  }
  if (half_.size() < data.size()) half_.resize(data.size());  // prepare() was skipped
  const std::size_t n = data.size();
  std::uint16_t* h = half_.data();
  if (device_ == Device::cuda) {
#if defined(LACONIC_HAVE_CUDA)
    const bool bf = wire_ == DType::bf16;
    if (bf) reducers_cuda::to_bf16(h, data.data(), n);
    else reducers_cuda::to_f16(h, data.data(), n);
    comm.all_reduce(Buf{h, n, wire_}, ReduceOp::avg);
    if (bf) reducers_cuda::from_bf16(data.data(), h, n);
    else reducers_cuda::from_f16(data.data(), h, n);
#endif
    return;
  }
  if (wire_ == DType::bf16) {
    for (std::size_t i = 0; i < n; ++i) h[i] = to_bf16(data[i]).bits;
  } else {
    for (std::size_t i = 0; i < n; ++i) h[i] = to_f16(data[i]).bits;
  }
  comm.all_reduce(Buf{h, n, wire_}, ReduceOp::avg);
  if (wire_ == DType::bf16) {
    for (std::size_t i = 0; i < n; ++i) data[i] = from_bf16(bf16{h[i]});
  } else {
    for (std::size_t i = 0; i < n; ++i) data[i] = from_f16(f16{h[i]});
  }
}

std::string DenseReducer::describe() const {
  std::ostringstream os;
  os << "dense " << name_of(wire_) << " all-reduce";
  if (device_ == Device::cuda) os << " on cuda";
  return os.str();
}

}  // namespace laconic
