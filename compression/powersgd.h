// PowerSGD (Vogels, Karimireddy & Jaggi, NeurIPS 2019): each gradient matrix M (n x m) is sent
// as a rank-r product P Q^T found by one step of subspace (power) iteration, warm-started from
// the previous step's Q. Two small all-reduces (P: n*r, Q: m*r values) replace one of n*m.
//
// Semantics are those of PyTorch 1.13's powerSGD_hook (torch/distributed/algorithms/
// ddp_comm_hooks/powerSGD_hook.py, batch_tensors_with_same_shape=False), reimplemented:
//  - step < start_iter: the whole bucket is divided by the world size, then all-reduced (sum),
//    as torch's default all-reduce hook does (division first).
//  - Otherwise, with error feedback, M += error over the whole bucket first. Each tensor is
//    viewed as (shape[0], numel / shape[0]) with rank r' = min(n, m, rank); it is compressed iff
//    (n + m) r' min_compression_rate < n m. All other tensors (every 1-D one included) are
//    concatenated in bucket order, all-reduced (sum) and divided by the world size.
//  - Compressed tensors are taken grouped by shape (the shapes in order of first appearance,
//    then bucket order within a shape), as torch does; their P's and Q's are concatenated in
//    that order, each P row-major n x r', each Q row-major m x r' (torch's layouts, so our Q
//    state is laid out as torch's q_memory_dict entry).
//  - Per step: orthogonalize every Q; P = M Q; all-reduce all P's (sum); orthogonalize every P;
//    Q = M^T P; all-reduce all Q's (sum), divide by the world size; M <- P Q^T.
//  - error = (M + error) - output over the whole bucket. For uncompressed tensors that is the
//    local value minus the average, which torch keeps and adds back next step (the ranks'
//    errors there sum to zero up to rounding, so this only perturbs by rounding); we replicate
//    it rather than zeroing those entries, to match torch step by step.
//  - Orthogonalization (torch's _orthogonalize): r' <= 2 uses modified Gram-Schmidt with
//    col /= (|col| + epsilon); r' > 2 uses torch.linalg.qr, i.e. LAPACK Householder QR
//    (sgeqr2 + sorg2r), whose columns differ from Gram-Schmidt's in sign (R's diagonal has the
//    sign of -alpha); we implement that Householder QR so that Q matches torch's sign for sign
//    (the output P Q^T does not depend on the signs, the Q state does). epsilon is ignored by
//    the QR path, as in torch. One deviation: a zero column in Gram-Schmidt with epsilon 0 is
//    0/0 = NaN in torch 1.13 (its `except ZeroDivisionError` branch, meant to zero the column,
//    is dead code: tensor division never raises); we zero the column, which is what that
//    branch intended. Householder QR is unaffected (a zero column gets tau = 0).
//  - Initial Q: torch draws standard normal values from torch.manual_seed(a seed drawn from
//    numpy RandomState(random_seed)), at the first compressed step (every compressed step
//    without warm start). Ours: rng::normal (core/rng.h, Box-Muller over the counter
//    RNG) keyed by (seed, kInit, "PowerSGD", bucket id) and, without warm start, the step; the
//    counter is the index in the bucket's Q buffer. With warm start Q is drawn in prepare(), so
//    a resumed run gets the checkpointed Q from state(). Tests inject torch's Q by overwriting
//    the "powersgd.q.<id>" state after prepare().
//
// Defaults: torch's are rank 1, start_powerSGD_iter 1000, min_compression_rate 2, error
// feedback and warm start on, epsilon 0, seed 0. The paper uses rank 2 (CIFAR-10) and 4
// (WikiText-2). Ours keep rank 4 and a short dense warm-up; recipes choose their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compression/reducer.h"

