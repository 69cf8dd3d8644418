#include "workloads/data/image_batch.h"

#include <algorithm>

#include "core/check.h"

namespace laconic {
namespace {

void shape(Batch& out, const ImageDataset& d, std::size_t size) {
  out.size = static_cast<int>(size);
  out.features = d.features();
  out.inputs.resize(size * static_cast<std::size_t>(out.features));
  out.targets.resize(size);
}

}  // namespace

void gather(Batch& out, const ImageDataset& d, std::span<const std::int64_t> indices) {
  shape(out, d, indices.size());
  const auto f = static_cast<std::size_t>(d.features());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::int64_t k = indices[i];
    LC_CHECK(k >= 0 && k < d.size(), "index ", k, " outside a dataset of ", d.size());
    const auto src = d.images.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(k) * f);
    std::copy(src, src + static_cast<std::ptrdiff_t>(f), out.inputs.begin() + static_cast<std::ptrdiff_t>(i * f));
    out.targets[i] = d.labels[static_cast<std::size_t>(k)];
  }
}

void slice(Batch& out, const ImageDataset& d, std::int64_t begin, int count) {
  LC_CHECK(begin >= 0 && begin < d.size() && count >= 1, "begin=", begin, " count=", count, " size=", d.size());
  const auto n = static_cast<std::size_t>(std::min<std::int64_t>(count, d.size() - begin));
  shape(out, d, n);
  const auto f = static_cast<std::size_t>(d.features());
  const auto first = d.images.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(begin) * f);
  std::copy(first, first + static_cast<std::ptrdiff_t>(n * f), out.inputs.begin());
  const auto labels = d.labels.begin() + static_cast<std::ptrdiff_t>(begin);
  std::copy(labels, labels + static_cast<std::ptrdiff_t>(n), out.targets.begin());
}

}  // namespace laconic
