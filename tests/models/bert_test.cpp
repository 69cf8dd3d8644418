// BERT end to end: gradients of the MLM loss against central differences (all parameters,
// including the tied token embedding, with dropout and ignored positions), deterministic
// initialisation, the loss at initialisation, memorisation under SGD, gradient accumulation,
// FLOPs, naming, parameter groups and input validation.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "workloads/models/bert.h"
#include "tests/models/model_checks.h"
#include "tests/nn/gradcheck.h"

namespace laconic {
namespace {

using laconic::testing::GradCheckOptions;
using laconic::testing::GradTensor;

BertOptions tiny(int layers, float dropout) {
  BertOptions o;
  o.vocab = 11;
  o.seq_len = 4;
  o.dim = 8;
  o.layers = layers;
  o.heads = 2;
  o.ffn = 16;
  o.dropout = dropout;
  return o;
}

// `size` sequences of `seq` random tokens in [0, vocab - 1) (the last id never occurs as input);
// every third position is ignored (-1), the others predict a random id in [0, vocab).
Batch random_batch(int size, int seq, int vocab, std::uint64_t seed) {
  Batch b;
  b.size = size;
  b.seq_len = seq;
  const std::uint64_t key = rng::key({seed, rng::kTest});
  for (int i = 0; i < size * seq; ++i) {
    b.tokens.push_back(static_cast<std::int32_t>(rng::below(key, 2 * i, vocab - 1)));
    b.targets.push_back(i % 3 == 1 ? -1 : static_cast<std::int32_t>(rng::below(key, 2 * i + 1, vocab)));
  }
  return b;
}


std::int64_t predicted(const Batch& b) {
  std::int64_t n = 0;
  for (int i = 0; i < b.size * b.seq_len; ++i) n += b.targets[i] != -1;
  return n;
}

void check_bert_gradients(const BertOptions& o, int seq, const ForwardOptions& fwd) {
  Bert model(o);
  model.init(7);
  // Larger than BERT's 0.02 init, so every path (attention patterns, LayerNorm gains) matters.
  laconic::testing::randomize_params(model.params(), 3, 0.3f);
  const Batch batch = random_batch(3, seq, o.vocab, 5);
  ParamStore& store = model.params();
  store.zero_grad();
  const ForwardResult r = model.forward(batch, fwd);
  EXPECT_EQ(r.counted, predicted(batch));
  model.backward();

  // The tied embedding: the row of the id that never occurs as an input gets its gradient only
  // from the output projection, and it must be there.
  const float* de = store.grad(0);
  ASSERT_EQ(store.view(0).name, "embed.tokens.weight");
  double unused_row = 0.0;
  for (int c = 0; c < o.dim; ++c) unused_row += std::abs(de[(o.vocab - 1) * o.dim + c]);
  EXPECT_GT(unused_row, 1e-4);

  std::vector<GradTensor> tensors;
  for (std::size_t v = 0; v < store.views().size(); ++v) {
    const float* g = store.grad(v);
    tensors.push_back({store.view(v).name, store.param(v),
                       std::vector<float>(g, g + store.view(v).numel)});
  }
  laconic::testing::expect_gradients_match([&] { return double(model.forward(batch, fwd).loss); },
                                           tensors, GradCheckOptions{1e-2f, 1e-2, 1e-4, 400, 2});
}

TEST(BertGrad, TwoLayersWithDropout) {
  check_bert_gradients(tiny(2, 0.2f), 4, {/*train=*/true, /*seed=*/3, /*rank=*/1, /*step=*/2});
}

TEST(BertGrad, OneLayerShorterSequencesNoDropout) {
  // seq 3 < seq_len 4: the unused position row must get a zero gradient (checked numerically).
  check_bert_gradients(tiny(1, 0.0f), 3, {true, 0, 0, 0});
}

TEST(Bert, InitIsDeterministicPerSeed) {
  const BertOptions o = tiny(2, 0.1f);
  Bert a(o), b(o);
  testing::expect_deterministic_init_and_forward(a, b, random_batch(2, 4, o.vocab, 1));

  // BERT's init: weights and embeddings N(0, 0.02^2), biases and LayerNorm shifts 0, gains 1.
  const ParamStore& store = a.params();
  for (std::size_t i = 0; i < store.views().size(); ++i) {
    const ParamView& v = store.view(i);
    const float* p = store.param(i);
    const bool layernorm = v.name.find("ln.") != std::string::npos ||
                           v.name.find(".ln1.") != std::string::npos ||
                           v.name.find(".ln2.") != std::string::npos;
    if (layernorm && v.name.ends_with(".weight")) {
      for (std::size_t j = 0; j < v.numel; ++j) ASSERT_EQ(p[j], 1.0f) << v.name;
    } else if (v.name.ends_with("bias")) {
      for (std::size_t j = 0; j < v.numel; ++j) ASSERT_EQ(p[j], 0.0f) << v.name;
    } else {
      double sq = 0.0;
      for (std::size_t j = 0; j < v.numel; ++j) sq += double(p[j]) * p[j];
      const double sd = std::sqrt(sq / static_cast<double>(v.numel));
      EXPECT_GT(sd, 0.01) << v.name;
      EXPECT_LT(sd, 0.03) << v.name;
    }
  }
}

TEST(Bert, LossAtInitIsLogVocab) {
  // With 0.02-scale weights the logits are nearly equal: the loss is that of uniform guessing.
  Bert model(tiny(2, 0.1f));
  model.init(1);
  const Batch batch = random_batch(4, 4, 11, 2);
  const ForwardResult r = model.forward(batch, {true, 0, 0, 0});
  EXPECT_NEAR(r.loss, std::log(11.0f), 0.05f);
  EXPECT_EQ(r.counted, predicted(batch));
  EXPECT_GE(r.correct, 0);
  EXPECT_LE(r.correct, r.counted);
}

TEST(Bert, SgdMemorisesAFixedBatch) {
  const BertOptions o = tiny(2, 0.0f);
  Bert model(o);
  model.init(3);
  const Batch batch = random_batch(4, 4, o.vocab, 9);
  const ForwardOptions fwd{true, 0, 0, 0};
  const ForwardResult first = model.forward(batch, fwd);
  for (int step = 0; step < 150; ++step) {
    model.params().zero_grad();
    model.forward(batch, fwd);
    model.backward();
    auto p = model.params().params();
    auto g = model.params().grads();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.5f * g[i];
  }
  const ForwardResult last = model.forward(batch, {false, 0, 0, 0});
  EXPECT_LT(last.loss, 0.1f * first.loss) << "first " << first.loss;
  EXPECT_EQ(last.correct, last.counted);
}

TEST(Bert, BackwardAccumulates) {
  Bert model(tiny(2, 0.3f));
  model.init(1);
  testing::expect_backward_accumulates(model, random_batch(3, 4, 11, 2));
}

TEST(Bert, NoPredictedPositionsGiveZeroLossAndGradient) {
  Bert model(tiny(1, 0.1f));
  model.init(1);
  Batch batch = random_batch(2, 4, 11, 3);
  std::fill(batch.targets.begin(), batch.targets.end(), -1);
  model.params().zero_grad();
  const ForwardResult r = model.forward(batch, {true, 0, 0, 0});
  EXPECT_EQ(r.loss, 0.0f);
  EXPECT_EQ(r.counted, 0);
  model.backward();
  for (float g : model.params().grads()) ASSERT_EQ(g, 0.0f);
}

TEST(Bert, DescribeFlopsAndParamGroups) {
  BertOptions big;
  big.vocab = 4000;
  big.seq_len = 64;
  Bert model(big);
  // Embeddings 4000*128 + 64*128 + LN 256; per layer 4*128^2 + 4*128 (attention) + 2*128*512 +
  // 512 + 128 (FFN) + 2*256 (two LNs); head 128^2 + 128 + 256 + 4000.
  const std::size_t per_layer = 4 * 128 * 128 + 4 * 128 + 2 * 128 * 512 + 512 + 128 + 512;
  const std::size_t total = 4000 * 128 + 64 * 128 + 256 + 2 * per_layer + 128 * 128 + 128 + 256 + 4000;
  EXPECT_EQ(model.params().size(), total);
  EXPECT_EQ(model.describe(), "bert L2 d128 h4 ffn512 vocab 4000 seq 64 (937.8k params)");
  const double n = 2 * (4.0 * 128 * 128 + 2.0 * 128 * 512) + 128.0 * 128;
  EXPECT_DOUBLE_EQ(model.flops_per_example(), 64 * (6 * n + 12.0 * 2 * 64 * 128 + 6.0 * 128 * 4000));

  Bert small(tiny(1, 0.0f));
  EXPECT_EQ(small.describe(), "bert L1 d8 h2 ffn16 vocab 11 seq 4 (" +
                                  std::to_string(small.params().size()) + " params)");
  // Decay: weight matrices and both embeddings; no decay: biases and LayerNorm (BERT / LAMB).
  int decay = 0;
  for (const auto& v : small.params().views()) {
    const bool is_ln = v.name.find("ln") != std::string::npos;
    const bool expect_decay = v.name.ends_with(".weight") && !is_ln;
    EXPECT_EQ(v.group, expect_decay ? ParamGroup::decay : ParamGroup::no_decay) << v.name;
    decay += v.group == ParamGroup::decay;
  }
  EXPECT_EQ(decay, 7);  // tokens, positions, qkv, proj, fc1, fc2, mlm.transform
}

TEST(Bert, RejectsBadInput) {
  Bert model(tiny(1, 0.0f));
  model.init(0);
  EXPECT_THROW(model.backward(), Error);  // no forward yet
  Batch b = random_batch(2, 4, 11, 0);
  b.tokens[3] = 11;  // outside the vocabulary
  EXPECT_THROW(model.forward(b, {}), Error);
  b = random_batch(2, 4, 11, 0);
  b.targets[0] = 11;
  EXPECT_THROW(model.forward(b, {}), Error);
  b = random_batch(2, 5, 11, 0);  // longer than seq_len
  EXPECT_THROW(model.forward(b, {}), Error);
  b = random_batch(2, 4, 11, 0);
  b.tokens.resize(7);
  EXPECT_THROW(model.forward(b, {}), Error);
  BertOptions bad = tiny(1, 0.0f);
  bad.heads = 3;
  EXPECT_THROW(Bert{bad}, Error);
}

}  // namespace
}  // namespace laconic
