// Every layer's input and parameter gradients against central differences (tests/nn/gradcheck.h),
// plus the properties each layer promises (init, ownership, masks, ignored rows).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/ops/ops.h"
#include "core/rng.h"
#include "workloads/nn/activation.h"
#include "workloads/nn/dropout.h"
#include "workloads/nn/embedding.h"
#include "workloads/nn/init.h"
#include "workloads/nn/layernorm.h"
#include "workloads/nn/linear.h"
#include "workloads/nn/softmax_xent.h"
#include "tests/nn/gradcheck.h"

namespace laconic::nn {
namespace {

using laconic::testing::check_layer_gradients;
using laconic::testing::GradCheckOptions;
using laconic::testing::GradTensor;
using laconic::testing::random_normal;
using laconic::testing::randomize_params;

constexpr int kRows = 5;

TEST(LinearGrad, InputWeightBias) {
  ParamStore store;
  Linear fc(store, "fc", {7, 4});
  store.finalize();
  fc.init(3);
  auto x = random_normal(kRows * 7, 11);
  check_layer_gradients(
      store, x, kRows * 4, [&](const float* in) { return fc.forward(in, kRows); },
      [&](const float* dy) { return fc.backward(dy); });
}

TEST(LinearGrad, WithoutBiasAndWithoutInputGradient) {
  ParamStore store;
  Linear fc(store, "fc", {3, 6, /*bias=*/false, /*input_grad=*/false});
  store.finalize();
  fc.init(3);
  ASSERT_EQ(store.views().size(), 1u);
  auto x = random_normal(kRows * 3, 12);
  std::vector<float> no_input;  // the input gradient is not computed
  check_layer_gradients(
      store, no_input, kRows * 6, [&](const float*) { return fc.forward(x.data(), kRows); },
      [&](const float* dy) {
        EXPECT_EQ(fc.backward(dy), nullptr);
        return nullptr;
      });
}

TEST(Linear, PyTorchLayoutAndInit) {
  ParamStore store;
  Linear fc(store, "fc", {2, 3});
  store.finalize();
  EXPECT_EQ(store.view(fc.weight_view()).name, "fc.weight");
  EXPECT_EQ(store.view(fc.weight_view()).shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(store.view(fc.weight_view()).group, ParamGroup::decay);
  EXPECT_EQ(store.view(fc.bias_view()).group, ParamGroup::no_decay);
  // W = [[1,2],[3,4],[5,6]], b = [10,20,30]: y = x W^T + b.
  const float w[] = {1, 2, 3, 4, 5, 6}, b[] = {10, 20, 30};
  std::copy(w, w + 6, store.param(fc.weight_view()));
  std::copy(b, b + 3, store.param(fc.bias_view()));
  const float x[] = {1, -1};
  const float* y = fc.forward(x, 1);
  EXPECT_EQ(std::vector<float>(y, y + 3), (std::vector<float>{9, 19, 29}));

  // init: U(-1/sqrt(in), 1/sqrt(in)), deterministic per seed, different across seeds.
  ParamStore big;
  Linear wide(big, "wide", {400, 50});
  big.finalize();
  wide.init(5);
  const std::vector<float> first(big.params().begin(), big.params().end());
  const float bound = 1.0f / 20.0f;
  double sum_sq = 0.0;
  for (float v : first) {
    ASSERT_LE(std::abs(v), bound);
    sum_sq += double(v) * v;
  }
  // Variance of U(-a, a) is a^2 / 3.
  EXPECT_NEAR(sum_sq / first.size(), bound * bound / 3.0, 0.05 * bound * bound / 3.0);
  wide.init(5);
  EXPECT_EQ(first, std::vector<float>(big.params().begin(), big.params().end()));
  wide.init(6);
  EXPECT_NE(first, std::vector<float>(big.params().begin(), big.params().end()));
}

TEST(Linear, BackwardAccumulatesParameterGradients) {
  ParamStore store;
  Linear fc(store, "fc", {4, 3});
  store.finalize();
  fc.init(1);
  const auto x = random_normal(kRows * 4, 2);
  const auto dy = random_normal(kRows * 3, 3);
  fc.forward(x.data(), kRows);
  fc.backward(dy.data());
  const std::vector<float> once(store.grads().begin(), store.grads().end());
  fc.backward(dy.data());
  for (std::size_t i = 0; i < once.size(); ++i) EXPECT_NEAR(store.grads()[i], 2 * once[i], 1e-6f * (1 + std::abs(once[i])));
}

// A bf16 Linear is the fp32 Linear on bf16-rounded x, W and dy (workloads/nn/precision.h): its
// output, weight gradient and input gradient bit for bit; its bias gradient sums dy unrounded, and
// its weight (the fp32 master) is left as it was.
TEST(Linear, Bf16IsTheFp32LayerOnRoundedOperands) {
  ParamStore s16, s32;
  Linear fc16(s16, "fc", linear(24, 10, Precision::bf16));
  Linear fc32(s32, "fc", {24, 10});
  s16.finalize();
  s32.finalize();
  fc16.init(3);
  const std::vector<float> master(s16.params().begin(), s16.params().end());
  std::copy(master.begin(), master.end(), s32.params().begin());
  ops::cpu::round_bf16(s32.param(fc32.weight_view()), s32.param(fc32.weight_view()), 24 * 10);
  const auto x = random_normal(kRows * 24, 4), dy = random_normal(kRows * 10, 5);
  std::vector<float> xr(x.size()), dyr(dy.size());
  ops::cpu::round_bf16(xr.data(), x.data(), x.size());
  ops::cpu::round_bf16(dyr.data(), dy.data(), dy.size());
  ASSERT_NE(xr, x);  // the rounding is not a no-op on these inputs

  const float* y16 = fc16.forward(x.data(), kRows);
  const float* y32 = fc32.forward(xr.data(), kRows);
  EXPECT_EQ(std::vector<float>(y16, y16 + kRows * 10), std::vector<float>(y32, y32 + kRows * 10));
  const float* dx16 = fc16.backward(dy.data());
  const float* dx32 = fc32.backward(dyr.data());
  EXPECT_EQ(std::vector<float>(dx16, dx16 + kRows * 24), std::vector<float>(dx32, dx32 + kRows * 24));
  const float* dw16 = s16.grad(fc16.weight_view());
  const float* dw32 = s32.grad(fc32.weight_view());
  EXPECT_EQ(std::vector<float>(dw16, dw16 + 240), std::vector<float>(dw32, dw32 + 240));
  std::vector<float> db(10, 0.0f);
  ops::cpu::bias_grad(db.data(), dy.data(), kRows, 10);
  const float* db16 = s16.grad(fc16.bias_view());
  EXPECT_EQ(std::vector<float>(db16, db16 + 10), db);
  EXPECT_EQ(std::vector<float>(s16.params().begin(), s16.params().end()), master);
}

TEST(ReluGrad, Input) {
  ParamStore none;
  none.finalize();
  Relu relu(none, 6);
  auto x = random_normal(kRows * 6, 21);
  for (float& v : x) v += v >= 0 ? 0.1f : -0.1f;  // keep away from the kink at 0 (eps = 1e-2)
  check_layer_gradients(
      none, x, kRows * 6, [&](const float* in) { return relu.forward(in, kRows); },
      [&](const float* dy) { return relu.backward(dy); });
}

TEST(GeluGrad, Input) {
  ParamStore none;
  none.finalize();
  Gelu gelu(none, 6);
  auto x = random_normal(kRows * 6, 22, 2.0f);
  check_layer_gradients(
      none, x, kRows * 6, [&](const float* in) { return gelu.forward(in, kRows); },
      [&](const float* dy) { return gelu.backward(dy); });
}

TEST(LayerNormGrad, InputGammaBeta) {
  ParamStore store;
  LayerNorm ln(store, "ln", {9});
  store.finalize();
  randomize_params(store, 31);
  for (std::size_t i = 0; i < 9; ++i) store.param(ln.gamma_view())[i] += 1.0f;
  auto x = random_normal(kRows * 9, 32, 2.0f);
  check_layer_gradients(
      store, x, kRows * 9, [&](const float* in) { return ln.forward(in, kRows); },
      [&](const float* dy) { return ln.backward(dy); });
}

TEST(LayerNorm, InitAndGroups) {
  ParamStore store;
  LayerNorm ln(store, "ln", {4});
  store.finalize();
  randomize_params(store, 1);
  ln.init();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(store.param(ln.gamma_view())[i], 1.0f);
    EXPECT_EQ(store.param(ln.beta_view())[i], 0.0f);
  }
  EXPECT_EQ(store.view(ln.gamma_view()).group, ParamGroup::no_decay);
  EXPECT_EQ(store.view(ln.beta_view()).group, ParamGroup::no_decay);
}

TEST(EmbeddingGrad, Table) {
  ParamStore store;
  Embedding emb(store, "emb", {6, 3});
  store.finalize();
  emb.init(4);
  const std::vector<std::int32_t> ids = {5, 0, 5, 2, 1};  // repeated and unused rows
  std::vector<float> no_input;
  check_layer_gradients(
      store, no_input, ids.size() * 3,
      [&](const float*) { return emb.forward(ids.data(), static_cast<int>(ids.size())); },
      [&](const float* dy) {
        emb.backward(dy);
        return nullptr;
      });
  // Row 3 and 4 are never looked up: zero gradient.
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(store.grad(emb.table_view())[3 * 3 + c], 0.0f);
    EXPECT_EQ(store.grad(emb.table_view())[4 * 3 + c], 0.0f);
  }
}

TEST(Embedding, InitStdAndRangeCheck) {
  ParamStore store;
  Embedding emb(store, "emb", {1000, 20});
  store.finalize();
  emb.init(9);
  double sum = 0.0, sum_sq = 0.0;
  for (float v : store.params()) {
    sum += v;
    sum_sq += double(v) * v;
  }
  const double n = static_cast<double>(store.size());
  EXPECT_NEAR(sum / n, 0.0, 0.02 * 5 / std::sqrt(n));
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.02 * 0.02);
  const std::int32_t bad[] = {1000};
  EXPECT_THROW(emb.forward(bad, 1), Error);
}

