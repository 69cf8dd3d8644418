#include "compression/sparse.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/check.h"

namespace laconic {

namespace {

// Bit i of the stream is bit i % 8 of byte i / 8; a value's bits go least significant first.
void put_bits(std::uint8_t* stream, std::size_t at, std::uint32_t value, int bits) {
  for (int b = 0; b < bits; ++b, ++at) {
    const auto mask = static_cast<std::uint8_t>(1u << (at % 8));
    if ((value >> b) & 1u) stream[at / 8] |= mask; else stream[at / 8] &= static_cast<std::uint8_t>(~mask);
  }
}

std::uint32_t get_bits(const std::uint8_t* stream, std::size_t at, int bits) {
  std::uint32_t v = 0;
  for (int b = 0; b < bits; ++b, ++at) v |= static_cast<std::uint32_t>((stream[at / 8] >> (at % 8)) & 1u) << b;
  return v;
}

void check(const ChunkTopK& c) {
  LC_CHECK(c.chunk >= 1, "top-k chunk ", c.chunk, " (expected >= 1)");
  LC_CHECK(c.k >= 1 && c.k <= c.chunk, "top-k per chunk ", c.k, " (expected 1 to ", c.chunk, ")");
}

}  // namespace

int ChunkTopK::index_bits() const { return std::bit_width(chunk - 1); }

std::size_t ChunkTopK::kept(std::size_t n) const {
  const std::size_t whole = n / chunk, rest = n % chunk;
  return whole * k + std::min(k, rest);
}

std::size_t ChunkTopK::value_bytes(std::size_t n) const { return quantize_bytes(codec, k, kept(n)); }

std::size_t ChunkTopK::index_bytes(std::size_t n) const {
  return (kept(n) * static_cast<std::size_t>(index_bits()) + 7) / 8;
}

void ChunkTopKScratch::size_for(const ChunkTopK& c, std::size_t n) {
  if (order.size() < c.chunk) order.resize(c.chunk);
  if (values.size() < c.kept(n)) values.resize(c.kept(n));
  if (positions.size() < c.kept(n)) positions.resize(c.kept(n));
}

void chunk_topk_encode(std::span<const float> x, const ChunkTopK& c, std::span<std::uint8_t> out,
                       std::span<float> sent, ChunkTopKScratch& scratch) {
  check(c);
  const std::size_t n = x.size(), kept = c.kept(n);
  LC_CHECK(out.size() >= c.bytes(n), "top-k output has ", out.size(), " bytes, ", c.bytes(n), " needed");
  LC_CHECK(sent.empty() || sent.size() == n, "sent has ", sent.size(), " elements, x ", n);
  LC_CHECK(scratch.order.size() >= c.chunk && scratch.values.size() >= kept && scratch.positions.size() >= kept,
           "top-k scratch not sized for ", n, " elements");
  std::size_t at = 0;  // kept values so far
  for (std::size_t begin = 0; begin < n; begin += c.chunk) {
    const std::size_t len = std::min(c.chunk, n - begin), k = std::min(c.k, len);
    const float* v = x.data() + begin;
    const auto first = scratch.order.begin(), last = first + static_cast<std::ptrdiff_t>(len);
    std::iota(first, last, 0u);
    // Largest magnitude first, ties to the lower position: a total order, so the selection is
    // the same on every machine.
    std::nth_element(first, first + static_cast<std::ptrdiff_t>(k) - 1, last, [v](std::uint32_t a, std::uint32_t b) {
      const float ma = std::fabs(v[a]), mb = std::fabs(v[b]);
      return ma > mb || (ma == mb && a < b);
    });
    std::sort(first, first + static_cast<std::ptrdiff_t>(k));
    for (std::size_t i = 0; i < k; ++i) {
      scratch.positions[at + i] = scratch.order[i];
      scratch.values[at + i] = v[scratch.order[i]];
    }
    at += k;
  }
  const std::size_t vb = c.value_bytes(n);
  quantize_encode(std::span<const float>(scratch.values).first(kept), {}, c.codec, c.k, out.first(vb));
  std::uint8_t* idx = out.data() + vb;
  std::memset(idx, 0, c.index_bytes(n));
  const int bits = c.index_bits();
  for (std::size_t i = 0; i < kept; ++i) put_bits(idx, i * static_cast<std::size_t>(bits), scratch.positions[i], bits);
  if (sent.empty()) return;
  std::fill(sent.begin(), sent.end(), 0.0f);
  chunk_topk_decode_add(out, c, 1.0f, sent, scratch);
}

void chunk_topk_decode_add(std::span<const std::uint8_t> in, const ChunkTopK& c, float weight, std::span<float> sum,
                           ChunkTopKScratch& scratch, std::span<float> count) {
  check(c);
  const std::size_t n = sum.size(), kept = c.kept(n);
  LC_CHECK(count.empty() || count.size() == n, "count has ", count.size(), " elements, sum ", n);
  LC_CHECK(in.size() >= c.bytes(n), "top-k input has ", in.size(), " bytes, ", c.bytes(n), " expected");
  LC_CHECK(scratch.values.size() >= kept, "top-k scratch not sized for ", n, " elements");
  const std::span<float> values = std::span<float>(scratch.values).first(kept);
  const std::size_t vb = c.value_bytes(n);
  quantize_decode(in.first(vb), c.codec, c.k, values);
  const std::uint8_t* idx = in.data() + vb;
  const int bits = c.index_bits();
  for (std::size_t i = 0; i < kept; ++i) {
    const std::size_t chunk_begin = i / c.k * c.chunk;  // chunk i / k (the last holds the rest)
    const std::uint32_t pos = get_bits(idx, i * static_cast<std::size_t>(bits), bits);
    LC_CHECK(chunk_begin + pos < n, "top-k position ", chunk_begin + pos, " outside ", n, " elements");
    sum[chunk_begin + pos] += weight * values[i];
    if (!count.empty()) count[chunk_begin + pos] += 1.0f;
  }
}

// ---- TensorTopK ----

void TensorTopK::add(std::size_t offset, std::size_t numel, const ChunkTopK& topk) {
  check(topk);
  LC_CHECK(offset == size(), "tensor at ", offset, " after ", size(), " elements (expected contiguous parts)");
  parts_.push_back({offset, numel, topk, bytes_});
  bytes_ += topk.bytes(numel);
}

ReducerStats TensorTopK::payload() const {
  ReducerStats s;
  for (const Part& p : parts_) {
    const std::size_t scales = quantize_scale_bytes(p.topk.codec, p.topk.k, p.topk.kept(p.numel));
    s.scale_bytes += scales;
    s.value_bytes += p.topk.value_bytes(p.numel) - scales;
    s.index_bytes += p.topk.index_bytes(p.numel);
  }
  return s;
}

void TensorTopK::size(ChunkTopKScratch& scratch) const {
  for (const Part& p : parts_) scratch.size_for(p.topk, p.numel);
}

void TensorTopK::encode(std::span<const float> x, std::span<std::uint8_t> out, std::span<float> sent,
                        ChunkTopKScratch& scratch) const {
  LC_CHECK(x.size() == size() && out.size() >= bytes_ && (sent.empty() || sent.size() == size()),
           "per-tensor top-k of ", size(), " elements, ", bytes_, " bytes: got ", x.size(), ", ", out.size(), ", ",
           sent.size());
  for (const Part& p : parts_)
    chunk_topk_encode(x.subspan(p.offset, p.numel), p.topk, out.subspan(p.at, p.topk.bytes(p.numel)),
                      sent.empty() ? sent : sent.subspan(p.offset, p.numel), scratch);
}

void TensorTopK::decode_add(std::span<const std::uint8_t> in, float weight, std::span<float> sum,
                            ChunkTopKScratch& scratch, std::span<float> count) const {
  LC_CHECK(sum.size() == size() && in.size() >= bytes_ && (count.empty() || count.size() == size()),
           "per-tensor top-k of ", size(), " elements, ", bytes_, " bytes: got ", sum.size(), ", ", in.size(), ", ",
           count.size());
  for (const Part& p : parts_)
    chunk_topk_decode_add(in.subspan(p.at, p.topk.bytes(p.numel)), p.topk, weight, sum.subspan(p.offset, p.numel),
                          scratch, count.empty() ? count : count.subspan(p.offset, p.numel));
}

// ---- SparseLoCo ----

SparseLocoReducer::SparseLocoReducer(SparseLocoOptions opts) : opts_(opts) {
  check(opts_.topk);
  LC_CHECK(opts_.beta >= 0.0 && opts_.beta <= 1.0, "sparseloco beta ", opts_.beta, " (expected [0, 1])");
}

void SparseLocoReducer::prepare(std::span<const BucketLayout> buckets) {
  for (const BucketLayout& b : buckets) {
    error(b);
    wire(b);
  }
}

std::vector<float>& SparseLocoReducer::error(const BucketLayout& bucket) {
  LC_CHECK(bucket.id >= 0, "bucket id ", bucket.id);
  const auto id = static_cast<std::size_t>(bucket.id);
  if (id >= error_.size()) error_.resize(id + 1);
  std::vector<float>& e = error_[id];
  if (e.empty()) e.assign(bucket.size, 0.0f);
  LC_CHECK(e.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size,
           " elements; its accumulator was sized for ", e.size());
  return e;
}

// Chunks of opts_.topk inside each tensor of the bucket (a bucket without a tensor list is one tensor).
const TensorTopK& SparseLocoReducer::wire(const BucketLayout& bucket) {
  const auto id = static_cast<std::size_t>(bucket.id);
  if (id >= wire_.size()) wire_.resize(id + 1);
  TensorTopK& w = wire_[id];
  if (w.parts().empty()) {
    for (const TensorShape& t : bucket.tensors) w.add(t.offset, t.numel(), opts_.topk);
    if (bucket.tensors.empty()) w.add(0, bucket.size, opts_.topk);
    w.size(scratch_);
  }
  LC_CHECK(w.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements; its tensors cover ", w.size());
  return w;
}

void SparseLocoReducer::size_wire(int world) {
  std::size_t largest = 0, bytes = 0;
  for (const auto& e : error_) largest = std::max(largest, e.size());
  for (const TensorTopK& w : wire_) bytes = std::max(bytes, w.bytes());
  if (world == world_ && largest <= sent_.size() && bytes <= wire_bytes_) return;
  sent_.assign(largest, 0.0f);
  gathered_.assign(static_cast<std::size_t>(world) * bytes, 0);
  world_ = world;
  wire_bytes_ = bytes;
}

void SparseLocoReducer::reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t /*step*/,
                               Communicator& comm) {
  LC_CHECK(data.size() == bucket.size, "bucket ", bucket.id, " has ", bucket.size, " elements, got ", data.size());
  check_comm_memory(Device::cpu, comm, "sparseloco");
  std::vector<float>& e = error(bucket);
  const TensorTopK& w = wire(bucket);
  const std::size_t n = data.size();
  size_wire(comm.size());
  const auto beta = static_cast<float>(opts_.beta);
  for (std::size_t i = 0; i < n; ++i) e[i] = beta * e[i] + data[i];
  const std::size_t nb = w.bytes();
  const auto world = static_cast<std::size_t>(comm.size()), own = static_cast<std::size_t>(comm.rank());
  const std::span<std::uint8_t> all = std::span<std::uint8_t>(gathered_).first(world * nb);
  const std::span<float> sent = std::span<float>(sent_).first(n);
  w.encode(e, all.subspan(own * nb, nb), sent, scratch_);
  for (std::size_t i = 0; i < n; ++i) e[i] -= sent[i];
  comm.all_gather(CBuf{all.data() + own * nb, nb, DType::u8}, Buf{all.data(), all.size(), DType::u8});
  std::fill(data.begin(), data.end(), 0.0f);
  const float scale = 1.0f / static_cast<float>(world);
  for (std::size_t r = 0; r < world; ++r) w.decode_add(all.subspan(r * nb, nb), scale, data, scratch_);

  ReducerStats s = w.payload();
  s.calls = 1;
  s.input_bytes = data.size_bytes();
  account(s);
}

std::string SparseLocoReducer::describe() const {
  std::ostringstream os;
  os << "sparseloco top-" << opts_.topk.k << " of every " << opts_.topk.chunk << " per tensor ("
     << 100.0 * static_cast<double>(opts_.topk.k) / static_cast<double>(opts_.topk.chunk) << "%), "
     << name_of(opts_.topk.codec) << " values, " << opts_.topk.index_bits()
     << "-bit indices, error feedback decayed by " << opts_.beta;
  return os.str();
}

std::vector<StateTensor> SparseLocoReducer::state() {
  std::vector<StateTensor> out;
  for (std::size_t id = 0; id < error_.size(); ++id)
    if (!error_[id].empty()) out.push_back({"sparseloco.error." + std::to_string(id), error_[id], Device::cpu});
  return out;
}

}  // namespace laconic
