// CUDA versions of the reducers' pure encode / decode functions (compression/*.h are the
// specification; tests/cuda/test_reducers_cuda.cpp checks the parity). Plain C++: no CUDA header,
// so the reducers' .cpp files and the tests call these without nvcc. Built only with
// LACONIC_HAVE_CUDA.
//
// Conventions: every pointer is a DEVICE pointer unless it says host; sizes are element counts.
// Everything runs on the legacy default stream (like core/ops/cuda and DeviceArray's copies)
// and returns without synchronising; a launch error is thrown as laconic::Error at once, an
// asynchronous one at the next checked call. Nothing here reads device memory back to the host:
// data-dependent quantities (top-k thresholds, 1-bit scales) stay on the device, so a reducer's
// reduce() never waits for the device except inside its collectives.
//
// Determinism: no float atomics. Sums have a fixed order that depends only on the sizes (not on
// the device model), so repeated runs give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace laconic::reducers_cuda {

// ---- dense wire formats (collectives/dtype.h's to_bf16 / to_f16, bit for bit) ----
void to_bf16(std::uint16_t* out, const float* in, std::size_t n);
void from_bf16(float* out, const std::uint16_t* in, std::size_t n);
void to_f16(std::uint16_t* out, const float* in, std::size_t n);
void from_f16(float* out, const std::uint16_t* in, std::size_t n);

// ---- small elementwise helpers the reducers compose ----
void add_into(float* x, const float* e, std::size_t n);  // x += e
void divide(float* x, float d, std::size_t n);           // x /= d (IEEE division, as the CPU)
// out[j] = x[index[j]] (PowerSGD's concatenation of its uncompressed tensors).
void gather(float* out, const float* x, const std::uint32_t* index, std::size_t n);
// err[index[j]] = x[index[j]] - avg[j] (when err is not null), then x[index[j]] = avg[j].
void scatter_average(float* x, float* err, const float* avg, const std::uint32_t* index, std::size_t n);

// ---- top-k (compression/topk.h) ----
// Device scratch of topk_exact, sized by reserve() (the reducer's prepare()); selecting then
// allocates nothing.
struct TopKScratch {
  DeviceArray<std::uint32_t> hist;     // 4096 bins of the current digit
  DeviceArray<std::uint32_t> cut;      // the partly resolved threshold (see topk_cuda.cu)
  DeviceArray<std::uint64_t> tiles;    // per tile: counts, then their exclusive prefix sums
  DeviceArray<std::uint8_t> scan_temp; // cub::DeviceScan's temporary storage
  void reserve(std::size_t n);
};
// Exact top-k of acc = x (+ residual), with topk_exact's contract: the min(k, n) indices of
// largest |acc| ascending into `indices` and acc at them into `values`; ties at the threshold go
// to the lowest index; NaN counts as largest. residual (nullable; n elements) becomes acc with the
// selected positions zeroed. Bitwise the CPU's selection. Returns min(k, n) (known on the host).
std::size_t topk_exact(std::uint32_t* indices, float* values, float* residual, const float* x, std::size_t n,
                       std::size_t k, TopKScratch& scratch);
// topk_decode on the device: `gathered` holds `world` rank blocks back to back (c value words,
// then c index words, c = counts[q]; counts is a HOST array), out (n) = the scatter-add in rank
// order divided by world at the touched positions, the same float operations in the same order as
// the CPU. The value words are overwritten (staged quotients). An index >= n is skipped (the CPU
// throws; a kernel cannot).
void topk_decode(float* out, std::size_t n, std::uint32_t* gathered, const std::size_t* counts, std::size_t world);

// ---- 1-bit (compression/onebit.h) ----
// Doubles of scratch the scale reduction needs (one partial sum per block).
std::size_t onebit_scratch_doubles();
// onebit_encode of n elements: the scale S(x + error) goes to the 4 bytes at `scale_out` (any
// alignment: the reducers' wire blocks put it in front of the bits), sign bits to bits[0,
// bits_bytes) (bits past element n zero; bits_bytes >= (n + 7) / 8), error (nullable) = acc -
// scale * sign. Bits are the CPU's bit for bit; the scale is summed in double in another order,
// so it matches to float rounding, and the residual follows from it.
void onebit_encode(std::uint8_t* scale_out, std::uint8_t* bits, std::size_t bits_bytes, float* error,
                   const float* x, std::size_t n, bool mean_abs, double* scratch);
// out[i] (+)= (scale / divisor) * sign_i for i < n, scale read from the 4 bytes at `scale` (any
// alignment). divisor 1 is not applied (the CPU's plain decode); add selects onebit_decode_add.
void onebit_decode(float* out, std::size_t n, const std::uint8_t* bits, const std::uint8_t* scale, float divisor,
                   bool add);

// ---- PowerSGD (compression/powersgd.h), row-major as on the CPU ----
// One matrix to orthogonalize in place: rows x cols, row-major, cols <= rows, cols <= 256.
struct OrthoJob {
  float* a;
  std::uint32_t rows;
  std::uint32_t cols;
};
// powersgd::orthogonalize (Gram-Schmidt for cols <= 2, else LAPACK-style Householder QR) of each
// of `count` jobs (jobs: a DEVICE array), one thread block per matrix.
void orthogonalize(const OrthoJob* jobs, std::size_t count, float epsilon);
// The same for one matrix (the job passed by value: nothing to upload).
void orthogonalize_one(float* a, std::size_t rows, std::size_t cols, float epsilon);
// cuBLAS SGEMMs in plain FP32 math (no TF32):
// p (rows x r) = m (rows x cols) q (cols x r).
void compute_p(float* p, const float* m, const float* q, std::size_t rows, std::size_t cols, std::size_t r);
// q (cols x r) = m^T p.
void compute_q(float* q, const float* m, const float* p, std::size_t rows, std::size_t cols, std::size_t r);
// m = p q^T; with error (nullable) first error = m - p q^T.
void decompress(float* m, float* error, const float* p, const float* q, std::size_t rows, std::size_t cols,
                std::size_t r);

}  // namespace laconic::reducers_cuda
