// The GPT end to end: gradients of the next-token loss against central differences (all
// parameters, the tied embedding included, with dropout and ignored positions), causality (a
// token changes no logit before it), GPT-2's initialisation, the loss at initialisation,
// memorisation under SGD, gradient accumulation, FLOPs, naming, parameter groups and input
// validation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "workloads/models/gpt.h"
#include "tests/models/model_checks.h"
#include "tests/nn/gradcheck.h"

namespace laconic {
namespace {

using laconic::testing::GradCheckOptions;
using laconic::testing::GradTensor;

GptOptions tiny(int layers, float dropout) {
  GptOptions o;
  o.vocab = 11;
  o.seq_len = 5;
  o.dim = 8;
  o.layers = layers;
  o.heads = 2;
  o.ffn = 16;
  o.dropout = dropout;
  return o;
}

// `size` sequences of `seq` random tokens in [0, vocab - 1) (the last id never occurs as input);
// every fourth target is ignored (-1), the others are random ids in [0, vocab).
Batch random_batch(int size, int seq, int vocab, std::uint64_t seed) {
  Batch b;
  b.size = size;
  b.seq_len = seq;
  const std::uint64_t key = rng::key({seed, rng::kTest});
  for (int i = 0; i < size * seq; ++i) {
    b.tokens.push_back(static_cast<std::int32_t>(rng::below(key, 2 * i, vocab - 1)));
    b.targets.push_back(i % 4 == 2 ? -1 : static_cast<std::int32_t>(rng::below(key, 2 * i + 1, vocab)));
  }
  return b;
}

void check_gpt_gradients(const GptOptions& o, int seq, const ForwardOptions& fwd) {
  Gpt model(o);
  model.init(7);
  laconic::testing::randomize_params(model.params(), 3, 0.3f);
  const Batch batch = random_batch(2, seq, o.vocab, 5);
  ParamStore& store = model.params();
  store.zero_grad();
  model.forward(batch, fwd);
  model.backward();
  std::vector<GradTensor> tensors;
  for (std::size_t v = 0; v < store.views().size(); ++v) {
    const float* g = store.grad(v);
    tensors.push_back({store.view(v).name, store.param(v), std::vector<float>(g, g + store.view(v).numel)});
  }
  laconic::testing::expect_gradients_match([&] { return double(model.forward(batch, fwd).loss); }, tensors,
                                           GradCheckOptions{1e-2f, 1e-2, 1e-4, 400, 2});
}

TEST(GptGrad, TwoLayersWithDropout) { check_gpt_gradients(tiny(2, 0.2f), 5, {true, 3, 1, 2}); }

TEST(GptGrad, OneLayerShorterSequencesNoDropout) {
  // seq 4 < seq_len 5: the unused position row must get a zero gradient (checked numerically).
  check_gpt_gradients(tiny(1, 0.0f), 4, {true, 0, 0, 0});
}

TEST(Gpt, ChangingTokenTChangesNoLogitBeforeT) {
  const GptOptions o = tiny(2, 0.0f);
  Gpt model(o);
  model.init(2);
  laconic::testing::randomize_params(model.params(), 4, 0.3f);
  const Batch base = random_batch(2, o.seq_len, o.vocab, 6);
  model.forward(base, {false, 0, 0, 0});
  const std::size_t n = static_cast<std::size_t>(2 * o.seq_len * o.vocab);
  const std::vector<float> before(model.logits(), model.logits() + n);
  for (int t = 0; t < o.seq_len; ++t) {
    Batch changed = base;
    const int row = o.seq_len + t;  // sequence 1, position t
    changed.tokens[row] = (changed.tokens[row] + 3) % o.vocab;
    model.forward(changed, {false, 0, 0, 0});
    for (int r = 0; r < 2 * o.seq_len; ++r) {
      const bool may_change = r >= row && r < 2 * o.seq_len;  // positions >= t of sequence 1
      bool same = true;
      for (int v = 0; v < o.vocab; ++v) same = same && model.logits()[r * o.vocab + v] == before[r * o.vocab + v];
      if (!may_change) {
        EXPECT_TRUE(same) << "token " << t << " changed the logits of row " << r;
      }
      if (r == row) {
        EXPECT_FALSE(same) << "token " << t << " did not change its own logits";
      }
    }
  }
}

TEST(Gpt, InitIsDeterministicAndGpt2Scaled) {
  const GptOptions o = tiny(2, 0.1f);
  Gpt a(o), b(o);
  testing::expect_deterministic_init_and_forward(a, b, random_batch(2, 5, o.vocab, 1));
  // Weights N(0, 0.02^2); the residual projections (attn.proj, fc2) N(0, (0.02/sqrt(2L))^2);
  // biases and LayerNorm shifts 0, gains 1.
  GptOptions wide = tiny(2, 0.0f);
  wide.dim = 64;
  wide.ffn = 256;
  wide.vocab = 500;
  wide.heads = 4;
  Gpt m(wide);
  m.init(3);
  const ParamStore& store = m.params();
  for (std::size_t i = 0; i < store.views().size(); ++i) {
    const ParamView& v = store.view(i);
    const float* p = store.param(i);
    const bool layernorm = v.name.find(".ln") != std::string::npos;
    if (layernorm && v.name.ends_with(".weight")) {
      for (std::size_t j = 0; j < v.numel; ++j) ASSERT_EQ(p[j], 1.0f) << v.name;
    } else if (v.name.ends_with("bias")) {
      for (std::size_t j = 0; j < v.numel; ++j) ASSERT_EQ(p[j], 0.0f) << v.name;
    } else {
      double sq = 0.0;
      for (std::size_t j = 0; j < v.numel; ++j) sq += double(p[j]) * p[j];
      const double sd = std::sqrt(sq / static_cast<double>(v.numel));
      const bool residual = v.name.find(".proj.") != std::string::npos || v.name.find(".fc2.") != std::string::npos;
      EXPECT_NEAR(sd, residual ? 0.01 : 0.02, residual ? 0.001 : 0.002) << v.name;
    }
  }
}

TEST(Gpt, LossAtInitIsLogVocab) {
  Gpt model(tiny(2, 0.1f));
  model.init(1);
  const Batch batch = random_batch(4, 5, 11, 2);
  const ForwardResult r = model.forward(batch, {true, 0, 0, 0});
  EXPECT_NEAR(r.loss, std::log(11.0f), 0.05f);
  EXPECT_EQ(r.counted, 15);  // 20 positions, every fourth ignored
}

TEST(Gpt, SgdMemorisesAFixedBatch) {
  const GptOptions o = tiny(2, 0.0f);
  Gpt model(o);
  model.init(3);
  const Batch batch = random_batch(4, 5, o.vocab, 9);
  const ForwardOptions fwd{true, 0, 0, 0};
  const ForwardResult first = model.forward(batch, fwd);
  for (int step = 0; step < 200; ++step) {
    model.params().zero_grad();
    model.forward(batch, fwd);
    model.backward();
    auto p = model.params().params();
    auto g = model.params().grads();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
  }
  const ForwardResult last = model.forward(batch, {false, 0, 0, 0});
  EXPECT_LT(last.loss, 0.1f * first.loss) << "first " << first.loss;
}

TEST(Gpt, BackwardAccumulates) {
  Gpt model(tiny(2, 0.3f));
  model.init(1);
  testing::expect_backward_accumulates(model, random_batch(3, 5, 11, 2));
}

TEST(Gpt, NoScoredPositionGivesZeroLossAndGradient) {
  Gpt model(tiny(1, 0.1f));
  model.init(1);
  Batch batch = random_batch(2, 5, 11, 3);
  std::fill(batch.targets.begin(), batch.targets.end(), -1);
  model.params().zero_grad();
  const ForwardResult r = model.forward(batch, {true, 0, 0, 0});
  EXPECT_EQ(r.loss, 0.0f);
  EXPECT_EQ(r.counted, 0);
  model.backward();
  for (float g : model.params().grads()) ASSERT_EQ(g, 0.0f);
}

TEST(Gpt, DescribeFlopsAndParamGroups) {
  GptOptions big;
  big.vocab = 4000;
  big.seq_len = 64;
  Gpt model(big);
  // Embeddings 4000*128 + 64*128; per layer 2 LNs 2*256, attention 4*128^2 + 4*128, FFN
  // 2*128*512 + 512 + 128; final LN 256.
  const std::size_t per_layer = 512 + 4 * 128 * 128 + 4 * 128 + 2 * 128 * 512 + 512 + 128;
  EXPECT_EQ(model.params().size(), 4000u * 128 + 64 * 128 + 2 * per_layer + 256);
  EXPECT_EQ(model.describe(), "gpt L2 d128 h4 ffn512 vocab 4000 seq 64 (917.0k params)");
  const double n = 2 * (4.0 * 128 * 128 + 2.0 * 128 * 512);
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 64 * (6 * n + 12.0 * 2 * 64 * 128 + 6.0 * 128 * 4000));
  int decay = 0;
  Gpt small(tiny(1, 0.0f));
  for (const auto& v : small.params().views()) {
    const bool expect_decay = v.name.ends_with(".weight") && v.name.find(".ln") == std::string::npos;
    EXPECT_EQ(v.group, expect_decay ? ParamGroup::decay : ParamGroup::no_decay) << v.name;
    decay += v.group == ParamGroup::decay;
  }
  EXPECT_EQ(decay, 6);  // tokens, positions, qkv, proj, fc1, fc2
}

TEST(Gpt, RejectsBadInput) {
  Gpt model(tiny(1, 0.0f));
  model.init(0);
  EXPECT_THROW(model.backward(), Error);  // no forward yet
  Batch b = random_batch(2, 5, 11, 0);
  b.tokens[3] = 11;
  EXPECT_THROW(model.forward(b, {}), Error);
  b = random_batch(2, 5, 11, 0);
  b.targets[0] = 11;
  EXPECT_THROW(model.forward(b, {}), Error);
  b = random_batch(2, 6, 11, 0);  // longer than the context
  EXPECT_THROW(model.forward(b, {}), Error);
  GptOptions bad = tiny(1, 0.0f);
  bad.heads = 3;
  EXPECT_THROW(Gpt{bad}, Error);
}

}  // namespace
}  // namespace laconic
