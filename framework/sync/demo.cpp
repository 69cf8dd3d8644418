#include "framework/sync/demo.h"

#include <algorithm>
#include <sstream>

#include "framework/core/check.h"
#include "framework/core/timer.h"

namespace laconic {

Demo::Demo(DemoOptions opts)
    : opts_(opts), wire_{opts.chunk, opts.topk, opts.codec}, dct_(opts.chunk) {
  LC_CHECK(opts_.chunk >= 2, "demo chunk ", opts_.chunk, " (expected >= 2)");
  LC_CHECK(opts_.topk >= 1 && opts_.topk <= opts_.chunk, "demo topk ", opts_.topk, " (expected 1 to the chunk, ",
           opts_.chunk, ")");
  LC_CHECK(opts_.beta >= 0.0 && opts_.beta < 1.0, "demo beta ", opts_.beta, " (expected [0, 1))");
}

void Demo::prepare(std::int64_t /*first_step*/) {
  const ParamStore& store = this->store();
  LC_CHECK(store.device() == Device::cpu, "demo runs on host buffers only (device = \"cpu\")");
  const std::size_t n = store.size();
  momentum_.assign(n, 0.0f);
  coef_.assign(n, 0.0f);
  sent_.assign(n, 0.0f);
  spatial_.assign(n, 0.0f);
  offsets_.clear();
  block_bytes_ = 0;
  std::size_t largest = 0;
  per_step_ = {};
  per_step_.calls = 1;
  per_step_.input_bytes = n * sizeof(float);
  for (const ParamView& v : store.views()) {
    dct_.prepare(v.numel);
    offsets_.push_back(block_bytes_);
    block_bytes_ += wire_.bytes(v.numel);
    largest = std::max(largest, v.numel);
    const std::size_t scales = quantize_scale_bytes(wire_.codec, wire_.k, wire_.kept(v.numel));
    per_step_.scale_bytes += scales;
    per_step_.value_bytes += wire_.value_bytes(v.numel) - scales;
    per_step_.index_bytes += wire_.index_bytes(v.numel);
  }
  scratch_.size_for(wire_, largest);
  gathered_.assign(static_cast<std::size_t>(comm().size()) * block_bytes_, 0);
}

void Demo::after_backward(std::int64_t /*step*/) {
  ParamStore& store = this->store();
  Communicator& comm = this->comm();
  const auto world = static_cast<std::size_t>(comm.size()), own = static_cast<std::size_t>(comm.rank());
  const std::span<float> g = store.grads();
  const auto beta = static_cast<float>(opts_.beta);
  for (std::size_t i = 0; i < g.size(); ++i) momentum_[i] = beta * momentum_[i] + g[i];
  const std::span<std::uint8_t> all(gathered_);
  const auto& views = store.views();
  // Encode every tensor's fast components; remove them from the momentum.
  for (std::size_t t = 0; t < views.size(); ++t) {
    const ParamView& v = views[t];
    const auto m = std::span<float>(momentum_).subspan(v.offset, v.numel);
    const auto coef = std::span<float>(coef_).subspan(v.offset, v.numel);
    const auto sent = std::span<float>(sent_).subspan(v.offset, v.numel);
    const auto spatial = std::span<float>(spatial_).subspan(v.offset, v.numel);
    dct_.forward(m, coef);
    chunk_topk_encode(coef, wire_, all.subspan(own * block_bytes_ + offsets_[t], wire_.bytes(v.numel)), sent, scratch_);
    dct_.inverse(sent, spatial);
    for (std::size_t i = 0; i < v.numel; ++i) m[i] -= spatial[i];
  }
  Stopwatch t;
  comm.all_gather(CBuf{all.data() + own * block_bytes_, block_bytes_, DType::u8}, Buf{all.data(), all.size(), DType::u8});
  comm_s_ += t.seconds();
  // The average of every rank's coefficients, back to parameter space, its sign the gradient.
  std::fill(coef_.begin(), coef_.end(), 0.0f);
  const float w = 1.0f / static_cast<float>(world);
  for (std::size_t r = 0; r < world; ++r)
    for (std::size_t i = 0; i < views.size(); ++i) {
      const ParamView& v = views[i];
      chunk_topk_decode_add(all.subspan(r * block_bytes_ + offsets_[i], wire_.bytes(v.numel)), wire_, w,
                            std::span<float>(coef_).subspan(v.offset, v.numel), scratch_);
    }
  for (const ParamView& v : views)
    dct_.inverse(std::span<const float>(coef_).subspan(v.offset, v.numel), g.subspan(v.offset, v.numel));
  for (float& x : g) x = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;  // NaN stays: the guard sees it

  stats_ += per_step_;
}

std::string Demo::describe() const {
  std::ostringstream os;
  os << "DeMo (momentum " << opts_.beta << " kept per rank; top-" << opts_.topk << " DCT-II coefficients of every "
     << opts_.chunk << " per tensor, " << name_of(opts_.codec) << " values, " << wire_.index_bits()
     << "-bit indices, all-gathered; sign of the average)";
  return os.str();
}

std::vector<StateTensor> Demo::state() { return {{"demo.momentum", momentum_, Device::cpu}}; }

}  // namespace laconic
