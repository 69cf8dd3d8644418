// A small BERT encoder with its masked-language-model head (Devlin et al. 2019, "BERT", section 3.1
// and appendix A.1; the architecture of google-research/bert modeling.py):
//
//   e = LN(E[tokens] + P[0..T)) ; e = Drop(e)                 E: [vocab, dim], P: [seq_len, dim]
//   L post-LN encoder blocks:  x = LN(x + Drop(Attn(x)))       Attn: nn::MultiHeadSelfAttention
//                              x = LN(x + Drop(FFN(x)))        FFN = Linear(dim->ffn) GELU Linear(ffn->dim)
//   MLM head, on the predicted positions only (targets != -1, as BERT's masked_lm_positions):
//       h = LN(GELU(Linear(dim->dim)(x)));  logits = h E^T + b    (E TIED with the input embedding)
//   loss = mean softmax cross-entropy over the predicted positions.
//
// Initialisation as BERT: every weight matrix and both embeddings N(0, 0.02^2), biases 0,
// LayerNorm gains 1 and shifts 0. Weight decay: weights and embeddings decay; biases and
// LayerNorm parameters do not (BERT's AdamWeightDecay / LAMB exclude "bias" and "LayerNorm").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/transformer.h"
#include "workloads/nn/activation.h"
#include "workloads/nn/attention.h"
#include "workloads/nn/dropout.h"
#include "workloads/nn/embedding.h"
#include "workloads/nn/layernorm.h"
#include "workloads/nn/linear.h"
#include "workloads/nn/softmax_xent.h"
#include "workloads/nn/tied_projection.h"

namespace laconic {

// BERT's sizes; dropout 0.1 by default (BERT's hidden_dropout_prob and attention_probs_dropout_prob).
struct BertOptions : TransformerOptions {
  BertOptions() { dropout = 0.1f; }
};

class Bert : public Model {
 public:
  explicit Bert(const BertOptions& opts);
  // Layers hold a pointer to params_: the model stays where it was built.
  Bert(const Bert&) = delete;
  Bert& operator=(const Bert&) = delete;

  ParamStore& params() override { return params_; }
  void init(std::uint64_t seed) override;
  // batch.tokens: size*seq_len ids in [0, vocab); batch.targets: size*seq_len labels in
  // [0, vocab) or -1 (not predicted); batch.seq_len <= options().seq_len. The batch must stay
  // valid until backward().
  ForwardResult forward(const Batch& batch, const ForwardOptions& opts) override;
  void backward() override;
  // Training FLOPs per sequence, 3x the forward multiply-adds x 2 (Kaplan et al. 2020, sec. 2.1):
  //   seq_len * [ 6 * N + 12 * layers * seq_len * dim + 6 * dim * vocab ]
  // N = layers * (4 dim^2 + 2 dim ffn) + dim^2 (the matmul weights: Q, K, V, output, FFN, MLM
  // transform); 12 L T dim = QK^T and PV (2 T dim multiply-adds per token, forward) x 3; 6 dim vocab
  // = the tied output projection. Counted at every position (the dense-head convention), although
  // forward() runs the head on predicted positions only: an upper bound for masked batches.
  double flops_per_example() const override;
  // e.g. "bert L2 d128 h4 ffn512 vocab 4000 seq 64 (1.2M params)"
  std::string describe() const override;
  // Hugging Face's BertForMaskedLM names (bert.embeddings.word_embeddings.weight, ...,
  // bert.encoder.layer.N.attention.self.query.weight, ..., cls.predictions.*), Q, K and V split out
  // of the fused projection, zero token type embeddings, and its config.json.
  ExportLayout export_layout() override;

  const BertOptions& options() const { return opts_; }
  // The last forward's logits, [M, vocab] for its M predicted positions in row order, on the
  // model's device.
  const float* logits() const { return logits_.data(); }

 private:
  // One post-LN encoder block with its activation buffers.
  class Block {
   public:
    Block(ParamStore& store, const std::string& name, const BertOptions& o, int layer);
    void init(std::uint64_t seed);
    // x: [B*T, dim] (kept until backward) -> [B*T, dim] (owned)
    const float* forward(const float* x, int batch, int seq, const ForwardOptions& step);
    // -> dx (owned); ready(view) after each layer: the block's gradients from that view on are final.
    template <class Ready>
    const float* backward(const float* dy, Ready&& ready);
    std::size_t first_view() const { return attn_.qkv().weight_view(); }  // its first tensor

   private:
    ParamStore* store_;
    std::size_t n_ = 0;  // B*T*dim of the last forward
    nn::MultiHeadSelfAttention attn_;
    nn::Dropout attn_drop_;
    nn::LayerNorm ln1_;
    nn::Linear fc1_;
    nn::Gelu gelu_;
    nn::Linear fc2_;
    nn::Dropout ffn_drop_;
    nn::LayerNorm ln2_;
    DeviceArray<float> sum1_, sum2_;  // the residual sums fed to ln1_, ln2_
    DeviceArray<float> dh1_, dx_;     // gradients that gather two branches
  };


  BertOptions opts_;
  ParamStore params_;  // declared before the layers, which register in it on construction
  nn::Embedding tokens_;
  nn::Embedding positions_;
  nn::LayerNorm embed_ln_;
  nn::Dropout embed_drop_;
  std::vector<Block> blocks_;
  nn::Linear head_fc_;
  nn::Gelu head_gelu_;
  nn::LayerNorm head_ln_;
  std::size_t head_bias_ = 0;  // "mlm.bias" [vocab]
  nn::SoftmaxCrossEntropy loss_;
  nn::TiedProjection output_;  // logits = h E^T (+ the bias, mlm.bias)

  // Activation buffers, grown once, on the model's device unless noted.
  int rows_ = 0;                        // B*T of the last forward
  DeviceArray<std::int32_t> pos_ids_;   // [B*T]: t for row b*T + t
  DeviceArray<float> embed_;            // [B*T, dim]: E[tokens] + P[positions]
  int predicted_ = 0;                   // M: positions with a target in the last batch
  int head_reserved_ = 0;               // rows the head buffers are sized for (see forward)
  Device head_device_ = Device::cpu;    // and the device they were sized on
  std::vector<std::int32_t> picked_;    // host [M]: their rows
  std::vector<std::int32_t> picked_targets_;  // host [M]
  // On cuda, the batch's ids in one upload: [tokens (B*T) | picked (M) | targets (M)] staged on
  // the host, then copied to the device. On cpu the host arrays are used directly.
  std::vector<std::int32_t> ids_host_;
  DeviceArray<std::int32_t> ids_;
  const std::int32_t* picked_rows_ = nullptr;  // picked_ where the kernels read it
  DeviceArray<float> gathered_;         // [M, dim]
  const float* head_out_ = nullptr;     // [M, dim]: h
  DeviceArray<float> logits_;           // [M, vocab]
  DeviceArray<float> dencoded_;         // [B*T, dim]
  bool have_forward_ = false;
};

}  // namespace laconic
