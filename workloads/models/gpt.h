// A decoder-only causal language model in the GPT-2 layout (Radford et al. 2019, section 2.3:
// GPT's Transformer decoder with layer normalisation moved to the input of each sub-block and one
// added after the last block):
//
//   x = Drop(E[tokens] + P[0..T))                          E: [vocab, dim], P: [seq_len, dim]
//   L pre-LN blocks:  x = x + Drop(Attn(LN1(x)))           Attn: causal nn::MultiHeadSelfAttention
//                     x = x + Drop(FFN(LN2(x)))            FFN = Linear(dim->ffn) GELU Linear(ffn->dim)
//   logits = LN_f(x) E^T                                   (E TIED with the output head, no bias)
//   loss = mean softmax cross-entropy over the positions whose target is not -1 (next tokens).
//
// GELU is the exact one (torch.nn.GELU()), not GPT-2's tanh approximation. Initialisation as
// GPT-2: every weight matrix and both embeddings N(0, 0.02^2), except the two projections that
// end a residual branch (attn.proj, fc2), N(0, (0.02 / sqrt(2 L))^2) so the residual stream's
// variance does not grow with depth; biases 0, LayerNorm gains 1 and shifts 0. Weight decay:
// weights and embeddings decay; biases and LayerNorm parameters do not.
#pragma once

#include <cstdint>
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

// The GPT's sizes (seq_len is the context); no dropout by default.
struct GptOptions : TransformerOptions {};

class Gpt : public Model {
 public:
  explicit Gpt(const GptOptions& opts);
  // Layers hold a pointer to params_: the model stays where it was built.
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  ParamStore& params() override { return params_; }
  void init(std::uint64_t seed) override;
  // batch.tokens: size*seq_len ids in [0, vocab); batch.targets: size*seq_len next-token ids in
  // [0, vocab) or -1 (not scored); batch.seq_len <= options().seq_len. Valid until backward().
  ForwardResult forward(const Batch& batch, const ForwardOptions& opts) override;
  void backward() override;
  // Training FLOPs per sequence, 3x the forward multiply-adds x 2 (Kaplan et al. 2020, sec. 2.1):
  //   seq_len * [ 6 * N + 12 * layers * seq_len * dim + 6 * dim * vocab ]
  // N = layers * (4 dim^2 + 2 dim ffn) (Q, K, V, output and FFN weights); 12 L T dim = QK^T and PV
  // at every (query, key) pair, as computed (the causal half is masked, not skipped); 6 dim vocab
  // = the tied output projection at every position.
  double flops_per_example() const override;
  // e.g. "gpt L4 d256 h4 ffn1024 vocab 4000 seq 128 (4.2M params)"
  std::string describe() const override;
  // GPT-2's names and layout (GPT2LMHeadModel: transformer.wte.weight, ...,
  // transformer.h.N.attn.c_attn.weight as Conv1D's [in, out], transformer.ln_f.*) and its config.json
  // (activation_function "gelu": the exact GELU this model uses).
  ExportLayout export_layout() override;

  const GptOptions& options() const { return opts_; }
  // The last forward's logits, [B*T, vocab], on the model's device.
  const float* logits() const { return logits_.data(); }

 private:
  // One pre-LN decoder block with its activation buffers.
  class Block {
   public:
    Block(ParamStore& store, const std::string& name, const GptOptions& o, int layer);
    void init(std::uint64_t seed, float residual_std);
    // x: [B*T, dim] -> [B*T, dim] (owned)
    const float* forward(const float* x, int batch, int seq, const ForwardOptions& step);
    // -> dx (owned); ready(view) after each layer: the block's gradients from that view on are final.
    template <class Ready>
    const float* backward(const float* dy, Ready&& ready);
    std::size_t first_view() const { return ln1_.gamma_view(); }  // its first tensor

   private:
    ParamStore* store_;
    std::size_t n_ = 0;  // B*T*dim of the last forward
    nn::LayerNorm ln1_;
    nn::MultiHeadSelfAttention attn_;
    nn::Dropout attn_drop_;
    nn::LayerNorm ln2_;
    nn::Linear fc1_;
    nn::Gelu gelu_;
    nn::Linear fc2_;
    nn::Dropout ffn_drop_;
    DeviceArray<float> mid_, out_;  // x + attention branch; that + FFN branch
    DeviceArray<float> dmid_, dx_;  // gradients that gather a skip path and a branch
  };


  GptOptions opts_;
  ParamStore params_;  // declared before the layers, which register in it on construction
  nn::Embedding tokens_;
  nn::Embedding positions_;
  nn::Dropout embed_drop_;
  std::vector<Block> blocks_;
  nn::LayerNorm final_ln_;
  nn::SoftmaxCrossEntropy loss_;
  nn::TiedProjection output_;  // logits = LN_f(x) E^T

  // Activation buffers, grown once, on the model's device unless noted.
  int rows_ = 0;                       // B*T of the last forward
  DeviceArray<std::int32_t> pos_ids_;  // [B*T]: t for row b*T + t
  DeviceArray<float> embed_;           // [B*T, dim]
  std::vector<std::int32_t> ids_host_;  // cuda: [tokens | targets] staged for one upload
  DeviceArray<std::int32_t> ids_;
  const std::int32_t* targets_at_ = nullptr;
  const float* final_out_ = nullptr;   // [B*T, dim]: LN_f(x)
  DeviceArray<float> logits_;          // [B*T, vocab]
  bool have_forward_ = false;
};

}  // namespace laconic
