#include "workloads/nn/embedding.h"

#include "core/check.h"
#include "workloads/nn/buffer.h"
#include "workloads/nn/init.h"
#include "core/ops/dispatch.h"

namespace laconic::nn {

Embedding::Embedding(ParamStore& store, const std::string& name, const EmbeddingOptions& opts)
    : store_(&store), opts_(opts) {
  LC_CHECK(opts.vocab > 0 && opts.dim > 0, "Embedding '", name, "': vocab=", opts.vocab, " dim=", opts.dim);
  table_ = store.add(name + ".weight", {opts.vocab, opts.dim}, ParamGroup::decay);
}

void Embedding::init(std::uint64_t seed) { init_normal(*store_, table_, opts_.init_std, seed); }

void Embedding::check_ids(const std::int32_t* ids, int n) const {
  for (int i = 0; i < n; ++i)
    LC_CHECK(ids[i] >= 0 && ids[i] < opts_.vocab, "embedding id ", ids[i], " at ", i,
             " is outside [0, ", opts_.vocab, ")");
}

const float* Embedding::forward(const std::int32_t* ids, int n) {
  const ops::Kernels& k = ops::kernels(store_->device());
  // The kernel indexes the table unchecked; out-of-range ids stop here (on the host).
  if (k.device == Device::cpu) check_ids(ids, n);
  float* y = grow(y_, k.device, static_cast<std::size_t>(n) * opts_.dim);
  k.embedding_forward(y, ids, store_->param(table_), n, opts_.dim);
  ids_ = ids;
  n_ = n;
  return y;
}

void Embedding::backward(const float* dy) {
  LC_CHECK(ids_ != nullptr, "Embedding::backward() without forward()");
  ops::kernels(store_->device()).embedding_backward(store_->grad(table_), dy, ids_, n_, opts_.dim);
}

}  // namespace laconic::nn