TEST(DropoutGrad, InputWithFixedMask) {
  ParamStore none;
  none.finalize();
  Dropout drop(none, {8, 0.4f, 3});
  const ForwardOptions step{true, 17, 2, 5};
  auto x = random_normal(kRows * 8, 41);
  check_layer_gradients(
      none, x, kRows * 8, [&](const float* in) { return drop.forward(in, kRows, step); },
      [&](const float* dy) { return drop.backward(dy); });
}

TEST(Dropout, BackwardMatchesMaskAndKeyIsPerLayerRankStep) {
  const int features = 50, rows = 40;
  const float p = 0.25f;
  ParamStore host;  // the device the layer runs on (a parameter-free layer has no tensors)
  host.finalize();
  Dropout drop(host, {features, p, 3});
  const ForwardOptions step{true, 17, 2, 5};
  EXPECT_EQ(drop.key(step), rng::key({17, 2, 5, rng::kDropout, 3}));
  const std::vector<float> x(rows * features, 1.0f), dy(rows * features, 3.0f);
  const float* y = drop.forward(x.data(), rows, step);
  const std::vector<float> yv(y, y + x.size());
  const float* dx = drop.backward(dy.data());
  int dropped = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool keep = rng::uniform(drop.key(step), i) >= p;
    ASSERT_EQ(yv[i], keep ? 1.0f / (1.0f - p) : 0.0f) << i;
    ASSERT_EQ(dx[i], keep ? 3.0f / (1.0f - p) : 0.0f) << i;
    dropped += !keep;
  }
  EXPECT_GT(dropped, 0);
  // Other steps, ranks and layers draw other masks.
  Dropout other(host, {features, p, 4});
  EXPECT_NE(other.key(step), drop.key(step));
  EXPECT_NE(drop.key({true, 17, 3, 5}), drop.key(step));
  EXPECT_NE(drop.key({true, 17, 2, 6}), drop.key(step));
  // Evaluation: identity, no copy.
  EXPECT_EQ(drop.forward(x.data(), rows, {false, 17, 2, 5}), x.data());
  EXPECT_EQ(drop.backward(dy.data()), dy.data());
}

