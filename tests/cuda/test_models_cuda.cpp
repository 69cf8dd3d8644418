// The models on the GPU through the same layer code as on the CPU (ops::kernels picks the device's
// kernels): an MLP and a small BERT built from the same seed, one moved to cuda, run forward and
// backward on the same batch. Loss, counted and correct must agree, every gradient tensor to
// float rounding (the GPU sums in other orders; dropout masks are identical bit for bit), and a
// few SGD steps (params -= lr * grads, with the device's axpy) must reach the same losses.
// Every test skips (never passes silently) without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/rng.h"
#include "workloads/models/bert.h"
#include "workloads/models/gpt.h"
#include "workloads/models/mlp.h"
#include "core/ops/dispatch.h"

namespace laconic {
namespace {

#define LC_REQUIRE_DEVICE() \
  if (!::laconic::cuda_available()) GTEST_SKIP() << "no CUDA device"

std::vector<float> to_host(std::span<const float> s, Device d) {
  std::vector<float> host(s.size());
  copy_bytes(host.data(), Device::cpu, s.data(), d, s.size() * sizeof(float));
  return host;
}

Batch mlp_batch(int size, int features, int classes, std::uint64_t seed) {
  Batch b;
  b.size = size;
  b.features = features;
  const std::uint64_t key = rng::key({seed, rng::kTest});
  for (int i = 0; i < size * features; ++i) b.inputs.push_back(rng::normal(key, i));
  for (int i = 0; i < size; ++i)  // every 7th example unlabelled (-1)
    b.targets.push_back(i % 7 == 3 ? -1
                                   : static_cast<std::int32_t>(rng::below(key, 1000000 + i, classes)));
  return b;
}

// `size` sequences of `seq` tokens; about 15% of the positions predicted, the rest -1.
Batch bert_batch(int size, int seq, int vocab, std::uint64_t seed) {
  Batch b;
  b.size = size;
  b.seq_len = seq;
  const std::uint64_t key = rng::key({seed, rng::kTest});
  for (int i = 0; i < size * seq; ++i) {
    b.tokens.push_back(static_cast<std::int32_t>(rng::below(key, 2 * i, vocab)));
    const bool predicted = rng::uniform(key, 3000000 + i) < 0.15f;
    b.targets.push_back(predicted ? static_cast<std::int32_t>(rng::below(key, 2 * i + 1, vocab)) : -1);
  }
  return b;
}

void expect_same_result(const std::string& what, const ForwardResult& gpu, const ForwardResult& cpu) {
  const double diff = std::abs(double(gpu.loss) - double(cpu.loss));
  std::cout << "[ parity   ] " << what << " loss gpu=" << gpu.loss << " cpu=" << cpu.loss
            << " diff=" << diff << " counted=" << gpu.counted << "/" << cpu.counted
            << " correct=" << gpu.correct << "/" << cpu.correct << "\n";
  EXPECT_LE(diff, 1e-5 * std::max(1.0, std::abs(double(cpu.loss)))) << what;
  EXPECT_EQ(gpu.counted, cpu.counted) << what;
  // Exact: an argmax could only flip on a near tie of two logits (within float rounding).
  EXPECT_EQ(gpu.correct, cpu.correct) << what;
}

// Every tensor of the two stores (same layout) agrees to `rtol` of the tensor's largest value,
// plus `atol` of the largest value of the whole buffer (tensors whose true gradient is 0, such as
// attention's K bias, hold only rounding noise of that size). Prints each tensor's max difference.
void expect_same_tensors(const std::string& what, const ParamStore& gpu_store,
                         std::span<const float> gpu_flat, const ParamStore& cpu_store,
                         std::span<const float> cpu_flat, double rtol, double atol) {
  const std::vector<float> got = to_host(gpu_flat, gpu_store.device());
  ASSERT_EQ(got.size(), cpu_flat.size());
  double global = 0.0;
  for (float v : cpu_flat) global = std::max(global, double(std::abs(v)));
  for (const ParamView& v : cpu_store.views()) {
    double max_abs = 0.0, max_ref = 0.0;
    for (std::size_t i = v.offset; i < v.offset + v.numel; ++i) {
      max_abs = std::max(max_abs, std::abs(double(got[i]) - double(cpu_flat[i])));
      max_ref = std::max(max_ref, double(std::abs(cpu_flat[i])));
    }
    std::cout << "[ parity   ] " << what << " " << v.name << " max_abs_diff=" << max_abs
              << " (max |ref|=" << max_ref << ")\n";
    EXPECT_LE(max_abs, rtol * max_ref + atol * global) << what << " " << v.name;
  }
}

// CPU and GPU copies of one model from the same seed: forward + backward on the same batch,
// compared; then `steps` SGD steps on each, the losses compared at every step.
void check_model(const std::string& what, Model& cpu, Model& gpu, const Batch& batch, int steps,
                 double grad_rtol) {
  cpu.init(11);
  gpu.init(11);
  gpu.to(Device::cuda);
  ASSERT_EQ(gpu.device(), Device::cuda);
  ASSERT_EQ(cpu.device(), Device::cpu);

  // Evaluation (no dropout) and training (dropout: identical masks on both devices).
  const ForwardOptions eval{false, 5, 0, 0};
  expect_same_result(what + " eval", gpu.forward(batch, eval), cpu.forward(batch, eval));
  const ForwardOptions train{true, 5, 1, 3};
  cpu.params().zero_grad();
  gpu.params().zero_grad();
  expect_same_result(what + " train", gpu.forward(batch, train), cpu.forward(batch, train));
  cpu.backward();
  gpu.backward();
  expect_same_tensors(what + " grad", gpu.params(), gpu.params().grads(), cpu.params(),
                      cpu.params().grads(), grad_rtol, 1e-5);

  const float lr = 0.05f;
  for (int s = 0; s < steps; ++s) {
    for (Model* m : {&cpu, &gpu}) {
      ParamStore& p = m->params();
      ops::kernels(p.device()).axpy(p.params().data(), -lr, p.grads().data(), p.size());
      p.zero_grad();
    }
    const ForwardOptions step{true, 5, 1, 4 + s};
    const ForwardResult rc = cpu.forward(batch, step);
    const ForwardResult rg = gpu.forward(batch, step);
    expect_same_result(what + " sgd step " + std::to_string(s + 1), rg, rc);
    cpu.backward();
    gpu.backward();
  }
  expect_same_tensors(what + " params after sgd", gpu.params(), gpu.params().params(),
                      cpu.params(), cpu.params().params(), 1e-4, 1e-6);
}

TEST(CudaModels, MlpGeluLayerNormDropoutMatchesCpu) {
  LC_REQUIRE_DEVICE();
  MlpOptions o;
  o.inputs = 37;
  o.hidden = {64, 33};
  o.classes = 10;
  o.activation = MlpActivation::gelu;
  o.layernorm = true;
  o.dropout = 0.2f;
  Mlp cpu(o), gpu(o);
  check_model("mlp gelu+ln+dropout", cpu, gpu, mlp_batch(65, o.inputs, o.classes, 1), 5, 1e-4);
}

TEST(CudaModels, MlpReluMatchesCpu) {
  LC_REQUIRE_DEVICE();
  MlpOptions o;
  o.inputs = 784;
  o.hidden = {512, 256};
  o.classes = 10;
  Mlp cpu(o), gpu(o);
  check_model("mlp 784-512-256-10 relu", cpu, gpu, mlp_batch(128, o.inputs, o.classes, 2), 5, 1e-4);
}

BertOptions small_bert() {
  BertOptions o;
  o.vocab = 500;
  o.seq_len = 32;
  o.dim = 64;
  o.layers = 2;
  o.heads = 4;
  o.ffn = 256;
  o.dropout = 0.1f;
  return o;
}

TEST(CudaModels, BertMatchesCpu) {
  LC_REQUIRE_DEVICE();
  const BertOptions o = small_bert();
  Bert cpu(o), gpu(o);
  // The tied token embedding sums through atomics on the GPU: in another order, still rounding.
  check_model("bert", cpu, gpu, bert_batch(6, o.seq_len, o.vocab, 3), 4, 1e-3);
}

// Next-token batches: every target scored but every ninth (-1).
Batch gpt_batch(int size, int seq, int vocab, std::uint64_t seed) {
  Batch b = bert_batch(size, seq, vocab, seed);
  const std::uint64_t key = rng::key({seed, rng::kTest, 1});
  for (int i = 0; i < size * seq; ++i)
    b.targets[i] = i % 9 == 4 ? -1 : static_cast<std::int32_t>(rng::below(key, i, vocab));
  return b;
}

// A small GPT: 2 blocks of 64 wide, 4 heads, 32 tokens of context.
GptOptions small_gpt() {
  GptOptions o;
  o.vocab = 500;
  o.seq_len = 32;
  o.dim = 64;
  o.layers = 2;
  o.heads = 4;
  o.ffn = 256;
  return o;
}

TEST(CudaModels, GptMatchesCpu) {
  LC_REQUIRE_DEVICE();
  GptOptions o = small_gpt();
  o.dropout = 0.1f;
  Gpt cpu(o), gpu(o);
  check_model("gpt", cpu, gpu, gpt_batch(6, o.seq_len, o.vocab, 3), 4, 1e-3);
}

// train.precision = "bf16" on the device: the same rounding kernel (bit for bit, test_ops_cuda)
// before cuBLAS's fp32 GEMM, so the GPT matches the CPU's bf16 GPT as the fp32 one does; a looser
// bound, as an fp32 difference that moves an operand across a bf16 rounding boundary moves it
// by 2^-9 relative.
TEST(CudaModels, GptBf16MatchesCpu) {
  LC_REQUIRE_DEVICE();
  GptOptions o = small_gpt();
  o.precision = nn::Precision::bf16;
  Gpt cpu(o), gpu(o);
  check_model("gpt bf16", cpu, gpu, gpt_batch(6, o.seq_len, o.vocab, 3), 4, 1e-2);
}

TEST(CudaModels, BertShorterSequencesAndSmallerBatchAfterLarger) {
  LC_REQUIRE_DEVICE();
  const BertOptions o = small_bert();
  Bert cpu(o), gpu(o);
  cpu.init(4);
  gpu.init(4);
  gpu.to(Device::cuda);
  const ForwardOptions train{true, 2, 0, 1};
  // Large batch first (sizes every buffer), then smaller and shorter ones reuse them.
  for (const auto& [size, seq] : {std::pair{8, 32}, std::pair{3, 20}, std::pair{1, 7}}) {
    const Batch batch = bert_batch(size, seq, o.vocab, 10 + size);
    cpu.params().zero_grad();
    gpu.params().zero_grad();
    const std::string what = "bert B=" + std::to_string(size) + " T=" + std::to_string(seq);
    expect_same_result(what, gpu.forward(batch, train), cpu.forward(batch, train));
    cpu.backward();
    gpu.backward();
    expect_same_tensors(what + " grad", gpu.params(), gpu.params().grads(), cpu.params(),
                        cpu.params().grads(), 1e-3, 1e-5);
  }
}

TEST(CudaModels, MovingBackToTheHostKeepsParametersAndResults) {
  LC_REQUIRE_DEVICE();
  const BertOptions o = small_bert();
  Bert a(o), b(o);
  a.init(9);
  b.init(9);
  const Batch batch = bert_batch(2, o.seq_len, o.vocab, 5);
  const ForwardResult before = a.forward(batch, {true, 1, 0, 0});  // host buffers exist
  b.to(Device::cuda);
  b.forward(batch, {true, 1, 0, 0});  // device buffers exist
  b.to(Device::cpu);
  EXPECT_EQ(b.device(), Device::cpu);
  const std::vector<float> pa(a.params().params().begin(), a.params().params().end());
  const std::vector<float> pb(b.params().params().begin(), b.params().params().end());
  EXPECT_EQ(pa, pb);  // copies, no arithmetic: bitwise
  const ForwardResult after = b.forward(batch, {true, 1, 0, 0});  // host kernels again
  EXPECT_EQ(after.loss, before.loss);
  EXPECT_EQ(after.correct, before.correct);
}

TEST(CudaModels, BadIdsAreRejectedOnTheHostBeforeUpload) {
  LC_REQUIRE_DEVICE();
  const BertOptions o = small_bert();
  Bert bert(o);
  bert.init(1);
  bert.to(Device::cuda);
  Batch batch = bert_batch(2, 8, o.vocab, 6);
  batch.tokens[5] = o.vocab;
  EXPECT_THROW(bert.forward(batch, {true, 0, 0, 0}), Error);
  batch = bert_batch(2, 8, o.vocab, 6);
  batch.targets[3] = o.vocab;
  EXPECT_THROW(bert.forward(batch, {true, 0, 0, 0}), Error);

  MlpOptions mo;
  mo.inputs = 4;
  mo.hidden = {8};
  mo.classes = 3;
  Mlp mlp(mo);
  mlp.init(1);
  mlp.to(Device::cuda);
  Batch mb = mlp_batch(5, 4, 3, 7);
  mb.targets[2] = 3;
  EXPECT_THROW(mlp.forward(mb, {true, 0, 0, 0}), Error);
}

}  // namespace
}  // namespace laconic
