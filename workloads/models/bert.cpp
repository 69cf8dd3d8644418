#include "workloads/models/bert.h"

#include <algorithm>
#include <span>
#include <sstream>

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "workloads/nn/init.h"
#include "core/ops/dispatch.h"

namespace laconic {

namespace {

constexpr float kInitStd = 0.02f;   // BERT's initializer_range
constexpr float kLayerNormEps = 1e-12f;  // BERT's layer_norm_eps

}  // namespace

// ---- one post-LN encoder block -------------------------------------------------------------------

Bert::Block::Block(ParamStore& store, const std::string& name, const BertOptions& o, int layer)
    : store_(&store),
      attn_(store, name + ".attn",
            {o.dim, o.heads, o.dropout, dropout_id(layer, 0), false, nn::AttentionKernel::auto_, o.precision}),
      attn_drop_(store, {o.dim, o.dropout, dropout_id(layer, 1)}),
      ln1_(store, name + ".ln1", {o.dim, kLayerNormEps}),
      fc1_(store, name + ".fc1", nn::linear(o.dim, o.ffn, o.precision)),
      gelu_(store, o.ffn),
      fc2_(store, name + ".fc2", nn::linear(o.ffn, o.dim, o.precision)),
      ffn_drop_(store, {o.dim, o.dropout, dropout_id(layer, 2)}),
      ln2_(store, name + ".ln2", {o.dim, kLayerNormEps}) {}

void Bert::Block::init(std::uint64_t seed) {
  init_dense(*store_, attn_.qkv(), kInitStd, seed);
  init_dense(*store_, attn_.proj(), kInitStd, seed);
  ln1_.init();
  init_dense(*store_, fc1_, kInitStd, seed);
  init_dense(*store_, fc2_, kInitStd, seed);
  ln2_.init();
}

const float* Bert::Block::forward(const float* x, int batch, int seq, const ForwardOptions& step) {
  const ops::Kernels& k = ops::kernels(store_->device());
  const int rows = batch * seq;
  n_ = static_cast<std::size_t>(rows) * attn_.options().dim;
  // h1 = LN(x + Drop(Attn(x)))
  const float* a = attn_drop_.forward(attn_.forward(x, batch, seq, step), rows, step);
  float* s1 = nn::grow(sum1_, k.device, n_);
  k.add(s1, x, a, n_);
  const float* h1 = ln1_.forward(s1, rows);
  // out = LN(h1 + Drop(W2 GELU(W1 h1 + b1) + b2))
  const float* f = fc2_.forward(gelu_.forward(fc1_.forward(h1, rows), rows), rows);
  f = ffn_drop_.forward(f, rows, step);
  float* s2 = nn::grow(sum2_, k.device, n_);
  k.add(s2, h1, f, n_);
  return ln2_.forward(s2, rows);
}

template <class Ready>
const float* Bert::Block::backward(const float* dy, Ready&& ready) {
  const ops::Kernels& k = ops::kernels(store_->device());
  // Each layer's gradients reported as it finishes them (the block's tensors lie in forward
  // order), so a reduction (or ZeRO-2's slot) need not wait a block.
  const float* ds2 = ln2_.backward(dy);  // = dL/dh1 through the skip path, and dL/dDrop(FFN)
  ready(ln2_.gamma_view());
  const float* df = fc2_.backward(ffn_drop_.backward(ds2));
  ready(fc2_.weight_view());
  df = fc1_.backward(gelu_.backward(df));
  ready(fc1_.weight_view());
  float* dh1 = nn::grow(dh1_, k.device, n_);
  k.add(dh1, ds2, df, n_);
  const float* ds1 = ln1_.backward(dh1);  // = dL/dx through the skip path
  ready(ln1_.gamma_view());
  const float* da = attn_.backward(attn_drop_.backward(ds1));
  float* dx = nn::grow(dx_, k.device, n_);
  k.add(dx, ds1, da, n_);
  return dx;
}

// ---- the model -----------------------------------------------------------------------------------

Bert::Bert(const BertOptions& opts)
    : opts_(validated(opts, "bert")),
      tokens_(params_, "embed.tokens", {opts.vocab, opts.dim, kInitStd}),
      positions_(params_, "embed.positions", {opts.seq_len, opts.dim, kInitStd}),
      embed_ln_(params_, "embed.ln", {opts.dim, kLayerNormEps}),
      embed_drop_(params_, {opts.dim, opts.dropout, 0}),
      blocks_(make_blocks<Block>(params_, opts_)),
      head_fc_(params_, "mlm.transform", nn::linear(opts.dim, opts.dim, opts.precision)),
      head_gelu_(params_, opts.dim),
      head_ln_(params_, "mlm.ln", {opts.dim, kLayerNormEps}),
      head_bias_(params_.add("mlm.bias", {opts.vocab}, ParamGroup::no_decay)),
      loss_(params_, nn::SoftmaxCrossEntropyOptions{opts.vocab, -1}),
      output_(params_, tokens_.table_view(), opts.vocab, opts.dim, opts.precision) {
  params_.finalize();
}

void Bert::init(std::uint64_t seed) {
  tokens_.init(seed);
  positions_.init(seed);
  embed_ln_.init();
  for (auto& b : blocks_) b.init(seed);
  init_dense(params_, head_fc_, kInitStd, seed);
  head_ln_.init();
  nn::init_constant(params_, head_bias_, 0.0f);
}

ForwardResult Bert::forward(const Batch& batch, const ForwardOptions& opts) {
  const int B = batch.size, T = batch.seq_len, dim = opts_.dim, vocab = opts_.vocab;
  LC_CHECK(B >= 0 && T > 0 && T <= opts_.seq_len, "bert: batch of ", B, " sequences of ", T,
           " tokens; the model takes up to ", opts_.seq_len, " tokens per sequence");
  const int rows = B * T;
  LC_CHECK(batch.tokens.size() >= static_cast<std::size_t>(rows) &&
               batch.targets.size() >= static_cast<std::size_t>(rows),
           "bert: batch of ", B, "x", T, " holds ", batch.tokens.size(), " tokens and ",
           batch.targets.size(), " targets");
  const ops::Kernels& k = ops::kernels(params_.device());
  const Device dev = k.device;
  rows_ = rows;
  have_forward_ = false;  // until this forward completes
  if (rows > head_reserved_ || dev != head_device_) {
    // The head runs on the masked positions only, whose count varies from batch to batch (at
    // most B*T): size its buffers for the bound once, so no later step allocates.
    const auto bound = static_cast<std::size_t>(rows);
    head_fc_.reserve(rows);
    head_gelu_.reserve(rows);
    head_ln_.reserve(rows);
    loss_.reserve(rows);
    nn::grow(gathered_, dev, bound * dim);
    nn::grow(logits_, dev, bound * vocab);
    output_.reserve(rows);
    nn::grow(picked_, bound);
    nn::grow(picked_targets_, bound);
    if (dev != Device::cpu) {
      nn::grow(ids_host_, 3 * bound);
      nn::grow(ids_, dev, 3 * bound);
    }
    head_reserved_ = rows;
    head_device_ = dev;
  }

  // Everything that reads the batch first, on the host: the id checks (device kernels cannot
  // throw) and the predicted positions, then (on cuda) one upload of all ids. Nothing after
  // this waits for the device until the loss.
  tokens_.check_ids(batch.tokens.data(), rows);
  std::int32_t* picked = picked_.data();
  std::int32_t* targets = picked_targets_.data();
  int m = 0;
  for (int r = 0; r < rows; ++r) {
    const std::int32_t t = batch.targets[r];
    if (t == -1) continue;
    LC_CHECK(t >= 0 && t < vocab, "bert: target ", t, " at position ", r, " is outside [0, ", vocab,
             ") and is not -1");
    picked[m] = r;
    targets[m] = t;
    ++m;
  }
  predicted_ = m;
  const std::int32_t* tokens_at = batch.tokens.data();
  const std::int32_t* targets_at = targets;
  picked_rows_ = picked;
  if (dev != Device::cpu) {
    std::int32_t* staged = ids_host_.data();
    std::copy_n(batch.tokens.data(), rows, staged);
    std::copy_n(picked, m, staged + rows);
    std::copy_n(targets, m, staged + rows + m);
    ids_.upload(std::span<const std::int32_t>(staged, static_cast<std::size_t>(rows) + 2 * m));
    tokens_at = ids_.data();
    picked_rows_ = ids_.data() + rows;
    targets_at = ids_.data() + rows + m;
  }

  // Embeddings: e = LN(E[tokens] + P[t]), dropped.
  std::int32_t* pos = nn::grow(pos_ids_, dev, rows);
  k.iota_mod(pos, rows, T);
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  float* e = nn::grow(embed_, dev, n);
  k.add(e, tokens_.forward(tokens_at, rows), positions_.forward(pos, rows), n);
  const float* x = embed_drop_.forward(embed_ln_.forward(e, rows), rows, opts);
  for (auto& b : blocks_) x = b.forward(x, B, T, opts);

  // Gather the predicted positions [M, dim] (a row lookup, as an embedding's): the head and the
  // logits run on these rows only.
  float* g = nn::grow(gathered_, dev, static_cast<std::size_t>(m) * dim);
  k.embedding_forward(g, picked_rows_, x, m, dim);

  // h = LN(GELU(W g + b)); logits[M, vocab] = h[M, dim] E[vocab, dim]^T + bias
  head_out_ = head_ln_.forward(head_gelu_.forward(head_fc_.forward(g, m), m), m);
  float* logits = nn::grow(logits_, dev, static_cast<std::size_t>(m) * vocab);
  output_.forward(logits, head_out_, m);
  k.add_bias(logits, params_.param(head_bias_), m, vocab);
  const nn::LossResult l = loss_.forward(logits, targets_at, m);
  have_forward_ = true;
  return ForwardResult{static_cast<float>(l.loss), l.counted, l.correct};
}

void Bert::backward() {
  LC_CHECK(have_forward_, "Bert::backward() without forward()");
  const int m = predicted_, dim = opts_.dim, vocab = opts_.vocab;
  if (m == 0) return;  // no predicted position: the loss is the constant 0
  const ops::Kernels& k = ops::kernels(params_.device());

  // Output projection (tied): dbias += sum_i dlogits[i, :]; dE[vocab, dim] += dlogits^T h;
  // dh[M, dim] = dlogits[M, vocab] E[vocab, dim].
  const float* dlogits = loss_.backward();
  k.bias_grad(params_.grad(head_bias_), dlogits, m, vocab);
  const float* dh = output_.backward(dlogits);
  const float* dg = head_fc_.backward(head_gelu_.backward(head_ln_.backward(dh)));
  notify_grads_ready(offset_of(head_fc_.weight_view()));  // the head's own tensors (not the tied E)

  // Scatter back to [B*T, dim]; unpredicted positions get 0.
  const std::size_t n = static_cast<std::size_t>(rows_) * dim;
  float* d = nn::grow(dencoded_, k.device, n);
  k.fill(d, 0.0f, n);
  k.scatter_rows(d, dg, picked_rows_, m, dim);

  const float* dx = d;
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
    dx = it->backward(dx, [this](std::size_t view) { notify_grads_ready(offset_of(view)); });
    notify_grads_ready(offset_of(it->first_view()));
  }
  dx = embed_ln_.backward(embed_drop_.backward(dx));
  tokens_.backward(dx);  // dE gets the input-embedding term on top of the output-projection term
  positions_.backward(dx);
  notify_grads_ready(0);
}