TEST(SoftmaxCrossEntropyGrad, LogitsWithIgnoredRows) {
  const int classes = 4;
  ParamStore host;
  host.finalize();
  SoftmaxCrossEntropy loss(host, {classes, -1});
  const std::vector<std::int32_t> targets = {0, -1, 3, 2, -1};
  auto logits = random_normal(targets.size() * classes, 51, 2.0f);
  const int rows = static_cast<int>(targets.size());
  const LossResult r = loss.forward(logits.data(), targets.data(), rows);
  EXPECT_EQ(r.counted, 3);
  const float* d = loss.backward();
  std::vector<GradTensor> tensors{{"logits", logits.data(), std::vector<float>(d, d + logits.size())}};
  for (int c = 0; c < classes; ++c) {  // ignored rows: zero gradient
    EXPECT_EQ(tensors[0].analytic[1 * classes + c], 0.0f);
    EXPECT_EQ(tensors[0].analytic[4 * classes + c], 0.0f);
  }
  laconic::testing::expect_gradients_match(
      [&] { return loss.forward(logits.data(), targets.data(), rows).loss; }, tensors,
      GradCheckOptions{});
}

TEST(SoftmaxCrossEntropy, MeanLossCountedAndCorrect) {
  // Row 0: logits favour class 1, target 1 (correct). Row 1: favour 0, target 2 (wrong).
  // Row 2: ignored. Uniform row 3 over 3 classes: loss log 3, argmax 0 (first max), target 0.
  const std::vector<float> logits = {0, 5, 0, /**/ 4, 0, 1, /**/ 9, 9, 9, /**/ 1, 1, 1};
  const std::vector<std::int32_t> targets = {1, 2, 7, 0};
  ParamStore host;
  host.finalize();
  SoftmaxCrossEntropy loss(host, {3, 7});
  const LossResult r = loss.forward(logits.data(), targets.data(), 4);
  EXPECT_EQ(r.counted, 3);
  EXPECT_EQ(r.correct, 2);
  auto nll = [](double zt, double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c)) - zt;
  };
  const double want = (nll(5, 0, 5, 0) + nll(1, 4, 0, 1) + std::log(3.0)) / 3.0;
  EXPECT_NEAR(r.loss, want, 1e-6);
  // All ignored: loss 0, counted 0, zero gradient (no division by zero).
  const std::vector<std::int32_t> none = {7, 7, 7, 7};
  const LossResult z = loss.forward(logits.data(), none.data(), 4);
  EXPECT_EQ(z.counted, 0);
  EXPECT_EQ(z.loss, 0.0);
  const float* d = loss.backward();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(d[i], 0.0f);
  // Out-of-range targets are rejected.
  const std::vector<std::int32_t> bad = {3, 0, 0, 0};
  EXPECT_THROW(loss.forward(logits.data(), bad.data(), 4), Error);
}