namespace laconic {

struct PowerSgdOptions {
  int rank = 4;                       // r (torch: matrix_approximation_rank, default 1)
  std::int64_t start_iter = 10;       // dense all-reduce for steps < start_iter (torch: 1000)
  double min_compression_rate = 2.0;  // torch's default
  bool error_feedback = true;         // torch's default
  bool warm_start = true;             // torch's default
  float orthogonalization_epsilon = 0.0f;  // torch's default; used by Gram-Schmidt only
  std::uint64_t seed = 0;             // initial Q (torch: random_seed, default 0)
  Device device = Device::cpu;        // where the state and reduce()'s data live (reducer.h)
  bool operator==(const PowerSgdOptions&) const = default;
};

// The pure pieces of PowerSGD. Matrices are flat row-major arrays; P is n x r, Q is m x r (as
// torch stores them). The GEMM kernels take Q transposed ("qt": r x m, each column of Q
// contiguous), so that every pass streams the rows of M with unit stride.
namespace powersgd {

// r' = min(rows, cols, rank).
std::size_t tensor_rank(std::size_t rows, std::size_t cols, int rank);
// torch's _should_compress: (rows + cols) r' min_rate < rows cols.
bool should_compress(std::size_t rows, std::size_t cols, std::size_t rank, double min_compression_rate);

// In place on a rows x cols row-major matrix (rows >= cols): orthonormal columns spanning the
// same space, as torch's _orthogonalize: gram_schmidt when cols <= 2, else householder_qr.
void orthogonalize(std::span<float> a, std::size_t rows, std::size_t cols, float epsilon);
// Modified Gram-Schmidt: column i /= (|column i| + epsilon), then removed from the later ones.
// A zero column (with epsilon 0) is left zero.
void gram_schmidt(std::span<float> a, std::size_t rows, std::size_t cols, float epsilon);
// The Q factor of LAPACK's Householder QR (sgeqr2, then sorg2r), signs included.
void householder_qr(std::span<float> a, std::size_t rows, std::size_t cols);

// Transposes a rows x cols row-major matrix into out (cols x rows).
void transpose(std::span<const float> a, std::size_t rows, std::size_t cols, std::span<float> out);

// P = M Q (M rows x cols, qt = Q^T: r x cols, P rows x r). When `error` is non-empty, first
// M += error, in place and in the same pass over M.
void compute_p(std::span<float> m, std::span<const float> error, std::size_t rows, std::size_t cols,
               std::span<const float> qt, std::size_t r, std::span<float> p);
// qt = (M^T P)^T = P^T M (r x cols): Q transposed, accumulated over the rows of M in order.
void compute_qt(std::span<const float> m, std::size_t rows, std::size_t cols, std::span<const float> p,
                std::size_t r, std::span<float> qt);
// M <- P Q^T, row by row. When `error` is non-empty, error = M - P Q^T first, in the same pass.
// `row` is scratch of at least cols floats.
void decompress(std::span<float> m, std::span<float> error, std::size_t rows, std::size_t cols,
                std::span<const float> p, std::span<const float> qt, std::size_t r, std::span<float> row);

// Standard normal values for a bucket's Q buffer (see the header comment for the key).
void init_q(std::span<float> q, std::uint64_t seed, int bucket_id, std::int64_t step, bool warm_start);

}  // namespace powersgd

// On cuda: the same steps with the device pieces of compression/cuda/reducers_cuda.h: the GEMMs
// in cuBLAS, every matrix's orthogonalization in one launch per phase (a table of the bucket's
// matrices uploaded in prepare()), the uncompressed tensors gathered and scattered through an
// index table. The initial Q is drawn on the host (the same rng::normal values) and uploaded:
// once in prepare() with warm start, every compressed step without.
class PowerSgdReducer final : public Reducer {
 public:
  explicit PowerSgdReducer(PowerSgdOptions opts = {});
  ~PowerSgdReducer() override;
  void prepare(std::span<const BucketLayout> buckets) override;
  void reduce(std::span<float> data, const BucketLayout& bucket, std::int64_t step, Communicator& comm) override;
  std::string describe() const override;
  // Per bucket: "powersgd.error.<id>" (with error feedback) and "powersgd.q.<id>" (when the
  // bucket has a compressed tensor): the residual and the last Q (torch's q_memory layout).
  std::vector<StateTensor> state() override;
  const PowerSgdOptions& options() const { return opts_; }

 private:
  struct Matrix {  // a compressed tensor
    std::size_t offset, rows, cols, rank, p_offset, q_offset;
  };
  struct Slice {  // an uncompressed tensor
    std::size_t offset, size;
  };
  struct Bucket {
    std::size_t size = 0;
    std::vector<Matrix> matrices;  // torch's order: grouped by shape
    std::vector<Slice> dense;       // bucket order
    std::size_t p_size = 0, q_size = 0, dense_size = 0;
    DeviceArray<float> error, p, q;  // on opts_.device
  };
  struct CudaTables;  // per bucket: device index and orthogonalization tables (powersgd.cpp)

  void reduce_cuda(std::span<float> data, Bucket& b, int id, std::int64_t step, Communicator& comm);

  PowerSgdOptions opts_;
  std::vector<Bucket> buckets_;
  std::unique_ptr<CudaTables> cuda_;
  // Scratch shared by all buckets, sized in prepare() for the largest need.
  DeviceArray<float> concat_;  // the uncompressed tensors, concatenated (on opts_.device)
  std::vector<float> q_host_;  // cuda without warm start: the fresh Q, drawn here and uploaded
  std::vector<float> qt_;      // one tensor's Q transposed
  std::vector<float> row_;     // one row of P Q^T
};

}  // namespace laconic
