#include "framework/sync/demo.h"

#include <algorithm>
#include <sstream>

#include "core/check.h"
#include "core/timer.h"

namespace laconic {

Demo::Demo(DemoOptions opts) : opts_(std::move(opts)), dct_(opts_.chunk) {
  LC_CHECK(opts_.chunk >= 2, "demo chunk ", opts_.chunk, " (expected >= 2)");
  const std::size_t block = opts_.dct == DemoDct::two_d ? opts_.chunk * opts_.chunk : opts_.chunk;
  LC_CHECK(opts_.topk >= 1 && opts_.topk <= block, "demo topk ", opts_.topk, " (expected 1 to the ",
           opts_.dct == DemoDct::two_d ? "block, chunk^2 = " : "chunk, ", block, ")");
  LC_CHECK(opts_.beta >= 0.0 && opts_.beta < 1.0, "demo beta ", opts_.beta, " (expected [0, 1))");
  LC_CHECK(!opts_.fold_lr || opts_.lr, "demo folds the learning rate into its momentum: DemoOptions::lr must give it");
}

void Demo::prepare(std::int64_t /*first_step*/) {
  const ParamStore& store = this->store();
  LC_CHECK(store.device() == Device::cpu, "demo runs on host buffers only (device = \"cpu\")");
  const std::size_t n = store.size();
  momentum_.assign(n, 0.0f);
  coef_.assign(n, 0.0f);
  sent_.assign(n, 0.0f);
  spatial_.assign(n, 0.0f);
  count_.assign(opts_.average == DemoAverage::senders ? n : 0, 0.0f);
  blocks_.clear();
  wire_ = {};
  std::size_t largest_block = 0;
  for (const ParamView& v : store.views()) {
    if (opts_.dct == DemoDct::one_d) {
      dct_.prepare(v.numel);
      wire_.add(v.offset, v.numel, ChunkTopK{opts_.chunk, opts_.topk, opts_.codec});
      continue;
    }
    // A matrix (shape[0], the rest), as the reference's 2-D weights; a vector is 1 x n.
    const std::size_t rows = v.shape.size() >= 2 ? static_cast<std::size_t>(v.shape[0]) : 1;
    const DctBlocks b = dct_.prepare_2d(rows, v.numel / rows);
    blocks_.push_back(b);
    largest_block = std::max(largest_block, b.block());
    wire_.add(v.offset, v.numel, ChunkTopK{b.block(), std::min(opts_.topk, b.block()), opts_.codec});
  }
  tmp_.assign(largest_block, 0.0f);
  wire_.size(scratch_);
  per_step_ = wire_.payload();
  per_step_.calls = 1;
  per_step_.input_bytes = n * sizeof(float);
  gathered_.assign(static_cast<std::size_t>(comm().size()) * wire_.bytes(), 0);
}

void Demo::forward(std::size_t t, std::span<const float> x, std::span<float> coef) {
  if (opts_.dct == DemoDct::one_d) dct_.forward(x, coef); else dct_.forward_2d(x, blocks_[t], coef, tmp_);
}

void Demo::inverse(std::size_t t, std::span<const float> coef, std::span<float> x) {
  if (opts_.dct == DemoDct::one_d) dct_.inverse(coef, x); else dct_.inverse_2d(coef, blocks_[t], x, tmp_);
}

void Demo::after_backward(std::int64_t step) {
  ParamStore& store = this->store();
  Communicator& comm = this->comm();
  const auto world = static_cast<std::size_t>(comm.size()), own = static_cast<std::size_t>(comm.rank());
  const std::span<float> g = store.grads();
  const auto beta = static_cast<float>(opts_.beta);
  const float lr = opts_.fold_lr ? static_cast<float>(opts_.lr(step)) : 1.0f;
  if (opts_.fold_lr) {
    for (std::size_t i = 0; i < g.size(); ++i) momentum_[i] = beta * momentum_[i] + lr * g[i];
  } else {
    for (std::size_t i = 0; i < g.size(); ++i) momentum_[i] = beta * momentum_[i] + g[i];
  }
  const auto& views = store.views();
  // Every tensor's coefficients; the fast ones encoded, and removed from the momentum.
  for (std::size_t t = 0; t < views.size(); ++t) {
    const ParamView& v = views[t];
    forward(t, std::span<const float>(momentum_).subspan(v.offset, v.numel), std::span<float>(coef_).subspan(v.offset, v.numel));
  }
  const std::size_t nb = wire_.bytes();
  const std::span<std::uint8_t> all(gathered_);
  wire_.encode(coef_, all.subspan(own * nb, nb), sent_, scratch_);
  for (std::size_t t = 0; t < views.size(); ++t) {
    const ParamView& v = views[t];
    const auto spatial = std::span<float>(spatial_).subspan(v.offset, v.numel);
    inverse(t, std::span<const float>(sent_).subspan(v.offset, v.numel), spatial);
    float* m = momentum_.data() + v.offset;
    for (std::size_t i = 0; i < v.numel; ++i) m[i] -= spatial[i];
  }
  Stopwatch timer;
  comm.all_gather(CBuf{all.data() + own * nb, nb, DType::u8}, Buf{all.data(), all.size(), DType::u8});
  comm_s_ += timer.seconds();
  // Every rank's coefficients decoded in rank order and averaged, back to parameter space, their
  // sign the gradient.
  std::fill(coef_.begin(), coef_.end(), 0.0f);
  if (opts_.average == DemoAverage::senders) {
    std::fill(count_.begin(), count_.end(), 0.0f);
    for (std::size_t r = 0; r < world; ++r) wire_.decode_add(all.subspan(r * nb, nb), 1.0f, coef_, scratch_, count_);
    for (std::size_t i = 0; i < coef_.size(); ++i)
      if (count_[i] > 1.0f) coef_[i] /= count_[i];
  } else {
    const float w = 1.0f / static_cast<float>(world);
    for (std::size_t r = 0; r < world; ++r) wire_.decode_add(all.subspan(r * nb, nb), w, coef_, scratch_);
  }
  for (std::size_t t = 0; t < views.size(); ++t) {
    const ParamView& v = views[t];
    inverse(t, std::span<const float>(coef_).subspan(v.offset, v.numel), g.subspan(v.offset, v.numel));
  }
  for (float& x : g) x = x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == 0.0f ? 0.0f : x;  // NaN stays: the guard sees it

  stats_ += per_step_;
}

std::string Demo::describe() const {
  std::ostringstream os;
  os << "DeMo (momentum " << opts_.beta << (opts_.fold_lr ? " of lr-scaled gradients" : "") << " kept per rank; top-"
     << opts_.topk << " DCT-II coefficients of every ";
  if (opts_.dct == DemoDct::two_d) os << "block of up to " << opts_.chunk << " x " << opts_.chunk;
  else os << "1-D chunk of " << opts_.chunk;
  os << " per tensor, " << name_of(opts_.codec) << " values, all-gathered; sign of the average over the "
     << (opts_.average == DemoAverage::senders ? "ranks that sent each coefficient" : "ranks") << ")";
  return os.str();
}

std::vector<StateTensor> Demo::state() { return {{"demo.momentum", momentum_, Device::cpu}}; }

}  // namespace laconic
