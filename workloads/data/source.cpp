#include "workloads/data/source.h"

#include "workloads/data/image_batch.h"

namespace laconic {

void ImageSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t) const {
  gather(out, *d_, indices);
}

void MlmSource::fill(Batch& out, std::span<const std::int64_t> indices, std::uint64_t key) const {
  mlm_batch(out, *d_, indices, opts_, key);
}

}  // namespace laconic
