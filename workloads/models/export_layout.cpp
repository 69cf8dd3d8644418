#include "workloads/models/export_layout.h"

#include "core/check.h"

namespace laconic {
namespace {

// The block t covers: its first element in the view, rows and columns as stored.
struct Block {
  std::size_t offset;
  std::int64_t rows, cols;
};

Block block_of(const ParamStore& store, const ExportTensor& t) {
  const ParamView& v = store.view(t.view);
  const std::int64_t cols = v.shape.size() >= 2 ? static_cast<std::int64_t>(v.numel) / v.shape[0] : 1;
  std::int64_t numel = 1;
  for (const std::int64_t d : t.shape) numel *= d;
  const std::int64_t rows = numel / cols;
  LC_CHECK(rows * cols == numel && t.first_row >= 0 && (t.first_row + rows) * cols <= static_cast<std::int64_t>(v.numel),
           "export tensor '", t.name, "' does not fit view '", v.name, "'");
  LC_CHECK(!t.transpose || v.shape.size() == 2, "export tensor '", t.name, "': only 2-D views transpose");
  return {v.offset + static_cast<std::size_t>(t.first_row * cols), rows, cols};
}

}  // namespace

ExportLayout native_layout(const ParamStore& store, std::string architecture) {
  ExportLayout l;
  l.architecture = std::move(architecture);
  for (std::size_t i = 0; i < store.views().size(); ++i) l.tensors.push_back({store.view(i).name, store.view(i).shape, i});
  return l;
}

std::size_t view_named(const ParamStore& store, std::string_view name) {
  for (std::size_t i = 0; i < store.views().size(); ++i)
    if (store.view(i).name == name) return i;
  LC_CHECK(false, "no parameter view named '", name, "'");
}

void add_export(ExportLayout& layout, const ParamStore& store, std::string name, std::string_view view, bool transpose,
                std::int64_t first_row, std::int64_t rows) {
  const std::size_t i = view_named(store, view);
  std::vector<std::int64_t> shape = store.view(i).shape;
  if (rows >= 0) shape[0] = rows;
  if (transpose) std::swap(shape[0], shape[1]);
  layout.tensors.push_back({std::move(name), std::move(shape), i, first_row, transpose});
}

std::vector<float> export_tensor(const ParamStore& store, std::span<const float> params, const ExportTensor& t) {
  std::int64_t numel = 1;
  for (const std::int64_t d : t.shape) numel *= d;
  std::vector<float> out(static_cast<std::size_t>(numel), 0.0f);
  if (t.view == ExportTensor::kZeros) return out;
  const Block b = block_of(store, t);
  const float* src = params.data() + b.offset;
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t c = 0; c < b.cols; ++c)
      out[t.transpose ? c * b.rows + r : r * b.cols + c] = src[r * b.cols + c];
  return out;
}

void import_tensor(const ParamStore& store, std::span<float> params, const ExportTensor& t, std::span<const float> data) {
  if (t.view == ExportTensor::kZeros) return;
  const Block b = block_of(store, t);
  LC_CHECK(data.size() == static_cast<std::size_t>(b.rows * b.cols), "import of '", t.name, "': ", data.size(), " values");
  float* dst = params.data() + b.offset;
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t c = 0; c < b.cols; ++c) dst[r * b.cols + c] = data[t.transpose ? c * b.rows + r : r * b.cols + c];
}

}  // namespace laconic
