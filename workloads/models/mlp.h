// Multi-layer perceptron classifier (the Fashion-MNIST model):
//   for each hidden width h: Linear -> [LayerNorm] -> ReLU|GELU -> [Dropout]; then Linear -> classes;
//   softmax cross-entropy on the logits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/nn/activation.h"
#include "core/enum_names.h"
#include "workloads/nn/dropout.h"
#include "workloads/nn/layernorm.h"
#include "workloads/nn/linear.h"
#include "workloads/nn/softmax_xent.h"

namespace laconic {

enum class MlpActivation { relu, gelu };
inline constexpr std::array kMlpActivationNames{"relu", "gelu"};
constexpr std::span<const char* const> names(MlpActivation) { return kMlpActivationNames; }
inline const char* name_of(MlpActivation v) { return enum_name(v); }

struct MlpOptions {
  int inputs = 784;
  std::vector<int> hidden = {512, 256};
  int classes = 10;
  MlpActivation activation = MlpActivation::relu;
  float dropout = 0.0f;  // after each hidden activation; 0 = none
  bool layernorm = false;
  nn::Precision precision = nn::Precision::fp32;  // of the GEMMs (workloads/nn/precision.h)
};

class Mlp : public Model {
 public:
  explicit Mlp(const MlpOptions& opts);
  // Layers hold a pointer to params_: the model stays where it was built.
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  ParamStore& params() override { return params_; }
  void init(std::uint64_t seed) override;
  // batch.features must equal inputs; targets in [0, classes) or -1 (ignored).
  ForwardResult forward(const Batch& batch, const ForwardOptions& opts) override;
  void backward() override;
  // 6 FLOPs per weight per example: 2 (one multiply-add) forward, 4 backward (dX and dW).
  double flops_per_example() const override;
  std::string describe() const override;  // e.g. "mlp 784-512-256-10 relu (535818 params)"
  ExportLayout export_layout() override { return native_layout(params_, "mlp"); }

  const MlpOptions& options() const { return opts_; }

 private:
  struct Block {
    nn::Linear fc;
    std::optional<nn::LayerNorm> norm;
    std::variant<nn::Relu, nn::Gelu> act;
    std::optional<nn::Dropout> drop;
  };

  MlpOptions opts_;
  ParamStore params_;  // declared before the layers, which register in it on construction
  std::vector<Block> blocks_;
  std::unique_ptr<nn::Linear> head_;
  nn::SoftmaxCrossEntropy loss_;
  bool have_forward_ = false;
  // The batch on the model's device (on cpu the batch's own vectors are used, without a copy).
  DeviceArray<float> inputs_;
  DeviceArray<std::int32_t> targets_;
};

}  // namespace laconic
