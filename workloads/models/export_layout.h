// How a model's parameters are named and laid out outside Laconic: the tensors a safetensors
// export writes and `model.init_from` reads back (framework/inference/export.h). Each exported tensor
// is a view of the ParamStore, whole or a block of its rows (one of a fused Q|K|V's thirds),
// possibly transposed (GPT-2's Conv1D stores [in, out]); BERT's and the GPT's layouts use the
// Hugging Face names of their architectures, other models Laconic's own view names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/params.h"

namespace laconic {

struct ExportTensor {
  static constexpr std::size_t kZeros = std::numeric_limits<std::size_t>::max();
  std::string name;
  std::vector<std::int64_t> shape;  // as written
  std::size_t view = kZeros;        // the ParamStore view it holds; kZeros: a tensor of zeros Laconic
                                    // does not have (BERT's token type embeddings), checked on import
  std::int64_t first_row = 0;       // the view's rows [first_row, first_row + rows) (a 1-D view's elements)
  bool transpose = false;           // a 2-D block written as its transpose
};

struct ExportLayout {
  std::string architecture;  // "bert", "gpt", "mlp", a registered model's name
  std::string config;        // the Hugging Face config.json of the architecture ("" = none)
  std::vector<ExportTensor> tensors;
  // Names another file of the architecture may also hold, each a copy of a layout tensor (a tied
  // output head saved twice): accepted on import when equal to it, never written.
  std::vector<std::pair<std::string, std::string>> tied;
};

// Laconic's own names: one tensor per view, as stored.
ExportLayout native_layout(const ParamStore& store, std::string architecture);

// The index of the view named `name` (Error when there is none).
std::size_t view_named(const ParamStore& store, std::string_view name);
// Builds a layout by view names: the whole view (rows = -1) or `rows` rows from `first_row`.
void add_export(ExportLayout& layout, const ParamStore& store, std::string name, std::string_view view,
                bool transpose = false, std::int64_t first_row = 0, std::int64_t rows = -1);

// Tensor t of a layout from flat host parameters (of the store's layout), in written order.
std::vector<float> export_tensor(const ParamStore& store, std::span<const float> params, const ExportTensor& t);
// The inverse: writes data (t's written order) into flat host parameters.
void import_tensor(const ParamStore& store, std::span<float> params, const ExportTensor& t, std::span<const float> data);

}  // namespace laconic
