#include "workloads/models/transformer.h"

#include "core/check.h"
#include "workloads/nn/init.h"

namespace laconic {

void check_sizes(const TransformerOptions& o, const char* model) {
  LC_CHECK(o.vocab > 0, model, ": vocab must be positive, got ", o.vocab);
  LC_CHECK(o.seq_len > 0, model, ": seq_len must be positive, got ", o.seq_len);
  LC_CHECK(o.dim > 0 && o.heads > 0 && o.dim % o.heads == 0, model, ": dim=", o.dim,
           " must be a positive multiple of heads=", o.heads);
  LC_CHECK(o.layers >= 0, model, ": layers must be >= 0, got ", o.layers);
  LC_CHECK(o.ffn > 0, model, ": ffn must be positive, got ", o.ffn);
  LC_CHECK(o.dropout >= 0.0f && o.dropout < 1.0f, model, ": dropout must be in [0, 1), got ", o.dropout);
}

void init_dense(ParamStore& store, const nn::Linear& fc, float stddev, std::uint64_t seed) {
  nn::init_normal(store, fc.weight_view(), stddev, seed);
  nn::init_constant(store, fc.bias_view(), 0.0f);
}

}  // namespace laconic
