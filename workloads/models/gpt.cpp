#include "workloads/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <sstream>

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "workloads/nn/init.h"
#include "core/ops/dispatch.h"

namespace laconic {

namespace {

constexpr float kInitStd = 0.02f;       // GPT-2's initializer_range
constexpr float kLayerNormEps = 1e-5f;  // GPT-2's layer_norm_epsilon

}  // namespace

// ---- one pre-LN decoder block --------------------------------------------------------------------

Gpt::Block::Block(ParamStore& store, const std::string& name, const GptOptions& o, int layer)
    : store_(&store),
      ln1_(store, name + ".ln1", {o.dim, kLayerNormEps}),
      attn_(store, name + ".attn",
            {o.dim, o.heads, o.dropout, dropout_id(layer, 0), /*causal=*/true, nn::AttentionKernel::auto_, o.precision}),
      attn_drop_(store, {o.dim, o.dropout, dropout_id(layer, 1)}),
      ln2_(store, name + ".ln2", {o.dim, kLayerNormEps}),
      fc1_(store, name + ".fc1", nn::linear(o.dim, o.ffn, o.precision)),
      gelu_(store, o.ffn),
      fc2_(store, name + ".fc2", nn::linear(o.ffn, o.dim, o.precision)),
      ffn_drop_(store, {o.dim, o.dropout, dropout_id(layer, 2)}) {}

void Gpt::Block::init(std::uint64_t seed, float residual_std) {
  ln1_.init();
  init_dense(*store_, attn_.qkv(), kInitStd, seed);
  init_dense(*store_, attn_.proj(), residual_std, seed);
  ln2_.init();
  init_dense(*store_, fc1_, kInitStd, seed);
  init_dense(*store_, fc2_, residual_std, seed);
}

const float* Gpt::Block::forward(const float* x, int batch, int seq, const ForwardOptions& step) {
  const ops::Kernels& k = ops::kernels(store_->device());
  const int rows = batch * seq;
  n_ = static_cast<std::size_t>(rows) * attn_.options().dim;
  // mid = x + Drop(Attn(LN1(x)))
  const float* a = attn_drop_.forward(attn_.forward(ln1_.forward(x, rows), batch, seq, step), rows, step);
  float* mid = nn::grow(mid_, k.device, n_);
  k.add(mid, x, a, n_);
  // out = mid + Drop(W2 GELU(W1 LN2(mid) + b1) + b2)
  const float* f = fc2_.forward(gelu_.forward(fc1_.forward(ln2_.forward(mid, rows), rows), rows), rows);
  f = ffn_drop_.forward(f, rows, step);
  float* out = nn::grow(out_, k.device, n_);
  k.add(out, mid, f, n_);
  return out;
}

template <class Ready>
const float* Gpt::Block::backward(const float* dy, Ready&& ready) {
  const ops::Kernels& k = ops::kernels(store_->device());
  // dmid = dy (skip) + d(FFN branch); each layer's gradients reported as it finishes them (the
  // block's tensors lie in forward order), so a reduction (or ZeRO-2's slot) need not wait a block.
  const float* df = fc2_.backward(ffn_drop_.backward(dy));
  ready(fc2_.weight_view());
  df = fc1_.backward(gelu_.backward(df));
  ready(fc1_.weight_view());
  df = ln2_.backward(df);
  ready(ln2_.gamma_view());
  float* dmid = nn::grow(dmid_, k.device, n_);
  k.add(dmid, dy, df, n_);
  // dx = dmid (skip) + d(attention branch)
  const float* da = attn_.backward(attn_drop_.backward(dmid));
  ready(attn_.qkv().weight_view());
  da = ln1_.backward(da);
  float* dx = nn::grow(dx_, k.device, n_);
  k.add(dx, dmid, da, n_);
  return dx;
}

// ---- the model -----------------------------------------------------------------------------------

Gpt::Gpt(const GptOptions& opts)
    : opts_(validated(opts, "gpt")),
      tokens_(params_, "embed.tokens", {opts.vocab, opts.dim, kInitStd}),
      positions_(params_, "embed.positions", {opts.seq_len, opts.dim, kInitStd}),
      embed_drop_(params_, {opts.dim, opts.dropout, 0}),
      blocks_(make_blocks<Block>(params_, opts_)),
      final_ln_(params_, "final.ln", {opts.dim, kLayerNormEps}),
      loss_(params_, nn::SoftmaxCrossEntropyOptions{opts.vocab, -1}),
      output_(params_, tokens_.table_view(), opts.vocab, opts.dim, opts.precision) {
  params_.finalize();
}

void Gpt::init(std::uint64_t seed) {
  tokens_.init(seed);
  positions_.init(seed);
  const float residual_std = opts_.layers > 0 ? kInitStd / std::sqrt(2.0f * static_cast<float>(opts_.layers)) : kInitStd;
  for (auto& b : blocks_) b.init(seed, residual_std);
  final_ln_.init();
}

ForwardResult Gpt::forward(const Batch& batch, const ForwardOptions& opts) {
  const int B = batch.size, T = batch.seq_len, dim = opts_.dim, vocab = opts_.vocab;
  LC_CHECK(B >= 0 && T > 0 && T <= opts_.seq_len, "gpt: batch of ", B, " sequences of ", T,
           " tokens; the model takes up to ", opts_.seq_len, " tokens per sequence");
  const int rows = B * T;
  LC_CHECK(batch.tokens.size() >= static_cast<std::size_t>(rows) &&
               batch.targets.size() >= static_cast<std::size_t>(rows),
           "gpt: batch of ", B, "x", T, " holds ", batch.tokens.size(), " tokens and ",
           batch.targets.size(), " targets");
  const ops::Kernels& k = ops::kernels(params_.device());
  const Device dev = k.device;
  rows_ = rows;
  have_forward_ = false;  // until this forward completes

  // The id checks on the host (device kernels cannot throw), then on cuda one upload of all ids.
  tokens_.check_ids(batch.tokens.data(), rows);
  for (int r = 0; r < rows; ++r) {
    const std::int32_t t = batch.targets[r];
    LC_CHECK(t == -1 || (t >= 0 && t < vocab), "gpt: target ", t, " at position ", r, " is outside [0, ", vocab,
             ") and is not -1");
  }
  const std::int32_t* tokens_at = batch.tokens.data();
  targets_at_ = batch.targets.data();
  if (dev != Device::cpu) {
    std::int32_t* staged = nn::grow(ids_host_, 2 * static_cast<std::size_t>(rows));
    std::copy_n(batch.tokens.data(), rows, staged);
    std::copy_n(batch.targets.data(), rows, staged + rows);
    nn::grow(ids_, dev, 2 * static_cast<std::size_t>(rows));
    ids_.upload(std::span<const std::int32_t>(staged, 2 * static_cast<std::size_t>(rows)));
    tokens_at = ids_.data();
    targets_at_ = ids_.data() + rows;
  }

  // x = Drop(E[tokens] + P[t])
  std::int32_t* pos = nn::grow(pos_ids_, dev, rows);
  k.iota_mod(pos, rows, T);
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  float* e = nn::grow(embed_, dev, n);
  k.add(e, tokens_.forward(tokens_at, rows), positions_.forward(pos, rows), n);
  const float* x = embed_drop_.forward(e, rows, opts);
  for (auto& b : blocks_) x = b.forward(x, B, T, opts);

  // logits[B*T, vocab] = LN_f(x)[B*T, dim] E[vocab, dim]^T
  final_out_ = final_ln_.forward(x, rows);
  float* logits = nn::grow(logits_, dev, static_cast<std::size_t>(rows) * vocab);
  output_.forward(logits, final_out_, rows);
  const nn::LossResult l = loss_.forward(logits, targets_at_, rows);
  if (l.counted == 0) rows_ = 0;  // nothing scored: the loss is the constant 0, backward adds nothing
  have_forward_ = true;
  return ForwardResult{static_cast<float>(l.loss), l.counted, l.correct};
}

void Gpt::backward() {
  LC_CHECK(have_forward_, "Gpt::backward() without forward()");
  if (rows_ == 0) return;
  // Output projection (tied): dE[vocab, dim] += dlogits^T h;  dh[B*T, dim] = dlogits E.
  const float* dx = final_ln_.backward(output_.backward(loss_.backward()));
  notify_grads_ready(offset_of(final_ln_.gamma_view()));

  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    dx = it->backward(dx, [this](std::size_t view) { notify_grads_ready(offset_of(view)); });
    notify_grads_ready(offset_of(it->first_view()));
  }
  dx = embed_drop_.backward(dx);
  tokens_.backward(dx);  // dE gets the input-embedding term on top of the output-projection term
  positions_.backward(dx);
  notify_grads_ready(0);
}

