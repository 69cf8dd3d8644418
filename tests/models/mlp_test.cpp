// The MLP end to end: gradients of the mean loss against central differences, deterministic
// initialisation, learning on a separable toy problem, gradient accumulation, FLOPs and naming.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "workloads/models/mlp.h"
#include "tests/models/model_checks.h"
#include "tests/nn/gradcheck.h"

namespace laconic {
namespace {

using laconic::testing::GradCheckOptions;
using laconic::testing::GradTensor;

// rows examples of `features` normal inputs; targets cycle over classes, with row 2 ignored (-1).
Batch random_batch(int rows, int features, int classes, std::uint64_t seed) {
  Batch b;
  b.size = rows;
  b.features = features;
  b.inputs = laconic::testing::random_normal(static_cast<std::size_t>(rows) * features, seed);
  for (int r = 0; r < rows; ++r) b.targets.push_back(r == 2 ? -1 : r % classes);
  return b;
}


void check_mlp_gradients(const MlpOptions& o, const GradCheckOptions& g) {
  Mlp model(o);
  model.init(7);
  const Batch batch = random_batch(6, o.inputs, o.classes, 3);
  const ForwardOptions fwd{/*train=*/true, /*seed=*/11, /*rank=*/1, /*step=*/4};  // fixed dropout mask
  ParamStore& store = model.params();
  store.zero_grad();
  const ForwardResult r = model.forward(batch, fwd);
  EXPECT_EQ(r.counted, 5);
  model.backward();
  std::vector<GradTensor> tensors;
  for (std::size_t v = 0; v < store.views().size(); ++v) {
    const float* grad = store.grad(v);
    tensors.push_back({store.view(v).name, store.param(v),
                       std::vector<float>(grad, grad + store.view(v).numel)});
  }
  laconic::testing::expect_gradients_match([&] { return double(model.forward(batch, fwd).loss); },
                                           tensors, g);
}

TEST(MlpGrad, GeluLayerNormDropout) {
  MlpOptions o{6, {5, 4}, 3, MlpActivation::gelu, 0.2f, true};
  check_mlp_gradients(o, GradCheckOptions{3e-3f, 1e-2, 1e-4, 64, 1});
}

TEST(MlpGrad, ReluPlain) {
  // Small eps so that no pre-activation crosses the ReLU kink under perturbation.
  MlpOptions o{5, {7}, 4, MlpActivation::relu, 0.0f, false};
  check_mlp_gradients(o, GradCheckOptions{1e-3f, 1e-2, 3e-4, 64, 2});
}

TEST(MlpGrad, NoHiddenLayerIsSoftmaxRegression) {
  MlpOptions o{4, {}, 3, MlpActivation::relu, 0.0f, false};
  check_mlp_gradients(o, GradCheckOptions{1e-2f, 1e-2, 1e-4, 64, 3});
}

TEST(Mlp, InitIsDeterministicPerSeed) {
  const MlpOptions o{12, {8, 6}, 5, MlpActivation::gelu, 0.1f, true};
  Mlp a(o), b(o);
  testing::expect_deterministic_init_and_forward(a, b, random_batch(9, 12, 5, 1));
}

TEST(Mlp, BackwardAccumulates) {
  Mlp model({10, {7}, 4, MlpActivation::gelu, 0.3f, true});
  model.init(1);
  testing::expect_backward_accumulates(model, random_batch(8, 10, 4, 2));
}

TEST(Mlp, SgdLearnsSeparableProblem) {
  // Three classes, each a Gaussian blob (sd 0.3) around its own corner of a 4-d cube.
  const int classes = 3, features = 4, rows = 48;
  Batch batch;
  batch.size = rows;
  batch.features = features;
  const auto noise = laconic::testing::random_normal(rows * features, 9, 0.3f);
  for (int r = 0; r < rows; ++r) {
    const int c = r % classes;
    batch.targets.push_back(c);
    for (int f = 0; f < features; ++f)
      batch.inputs.push_back((f == c ? 2.0f : 0.0f) - 0.5f + noise[r * features + f]);
  }
  Mlp model({features, {16}, classes, MlpActivation::relu, 0.0f, false});
  model.init(3);
  const ForwardOptions fwd{true, 0, 0, 0};
  const ForwardResult first = model.forward(batch, fwd);
  ForwardResult last = first;
  for (int step = 0; step < 60; ++step) {
    model.params().zero_grad();
    last = model.forward(batch, fwd);
    model.backward();
    auto p = model.params().params();
    auto g = model.params().grads();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
  }
  last = model.forward(batch, fwd);
  EXPECT_NEAR(first.loss, std::log(3.0f), 0.5f);  // near-uniform predictions at init
  EXPECT_LT(last.loss, 0.2f * first.loss);
  EXPECT_EQ(last.counted, rows);
  EXPECT_GE(last.correct, rows - 1);
}

TEST(Mlp, DescribeFlopsAndParamGroups) {
  Mlp model(MlpOptions{784, {512, 256}, 10, MlpActivation::relu, 0.0f, false});
  EXPECT_EQ(model.describe(), "mlp 784-512-256-10 relu (535818 params)");
  EXPECT_EQ(model.params().size(), 535818u);
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 6.0 * (784 * 512 + 512 * 256 + 256 * 10));
  Mlp ln(MlpOptions{8, {4}, 2, MlpActivation::gelu, 0.0f, true});
  int no_decay = 0;
  for (const auto& v : ln.params().views()) {
    const bool weight = v.name.ends_with(".weight") && v.name.starts_with("fc");
    EXPECT_EQ(v.group, weight ? ParamGroup::decay : ParamGroup::no_decay) << v.name;
    no_decay += v.group == ParamGroup::no_decay;
  }
  EXPECT_EQ(no_decay, 4);  // fc1.bias, ln1.weight, ln1.bias, fc2.bias
  EXPECT_EQ(ln.describe(), "mlp 8-4-2 gelu layernorm (" + std::to_string(ln.params().size()) + " params)");
}

TEST(Mlp, RejectsMismatchedBatch) {
  Mlp model({4, {3}, 2, MlpActivation::relu, 0.0f, false});
  model.init(0);
  Batch b = random_batch(3, 5, 2, 0);  // 5 features, model wants 4
  EXPECT_THROW(model.forward(b, {}), Error);
  EXPECT_THROW(model.backward(), Error);  // no forward yet
  EXPECT_THROW(Mlp({4, {0}, 2, MlpActivation::relu, 0.0f, false}), Error);
}

}  // namespace
}  // namespace laconic