TEST(Buffers, ReusedAcrossSteps) {
  ParamStore store;
  Linear fc(store, "fc", {3, 2});
  store.finalize();
  const auto x = random_normal(8 * 3, 1);
  const float* big = fc.forward(x.data(), 8);
  EXPECT_EQ(fc.forward(x.data(), 4), big);  // a smaller batch reuses the buffer
  EXPECT_EQ(fc.forward(x.data(), 8), big);
}

TEST(Init, KeyedByNameNotOrder) {
  ParamStore a, b;
  Linear a1(a, "first", {3, 3});
  Linear a2(a, "second", {3, 3});
  Linear b2(b, "second", {3, 3});  // declared in a different order and store
  a.finalize();
  b.finalize();
  a1.init(8);
  a2.init(8);
  b2.init(8);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(a.param(a2.weight_view())[i], b.param(b2.weight_view())[i]);
  EXPECT_NE(a.param(a1.weight_view())[0], a.param(a2.weight_view())[0]);
  EXPECT_EQ(name_hash(""), 0xcbf29ce484222325ULL);  // FNV-1a offset basis
  EXPECT_EQ(name_hash("a"), 0xaf63dc4c8601ec8cULL);  // published FNV-1a 64 test vector
}

}  // namespace
}  // namespace laconic::nn
