#include "workloads/models/mlp.h"

#include <span>
#include <sstream>

#include "core/check.h"
#include "workloads/nn/buffer.h"

namespace laconic {

namespace {

const char* activation_name(MlpActivation a) { return a == MlpActivation::relu ? "relu" : "gelu"; }

const MlpOptions& validated(const MlpOptions& o) {
  LC_CHECK(o.inputs > 0, "mlp: inputs must be positive, got ", o.inputs);
  LC_CHECK(o.classes > 0, "mlp: classes must be positive, got ", o.classes);
  for (int h : o.hidden) LC_CHECK(h > 0, "mlp: hidden widths must be positive, got ", h);
  LC_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, "mlp: dropout must be in [0, 1), got ", o.dropout);
  return o;
}

}  // namespace

Mlp::Mlp(const MlpOptions& opts)
    : opts_(validated(opts)), loss_(params_, nn::SoftmaxCrossEntropyOptions{opts.classes, -1}) {
  blocks_.reserve(opts_.hidden.size());
  int in = opts_.inputs;
  for (std::size_t i = 0; i < opts_.hidden.size(); ++i) {
    const int h = opts_.hidden[i];
    const std::string name = "fc" + std::to_string(i + 1);
    // The first layer's input is data: no dX needed.
    nn::LinearOptions fc = nn::linear(in, h, opts_.precision);
    fc.input_grad = i > 0;
    Block b{nn::Linear(params_, name, fc), std::nullopt,
            nn::Relu(params_, h), std::nullopt};
    if (opts_.layernorm) b.norm.emplace(params_, "ln" + std::to_string(i + 1), nn::LayerNormOptions{h});
    if (opts_.activation == MlpActivation::gelu) b.act = nn::Gelu(params_, h);
    if (opts_.dropout > 0.0f) b.drop.emplace(params_, nn::DropoutOptions{h, opts_.dropout, i});
    blocks_.push_back(std::move(b));
    in = h;
  }
  head_ = std::make_unique<nn::Linear>(
      params_, "fc" + std::to_string(opts_.hidden.size() + 1),
      nn::LinearOptions{in, opts_.classes, true, /*input_grad=*/!opts_.hidden.empty(), /*output=*/true,
                        opts_.precision});
  params_.finalize();
}

void Mlp::init(std::uint64_t seed) {
  for (auto& b : blocks_) {
    b.fc.init(seed);
    if (b.norm) b.norm->init();
  }
  head_->init(seed);
}

ForwardResult Mlp::forward(const Batch& batch, const ForwardOptions& opts) {
  LC_CHECK(batch.features == opts_.inputs, "mlp: batch has ", batch.features,
           " features per example, the model expects ", opts_.inputs);
  const int rows = batch.size;
  LC_CHECK(rows >= 0 && batch.inputs.size() >= static_cast<std::size_t>(rows) * opts_.inputs &&
               batch.targets.size() >= static_cast<std::size_t>(rows),
           "mlp: batch of ", rows, " holds ", batch.inputs.size(), " inputs and ",
           batch.targets.size(), " targets");
  // Labels are checked here, on the host: a device kernel cannot throw (it would give a NaN loss).
  for (int r = 0; r < rows; ++r) {
    const std::int32_t t = batch.targets[r];
    LC_CHECK(t == -1 || (t >= 0 && t < opts_.classes), "target ", t, " in row ", r,
             " is outside [0, ", opts_.classes, ") and is not ignore_index -1");
  }
  const Device dev = params_.device();
  const auto n_rows = static_cast<std::size_t>(rows);
  const float* x = nn::on_device(
      inputs_, dev, std::span<const float>(batch.inputs.data(), n_rows * opts_.inputs));
  const std::int32_t* targets =
      nn::on_device(targets_, dev, std::span<const std::int32_t>(batch.targets.data(), n_rows));
  for (auto& b : blocks_) {
    x = b.fc.forward(x, rows);
    if (b.norm) x = b.norm->forward(x, rows);
    x = std::visit([&](auto& act) { return act.forward(x, rows); }, b.act);
    if (b.drop) x = b.drop->forward(x, rows, opts);
  }
  const float* logits = head_->forward(x, rows);
  const nn::LossResult l = loss_.forward(logits, targets, rows);
  have_forward_ = true;
  return ForwardResult{static_cast<float>(l.loss), l.counted, l.correct};
}

void Mlp::backward() {
  LC_CHECK(have_forward_, "Mlp::backward() without forward()");
  const float* d = head_->backward(loss_.backward());
  notify_grads_ready(offset_of(head_->weight_view()));
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    if (it->drop) d = it->drop->backward(d);
    d = std::visit([&](auto& act) { return act.backward(d); }, it->act);
    if (it->norm) d = it->norm->backward(d);
    d = it->fc.backward(d);
    notify_grads_ready(offset_of(it->fc.weight_view()));  // the block's first tensor
  }
}

double Mlp::flops_per_example() const {
  double weights = 0.0;
  int in = opts_.inputs;
  for (int h : opts_.hidden) {
    weights += static_cast<double>(in) * h;
    in = h;
  }
  weights += static_cast<double>(in) * opts_.classes;
  return 6.0 * weights;
}

std::string Mlp::describe() const {
  std::ostringstream os;
  os << "mlp " << opts_.inputs;
  for (int h : opts_.hidden) os << '-' << h;
  os << '-' << opts_.classes << ' ' << activation_name(opts_.activation);
  if (opts_.layernorm) os << " layernorm";
  if (opts_.dropout > 0.0f) os << " dropout " << opts_.dropout;
  os << " (" << params_.size() << " params)";
  return os.str();
}

}  // namespace laconic
