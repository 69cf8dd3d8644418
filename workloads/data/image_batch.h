// Copying examples of an ImageDataset into a Batch. The Batch's vectors are resized to the exact
// size, which never reallocates once they have held a batch at least as large (std::vector keeps
// its capacity when shrinking), so the step loop allocates nothing.
#pragma once

#include <cstdint>
#include <span>

#include "core/batch.h"
#include "workloads/data/fashion_mnist.h"

namespace laconic {

// out <- the examples d[indices[0]], d[indices[1]], ... in that order (a sampler's micro-batch).
void gather(Batch& out, const ImageDataset& d, std::span<const std::int64_t> indices);

// out <- the examples [begin, begin + count) in order, clipped at the end of the dataset, for
// evaluation in fixed-size chunks: for (b = 0; b < d.size(); b += chunk) slice(out, d, b, chunk).
void slice(Batch& out, const ImageDataset& d, std::int64_t begin, int count);

}  // namespace laconic
