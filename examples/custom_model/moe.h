// A mixture-of-experts MLP for image classification (Jacobs et al. 1991, soft gating): E expert
// MLPs, each x -> ReLU(W1 x + b1) -> W2 h + b2 (class logits), mixed per example by a softmax gate:
//
//   g = softmax(Wg x + bg)               [B, E]
//   logits = sum_e g_e * expert_e(x)     [B, classes]
//   loss = softmax cross-entropy(logits, labels)
//
// Built from Laconic's layers (nn::Linear, nn::Relu, nn::SoftmaxCrossEntropy) over one flat
// ParamStore, as Laconic's own models are; the gate and the mixing run on the host (CPU only).
#pragma once

#include <laconic/laconic.h>

#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

struct MoeOptions {
  int experts = 4;
  int hidden = 64;  // each expert's hidden width
  bool operator==(const MoeOptions&) const = default;
};

class MoeMlp final : public laconic::Model {
 public:
  MoeMlp(const MoeOptions& o, int inputs, int classes)
      : o_(o), inputs_(inputs), classes_(classes),
        gate_(params_, "gate", {inputs, o.experts, true, /*input_grad=*/false}),
        loss_(params_, {classes, -1}) {
    for (int e = 0; e < o.experts; ++e) {
      const std::string name = "expert" + std::to_string(e);
      experts_.push_back({laconic::nn::Linear(params_, name + ".fc1", {inputs, o.hidden, true, false}),
                          laconic::nn::Relu(params_, o.hidden),
                          laconic::nn::Linear(params_, name + ".fc2", {o.hidden, classes})});
    }
    params_.finalize();
  }
  MoeMlp(const MoeMlp&) = delete;  // the layers point at params_

  laconic::ParamStore& params() override { return params_; }
  void init(std::uint64_t seed) override {
    gate_.init(seed);
    for (Expert& e : experts_) {
      e.fc1.init(seed);
      e.fc2.init(seed);
    }
  }

  laconic::ForwardResult forward(const laconic::Batch& b, const laconic::ForwardOptions&) override {
    LC_CHECK(b.features == inputs_, "moe: batch of ", b.features, " features, the model takes ", inputs_);
    rows_ = b.size;
    const int E = o_.experts, C = classes_;
    gate_probs_.resize(static_cast<std::size_t>(rows_) * E);
    logits_.assign(static_cast<std::size_t>(rows_) * C, 0.0f);
    outs_.resize(E);
    const float* z = gate_.forward(b.inputs.data(), rows_);
    for (int r = 0; r < rows_; ++r) {  // g = softmax(z), row by row
      float max = z[r * E];
      for (int e = 1; e < E; ++e) max = std::max(max, z[r * E + e]);
      float sum = 0;
      for (int e = 0; e < E; ++e) sum += gate_probs_[r * E + e] = std::exp(z[r * E + e] - max);
      for (int e = 0; e < E; ++e) gate_probs_[r * E + e] /= sum;
    }
    for (int e = 0; e < E; ++e) {
      Expert& x = experts_[e];
      outs_[e] = x.fc2.forward(x.relu.forward(x.fc1.forward(b.inputs.data(), rows_), rows_), rows_);
      for (int r = 0; r < rows_; ++r)
        for (int c = 0; c < C; ++c) logits_[r * C + c] += gate_probs_[r * E + e] * outs_[e][r * C + c];
    }
    const laconic::nn::LossResult l = loss_.forward(logits_.data(), b.targets.data(), rows_);
    return {static_cast<float>(l.loss), l.counted, l.correct};
  }

  void backward() override {
    const int E = o_.experts, C = classes_;
    const float* dl = loss_.backward();  // [B, C]
    dz_.resize(static_cast<std::size_t>(rows_) * E);
    dout_.resize(static_cast<std::size_t>(rows_) * C);
    for (int r = 0; r < rows_; ++r) {  // dz = g * (dg - <g, dg>), dg_e = <dlogits, out_e>
      double mean = 0;
      for (int e = 0; e < E; ++e) {
        double dg = 0;
        for (int c = 0; c < C; ++c) dg += dl[r * C + c] * outs_[e][r * C + c];
        dz_[r * E + e] = static_cast<float>(dg);
        mean += gate_probs_[r * E + e] * dg;
      }
      for (int e = 0; e < E; ++e) dz_[r * E + e] = gate_probs_[r * E + e] * (dz_[r * E + e] - static_cast<float>(mean));
    }
    for (int e = 0; e < E; ++e) {  // d out_e = g_e * dlogits
      for (int r = 0; r < rows_; ++r)
        for (int c = 0; c < C; ++c) dout_[r * C + c] = gate_probs_[r * E + e] * dl[r * C + c];
      Expert& x = experts_[e];
      x.fc1.backward(x.relu.backward(x.fc2.backward(dout_.data())));
    }
    gate_.backward(dz_.data());
    notify_grads_ready(0);  // every gradient is final
  }

  double flops_per_example() const override {
    return 6.0 * (static_cast<double>(inputs_) * o_.experts +
                  o_.experts * (static_cast<double>(inputs_) * o_.hidden + static_cast<double>(o_.hidden) * classes_));
  }
  std::string describe() const override {
    return "moe " + std::to_string(o_.experts) + " experts x " + std::to_string(inputs_) + "-" + std::to_string(o_.hidden) +
           "-" + std::to_string(classes_) + " (" + laconic::param_count_text(params_.size()) + " params)";
  }

 private:
  struct Expert {
    laconic::nn::Linear fc1;
    laconic::nn::Relu relu;
    laconic::nn::Linear fc2;
  };
  MoeOptions o_;
  int inputs_, classes_;
  laconic::ParamStore params_;  // before the layers, which register in it
  laconic::nn::Linear gate_;
  std::deque<Expert> experts_;  // layers stay where they were built
  laconic::nn::SoftmaxCrossEntropy loss_;
  int rows_ = 0;
  std::vector<float> gate_probs_, logits_, dz_, dout_;
  std::vector<const float*> outs_;
};