double Gpt::flops_per_example() const {
  const double d = opts_.dim, f = opts_.ffn, v = opts_.vocab, t = opts_.seq_len, l = opts_.layers;
  const double matmul_params = l * (4.0 * d * d + 2.0 * d * f);
  return t * (6.0 * matmul_params + 12.0 * l * t * d + 6.0 * d * v);
}

std::string Gpt::describe() const {
  std::ostringstream os;
  os << "gpt L" << opts_.layers << " d" << opts_.dim << " h" << opts_.heads << " ffn" << opts_.ffn
     << " vocab " << opts_.vocab << " seq " << opts_.seq_len << " (" << param_count_text(params_.size()) << " params)";
  return os.str();
}

}  // namespace laconic

namespace laconic {

ExportLayout Gpt::export_layout() {
  const GptOptions& o = opts_;
  ExportLayout l;
  l.architecture = "gpt";
  l.config = detail::concat(
      "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"vocab_size\": ", o.vocab,
      ", \"n_embd\": ", o.dim, ", \"n_layer\": ", o.layers, ", \"n_head\": ", o.heads, ", \"n_inner\": ", o.ffn,
      ", \"n_positions\": ", o.seq_len, ", \"n_ctx\": ", o.seq_len,
      ", \"activation_function\": \"gelu\", \"resid_pdrop\": ", o.dropout, ", \"embd_pdrop\": ", o.dropout,
      ", \"attn_pdrop\": ", o.dropout,
      ", \"layer_norm_epsilon\": 1e-05, \"initializer_range\": 0.02, \"scale_attn_weights\": true, "
      "\"tie_word_embeddings\": true}");
  const ParamStore& s = params_;
  // A Linear's weight [out, in] is GPT-2's Conv1D weight [in, out] transposed; biases as they are.
  const auto add = [&](const std::string& prefix, const std::string& view, bool conv1d) {
    add_export(l, s, prefix + ".weight", view + ".weight", conv1d);
    add_export(l, s, prefix + ".bias", view + ".bias");
  };
  add_export(l, s, "transformer.wte.weight", "embed.tokens.weight");
  add_export(l, s, "transformer.wpe.weight", "embed.positions.weight");
  for (int i = 0; i < o.layers; ++i) {
    const std::string hf = "transformer.h." + std::to_string(i) + ".", ours = "layer" + std::to_string(i) + ".";
    add(hf + "ln_1", ours + "ln1", false);
    add(hf + "attn.c_attn", ours + "attn.qkv", true);
    add(hf + "attn.c_proj", ours + "attn.proj", true);
    add(hf + "ln_2", ours + "ln2", false);
    add(hf + "mlp.c_fc", ours + "fc1", true);
    add(hf + "mlp.c_proj", ours + "fc2", true);
  }
  add("transformer.ln_f", "final.ln", false);
  l.tied = {{"lm_head.weight", "transformer.wte.weight"}};
  return l;
}

}  // namespace laconic
