// finish_avg (collectives/dtype.h) on device memory: x[i] /= n, queued on a stream. Plain C++
// (no CUDA headers): the stream is passed as its cudaStream_t handle cast to void*.
#pragma once

#include <cstddef>

#include "collectives/dtype.h"

namespace laconic::cuda {

// x[i] /= n for `count` elements of type t at device pointer `data`, on `stream` (asynchronous;
// launch errors throw laconic::Error). The same arithmetic as the host finish_avg: f32 divides
// in fp32 (IEEE, correctly rounded); bf16/f16 widen to fp32, divide, and round back to nearest
// even (NaN payloads may differ from the host's; every other value is bitwise the same); i32 and
// u8 divide truncating.
void finish_avg(void* data, std::size_t count, DType t, int n, void* stream);

}  // namespace laconic::cuda