double Bert::flops_per_example() const {
  const double d = opts_.dim, f = opts_.ffn, v = opts_.vocab, t = opts_.seq_len, l = opts_.layers;
  const double matmul_params = l * (4.0 * d * d + 2.0 * d * f) + d * d;
  return t * (6.0 * matmul_params + 12.0 * l * t * d + 6.0 * d * v);
}

std::string Bert::describe() const {
  std::ostringstream os;
  os << "bert L" << opts_.layers << " d" << opts_.dim << " h" << opts_.heads << " ffn" << opts_.ffn
     << " vocab " << opts_.vocab << " seq " << opts_.seq_len << " (" << param_count_text(params_.size()) << " params)";
  return os.str();
}

}  // namespace laconic

namespace laconic {

ExportLayout Bert::export_layout() {
  const BertOptions& o = opts_;
  ExportLayout l;
  l.architecture = "bert";
  l.config = detail::concat(
      "{\"architectures\": [\"BertForMaskedLM\"], \"model_type\": \"bert\", \"vocab_size\": ", o.vocab,
      ", \"hidden_size\": ", o.dim, ", \"num_hidden_layers\": ", o.layers, ", \"num_attention_heads\": ", o.heads,
      ", \"intermediate_size\": ", o.ffn, ", \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": ", o.dropout,
      ", \"attention_probs_dropout_prob\": ", o.dropout, ", \"max_position_embeddings\": ", o.seq_len,
      ", \"type_vocab_size\": 2, \"layer_norm_eps\": 1e-12, \"initializer_range\": 0.02, "
      "\"position_embedding_type\": \"absolute\", \"tie_word_embeddings\": true}");
  const ParamStore& s = params_;
  const auto add = [&](std::string name, const std::string& view) { add_export(l, s, std::move(name), view); };
  // A layer's weight and bias (dense or LayerNorm), under both names' prefixes.
  const auto add_pair = [&](const std::string& prefix, const std::string& view) {
    add(prefix + ".weight", view + ".weight");
    add(prefix + ".bias", view + ".bias");
  };
  add("bert.embeddings.word_embeddings.weight", "embed.tokens.weight");
  add("bert.embeddings.position_embeddings.weight", "embed.positions.weight");
  l.tensors.push_back({"bert.embeddings.token_type_embeddings.weight", {2, o.dim}});  // zeros: one segment
  add_pair("bert.embeddings.LayerNorm", "embed.ln");
  for (int i = 0; i < o.layers; ++i) {
    const std::string hf = "bert.encoder.layer." + std::to_string(i) + ".", ours = "layer" + std::to_string(i) + ".";
    const char* qkv[] = {"query", "key", "value"};
    for (int j = 0; j < 3; ++j) {
      const std::string name = hf + "attention.self." + qkv[j];
      add_export(l, s, name + ".weight", ours + "attn.qkv.weight", false, j * o.dim, o.dim);
      add_export(l, s, name + ".bias", ours + "attn.qkv.bias", false, j * o.dim, o.dim);
    }
    add_pair(hf + "attention.output.dense", ours + "attn.proj");
    add_pair(hf + "attention.output.LayerNorm", ours + "ln1");
    add_pair(hf + "intermediate.dense", ours + "fc1");
    add_pair(hf + "output.dense", ours + "fc2");
    add_pair(hf + "output.LayerNorm", ours + "ln2");
  }
  add_pair("cls.predictions.transform.dense", "mlm.transform");
  add_pair("cls.predictions.transform.LayerNorm", "mlm.ln");
  add("cls.predictions.bias", "mlm.bias");
  l.tied = {{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
            {"cls.predictions.decoder.bias", "cls.predictions.bias"}};
  return l;
}

}  // namespace laconic
