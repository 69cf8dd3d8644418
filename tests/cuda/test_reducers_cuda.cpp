// Parity of the reducers' CUDA pieces (compression/cuda/) with the CPU free functions, the
// specification, and of whole reduce() calls at world size 1 on the device against the same
// reducer on the CPU. Bitwise where the CPU does integer or bit work (16-bit casts, top-k
// selection and decode, 1-bit sign bits); to float rounding elsewhere (1-bit scales, which the
// device sums in another order, and PowerSGD's GEMMs and orthogonalization). Every check prints
// its max difference. Tests that need a device skip without one (never pass silently).
// Multi-rank correctness is covered by the CPU suites (tests/compression, tests/mpi): the device
// path runs the same collectives on the same buffer layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "compression/cuda/reducers_cuda.h"
#include "compression/onebit.h"
#include "compression/powersgd.h"
#include "compression/reducer.h"
#include "compression/topk.h"
#include "core/device.h"
#include "core/rng.h"
#include "tests/compression/solo_communicator.h"

namespace laconic {
namespace {

namespace rc = reducers_cuda;

#define LC_REQUIRE_CUDA_DEVICE() \
  if (!::laconic::cuda_available()) GTEST_SKIP() << "no CUDA device"

std::vector<float> normal_values(std::size_t n, std::uint64_t stream, float sd = 1.0f) {
  const std::uint64_t key = rng::key({rng::kTest, 0x7265647563ULL /* "reduc" */, stream});
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = sd * rng::normal(key, i);
  return v;
}

template <typename T>
DeviceArray<T> dev(const std::vector<T>& h) {
  DeviceArray<T> d(Device::cuda, h.size());
  d.upload(h);
  return d;
}
template <typename T>
std::vector<T> host(const DeviceArray<T>& d, std::size_t n) {
  std::vector<T> h(n);
  d.download(h);
  return h;
}
template <typename T>
std::vector<T> host(const DeviceArray<T>& d) {
  return host(d, d.size());
}

// Positions whose bit patterns differ (-0 vs +0 and NaN payloads count), printed under `what`.
// `arithmetic_nans`: a NaN meets any NaN. For values computed from a NaN (top-k's acc = x +
// residual, and the residual it leaves): x86 returns the NaN operand's payload, the GPU its canonical NaN (0x7fffffff), a
// difference of the hardware that no consumer reads (the non-finite guard sees a NaN either way).
// Copies and casts keep payloads on both and are compared with them.
std::size_t bit_mismatches(const std::string& what, const std::vector<float>& got, const std::vector<float>& want,
                           bool arithmetic_nans = false) {
  EXPECT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (arithmetic_nans && std::isnan(got[i]) && std::isnan(want[i])) continue;
    bad += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
  }
  std::cout << "[ parity   ] " << what << " bit mismatches=" << bad << " of " << want.size() << "\n";
  return bad;
}

// Max |got - want| (NaN must meet NaN), printed; returns it.
double max_diff(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size()) << what;
  double d = 0, ref = 0;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) d = std::numeric_limits<double>::infinity();
    else if (!std::isnan(want[i])) d = std::max(d, std::abs(static_cast<double>(got[i]) - want[i]));
    if (std::isfinite(want[i])) ref = std::max(ref, std::abs(static_cast<double>(want[i])));
  }
  std::cout << "[ parity   ] " << what << " max_abs_diff=" << d << " (max |ref|=" << ref << ")\n";
  return d;
}

// ---- dense casts ----------------------------------------------------------------------------------

// Random floats plus the edge cases of both formats: zeros, infinities, NaNs, values that round
// to f16's inf or into its subnormals, bf16 rounding ties.
std::vector<float> cast_inputs(std::size_t n, std::uint64_t stream) {
  std::vector<float> v = normal_values(n, stream, 100.0f);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                            65519.0f, 65520.0f, -70000.0f, 6.0e-8f, 3.0e-8f, 2.9e-8f, 1e-40f, -5.96e-8f,
                            std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u), 1e38f};
  for (std::size_t i = 0; i < n; ++i)
    if (i % 7 == 3) v[i] = specials[(i / 7) % std::size(specials)];
  return v;
}

TEST(CudaReducers, HalfCastsMatchCpuBitForBit) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const std::size_t n : {0ul, 1ul, 3ul, 4ul, 257ul, 100003ul}) {
    const std::vector<float> x = cast_inputs(n, n);
    std::vector<std::uint16_t> want_b(n), want_h(n);
    std::vector<float> back_b(n), back_h(n);
    for (std::size_t i = 0; i < n; ++i) {
      want_b[i] = to_bf16(x[i]).bits;
      want_h[i] = to_f16(x[i]).bits;
      back_b[i] = from_bf16(bf16{want_b[i]});
      back_h[i] = from_f16(f16{want_h[i]});
    }
    // Offset by one element too: the unaligned (scalar) path.
    for (const std::size_t off : {0ul, 1ul}) {
      const std::size_t m = n > off ? n - off : 0;
      DeviceArray<float> dx = dev(x), out(Device::cuda, n);
      DeviceArray<std::uint16_t> b(Device::cuda, n), h(Device::cuda, n);
      rc::to_bf16(b.data() + off, dx.data() + off, m);
      rc::to_f16(h.data() + off, dx.data() + off, m);
      const auto gb = host(b), gh = host(h);
      std::size_t bad_b = 0, bad_h = 0;
      for (std::size_t i = off; i < n; ++i) {
        bad_b += gb[i] != want_b[i];
        bad_h += gh[i] != want_h[i];
      }
      std::cout << "[ parity   ] to_bf16/to_f16 n=" << n << " offset=" << off << " mismatches=" << bad_b << "/"
                << bad_h << "\n";
      EXPECT_EQ(bad_b, 0u);
      EXPECT_EQ(bad_h, 0u);
      rc::from_bf16(out.data() + off, b.data() + off, m);
      std::vector<float> got = host(out), want = back_b;
      std::fill_n(want.begin(), std::min(off, n), 0.0f);
      EXPECT_EQ(bit_mismatches("from_bf16 n=" + std::to_string(n) + " offset=" + std::to_string(off), got, want), 0u);
      rc::from_f16(out.data() + off, h.data() + off, m);
      got = host(out), want = back_h;
      std::fill_n(want.begin(), std::min(off, n), 0.0f);
      EXPECT_EQ(bit_mismatches("from_f16 n=" + std::to_string(n) + " offset=" + std::to_string(off), got, want), 0u);
    }
  }
  // Every 16-bit pattern back to float.
  std::vector<std::uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::uint16_t>(i);
  std::vector<float> want_b(all.size()), want_h(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    want_b[i] = from_bf16(bf16{all[i]});
    want_h[i] = from_f16(f16{all[i]});
  }
  DeviceArray<std::uint16_t> d = dev(all);
  DeviceArray<float> out(Device::cuda, all.size());
  rc::from_bf16(out.data(), d.data(), all.size());
  EXPECT_EQ(bit_mismatches("from_bf16 all patterns", host(out), want_b), 0u);
  rc::from_f16(out.data(), d.data(), all.size());
  EXPECT_EQ(bit_mismatches("from_f16 all patterns", host(out), want_h), 0u);
}

// ---- top-k --------------------------------------------------------------------------------------

enum class Data { normal, ties, zeros, specials };

std::vector<float> topk_input(std::size_t n, Data kind, std::uint64_t stream) {
  std::vector<float> v = normal_values(n, stream);
  switch (kind) {
    case Data::normal: break;
    case Data::ties:  // a handful of magnitudes, both signs: the threshold falls inside a tie
      for (float& x : v) x = std::round(x * 2.0f) / 2.0f;
      break;
    case Data::zeros:
      std::fill(v.begin(), v.end(), 0.0f);
      for (std::size_t i = 1; i < n; i += 3) v[i] = -0.0f;
      break;
    case Data::specials: {
      const float s[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::infinity(), -0.0f, 0.0f, 1e-40f,
                         -std::numeric_limits<float>::quiet_NaN()};
      for (std::size_t i = 0; i < n; i += 11) v[i] = s[(i / 11) % std::size(s)];
      break;
    }
  }
  return v;
}

const char* name_of(Data d) {
  switch (d) {
    case Data::normal: return "normal";
    case Data::ties: return "ties";
    case Data::zeros: return "zeros";
    case Data::specials: return "nan_inf";
  }
  return "?";
}

TEST(CudaReducers, TopKExactSelectionMatchesCpuBitForBit) {
  LC_REQUIRE_CUDA_DEVICE();
  rc::TopKScratch scratch;
  TopKScratch cpu_scratch;
  std::uint64_t stream = 100;
  for (const std::size_t n : {0ul, 1ul, 2ul, 13ul, 4099ul, 100003ul, 2000003ul})
    for (const Data kind : {Data::normal, Data::ties, Data::zeros, Data::specials})
      for (const double ratio : {0.0, 0.01, 0.5, 1.0})  // 0: a single element
        for (const bool ef : {false, true}) {
          if (n > 100003 && (kind == Data::zeros || ratio == 1.0)) continue;  // slow on the CPU side, nothing new
          const std::size_t k = ratio == 0.0 ? std::min<std::size_t>(1, n) : topk_count(n, ratio);
          const std::vector<float> x = topk_input(n, kind, ++stream);
          std::vector<float> residual = ef ? normal_values(n, ++stream, 0.1f) : std::vector<float>{};
          if (ef && kind == Data::ties)
            for (float& r : residual) r = std::round(r * 20.0f) / 2.0f;  // keep acc on the tie grid
          if (ef && kind == Data::zeros) std::fill(residual.begin(), residual.end(), 0.0f);
          DeviceArray<float> dx = dev(x), dr = dev(residual);
          DeviceArray<std::uint32_t> di(Device::cuda, std::max<std::size_t>(k, 1));
          DeviceArray<float> dv(Device::cuda, std::max<std::size_t>(k, 1));
          const std::size_t got = rc::topk_exact(di.data(), dv.data(), ef ? dr.data() : nullptr, dx.data(), n, k, scratch);
          std::vector<std::uint32_t> want_i(std::max<std::size_t>(k, 1));
          std::vector<float> want_v(std::max<std::size_t>(k, 1));
          const std::size_t want = topk_exact(x, residual, k, want_i, want_v, cpu_scratch);
          const std::string what = std::string("topk n=") + std::to_string(n) + " k=" + std::to_string(k) + " " +
                                   name_of(kind) + (ef ? " ef" : "");
          ASSERT_EQ(got, want) << what;
          const std::vector<std::uint32_t> gi = host(di, want);
          const std::vector<float> gv_all = host(dv, want);
          std::size_t bad_i = 0;
          for (std::size_t j = 0; j < want; ++j) bad_i += gi[j] != want_i[j];
          std::cout << "[ parity   ] " << what << " index mismatches=" << bad_i << "\n";
          EXPECT_EQ(bad_i, 0u) << what;
          EXPECT_EQ(bit_mismatches(what + " values", gv_all, std::vector<float>(want_v.begin(), want_v.begin() + want),
                                   /*arithmetic_nans=*/ef),
                    0u);
          if (ef) {
            EXPECT_EQ(bit_mismatches(what + " residual", host(dr), residual, /*arithmetic_nans=*/true), 0u);
          }
        }
}

TEST(CudaReducers, TopKUnalignedInputMatchesCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  // Buffers one float past a 16-byte boundary take the scalar paths of the histogram passes.
  const std::size_t n = 50001, k = topk_count(n, 0.02);
  const std::vector<float> x = topk_input(n + 1, Data::normal, 7);
  std::vector<float> residual = normal_values(n + 1, 8, 0.3f);
  DeviceArray<float> dx = dev(x), dr = dev(residual);
  DeviceArray<std::uint32_t> di(Device::cuda, k);
  DeviceArray<float> dv(Device::cuda, k);
  rc::TopKScratch scratch;
  rc::topk_exact(di.data(), dv.data(), dr.data() + 1, dx.data() + 1, n, k, scratch);
  std::vector<std::uint32_t> want_i(k);
  std::vector<float> want_v(k);
  TopKScratch cpu_scratch;
  topk_exact(std::span(x).subspan(1), std::span(residual).subspan(1), k, want_i, want_v, cpu_scratch);
  EXPECT_EQ(host(di), want_i);
  EXPECT_EQ(bit_mismatches("topk unaligned values", host(dv), want_v), 0u);
  EXPECT_EQ(bit_mismatches("topk unaligned residual", host(dr), residual), 0u);
}

TEST(CudaReducers, TopKDecodeMatchesCpuBitForBit) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const std::size_t n : {1ul, 37ul, 10007ul, 1000003ul})
    for (const std::size_t world : {1ul, 3ul, 8ul}) {
      // Each rank: distinct ascending indices (overlapping between ranks), random values.
      std::vector<std::size_t> counts(world);
      std::vector<std::uint32_t> gathered;
      for (std::size_t q = 0; q < world; ++q) {
        const std::uint64_t key = rng::key({rng::kTest, n, world, q});
        std::vector<std::uint32_t> idx;
        for (std::size_t i = 0; i < n; ++i)
          if (rng::uniform(key, i) < 0.3f || i == n - 1) idx.push_back(static_cast<std::uint32_t>(i));
        const std::vector<float> val = normal_values(idx.size(), 1000 * n + q);
        counts[q] = idx.size();
        for (const float v : val) gathered.push_back(std::bit_cast<std::uint32_t>(v));
        gathered.insert(gathered.end(), idx.begin(), idx.end());
      }
      DeviceArray<std::uint32_t> dg = dev(gathered);
      DeviceArray<float> out = dev(normal_values(n, 5));  // garbage: decode must zero it
      rc::topk_decode(out.data(), n, dg.data(), counts.data(), world);
      std::vector<float> want(n, 1.0f);
      topk_decode(gathered, counts, want);
      EXPECT_EQ(bit_mismatches("topk_decode n=" + std::to_string(n) + " world=" + std::to_string(world), host(out),
                               want),
                0u);
    }
}

// ---- 1-bit --------------------------------------------------------------------------------------

TEST(CudaReducers, OneBitEncodeDecodeMatchCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  DeviceArray<double> scratch(Device::cuda, rc::onebit_scratch_doubles());
  std::uint64_t stream = 500;
  for (const std::size_t n : {0ul, 1ul, 7ul, 8ul, 9ul, 1001ul, 65537ul, 1048579ul})
    for (const auto scale : {OneBitOptions::Scale::l2, OneBitOptions::Scale::mean_abs})
      for (const bool ef : {false, true})
        for (const std::size_t off : {0ul, 1ul}) {  // 1: unaligned x and error (scalar paths)
          const std::string what = "onebit n=" + std::to_string(n) + " " + name_of(scale) + (ef ? " ef" : "") +
                                   (off ? " unaligned" : "");
          std::vector<float> x = normal_values(n + off, ++stream, 0.01f);
          if (n > 20) x[off + 5] = 0.0f, x[off + 6] = -0.0f;  // sign(+-0) = +1
          std::vector<float> err = ef ? normal_values(n + off, ++stream, 0.003f) : std::vector<float>{};
          const std::size_t bytes = onebit_packed_bytes(n) + 3;  // 3 spare bytes: must come out zero
          // Scale first at an odd offset, as in the reducer's wire blocks.
          DeviceArray<std::uint8_t> wire(Device::cuda, 1 + 4 + bytes);
          DeviceArray<float> dx = dev(x), de = dev(err);
          rc::onebit_encode(wire.data() + 1, wire.data() + 5, bytes, ef ? de.data() + off : nullptr, dx.data() + off, n,
                            scale == OneBitOptions::Scale::mean_abs, scratch.data());
          std::vector<std::uint8_t> want_bits(bytes, 0xff);
          std::vector<float> want_err(err.begin() + (ef ? off : 0), err.end());
          const float want_scale =
              onebit_encode(std::span(x).subspan(off), want_err, want_bits, scale);
          const std::vector<std::uint8_t> got = host(wire);
          float got_scale;
          std::memcpy(&got_scale, got.data() + 1, 4);
          const double rel = want_scale == 0 ? std::abs(got_scale) : std::abs(got_scale - want_scale) / want_scale;
          std::cout << "[ parity   ] " << what << " scale rel diff=" << rel << "\n";
          EXPECT_LE(rel, 1e-6) << what;
          std::size_t bad_bits = 0;
          for (std::size_t b = 0; b < bytes; ++b) bad_bits += got[5 + b] != want_bits[b];
          std::cout << "[ parity   ] " << what << " packed byte mismatches=" << bad_bits << " of " << bytes << "\n";
          EXPECT_EQ(bad_bits, 0u) << what;
          if (ef) {
            const std::vector<float> all = host(de);
            const std::vector<float> got_err(all.begin() + static_cast<std::ptrdiff_t>(off), all.end());
            EXPECT_LE(max_diff(what + " residual", got_err, want_err), 4e-7 * std::max(1.0f, want_scale)) << what;
          }

          // Decode from the CPU's own scale and bits (uploaded): exact.
          std::vector<std::uint8_t> block(5 + bytes);
          std::memcpy(block.data() + 1, &want_scale, 4);
          std::copy(want_bits.begin(), want_bits.end(), block.begin() + 5);
          DeviceArray<std::uint8_t> dblock = dev(block);
          std::vector<float> want_out = normal_values(n + off, ++stream);
          DeviceArray<float> out = dev(want_out);
          rc::onebit_decode(out.data() + off, n, dblock.data() + 5, dblock.data() + 1, 1.0f, false);
          onebit_decode(want_bits, want_scale, std::span(want_out).subspan(off));
          EXPECT_EQ(bit_mismatches(what + " decode", host(out), want_out), 0u);
          rc::onebit_decode(out.data() + off, n, dblock.data() + 5, dblock.data() + 1, 3.0f, true);
          onebit_decode_add(want_bits, want_scale / 3.0f, std::span(want_out).subspan(off));
          EXPECT_EQ(bit_mismatches(what + " decode_add /3", host(out), want_out), 0u);
        }
}

// ---- PowerSGD -----------------------------------------------------------------------------------

TEST(CudaReducers, PowerSgdOrthogonalizeMatchesCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  struct Case {
    std::size_t rows, cols;
  };
  std::uint64_t stream = 900;
  for (const Case c : {Case{1, 1}, Case{7, 2}, Case{100, 1}, Case{1000, 2}, Case{3, 3}, Case{257, 3}, Case{1000, 4},
                       Case{64, 16}, Case{30522, 4}, Case{513, 32}})
    for (const bool zero_column : {false, true}) {
      std::vector<float> a = normal_values(c.rows * c.cols, ++stream);
      if (zero_column)  // a zero column: Gram-Schmidt keeps zeros, Householder takes tau = 0
        for (std::size_t l = 0; l < c.rows; ++l) a[l * c.cols + c.cols / 2] = 0.0f;
      for (const float eps : {0.0f, 1e-8f}) {
        DeviceArray<float> d = dev(a);
        rc::orthogonalize_one(d.data(), c.rows, c.cols, eps);
        std::vector<float> want = a;
        powersgd::orthogonalize(want, c.rows, c.cols, eps);
        const std::string what = "orthogonalize " + std::to_string(c.rows) + "x" + std::to_string(c.cols) +
                                 (zero_column ? " zero column" : "") + " eps=" + std::to_string(eps);
        // Orthonormal columns: entries are O(1/sqrt(rows)); the sums differ in order only.
        EXPECT_LE(max_diff(what, host(d), want), 2e-5) << what;
      }
    }
}

TEST(CudaReducers, PowerSgdProductsMatchCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  struct Case {
    std::size_t rows, cols, r;
  };
  std::uint64_t stream = 1300;
  for (const Case c : {Case{1, 1, 1}, Case{5, 3, 2}, Case{64, 48, 4}, Case{257, 129, 3}, Case{1024, 768, 8}}) {
    const std::string shape = std::to_string(c.rows) + "x" + std::to_string(c.cols) + " r=" + std::to_string(c.r);
    const std::vector<float> m = normal_values(c.rows * c.cols, ++stream);
    const std::vector<float> q = normal_values(c.cols * c.r, ++stream);
    const std::vector<float> p0 = normal_values(c.rows * c.r, ++stream);
    DeviceArray<float> dm = dev(m), dq = dev(q), dp(Device::cuda, c.rows * c.r), dp0 = dev(p0);
    std::vector<float> qt(c.r * c.cols), row(c.cols), mm = m;
    // P = M Q
    rc::compute_p(dp.data(), dm.data(), dq.data(), c.rows, c.cols, c.r);
    std::vector<float> p(c.rows * c.r);
    powersgd::transpose(q, c.cols, c.r, qt);
    powersgd::compute_p(mm, {}, c.rows, c.cols, qt, c.r, p);
    EXPECT_LE(max_diff("compute_p " + shape, host(dp), p), 1e-4 * std::sqrt(static_cast<double>(c.cols))) << shape;
    // Q = M^T P
    DeviceArray<float> dq2(Device::cuda, c.cols * c.r);
    rc::compute_q(dq2.data(), dm.data(), dp0.data(), c.rows, c.cols, c.r);
    powersgd::compute_qt(m, c.rows, c.cols, p0, c.r, qt);
    std::vector<float> q2(c.cols * c.r);
    powersgd::transpose(qt, c.r, c.cols, q2);
    EXPECT_LE(max_diff("compute_q " + shape, host(dq2), q2), 1e-4 * std::sqrt(static_cast<double>(c.rows))) << shape;
    // M = P Q^T, error = M - P Q^T
    std::vector<float> err(m.size()), want_m = m;
    DeviceArray<float> derr(Device::cuda, m.size()), dm2 = dev(m);
    rc::decompress(dm2.data(), derr.data(), dp0.data(), dq.data(), c.rows, c.cols, c.r);
    powersgd::transpose(q, c.cols, c.r, qt);
    powersgd::decompress(want_m, err, c.rows, c.cols, p0, qt, c.r, row);
    const double tol = 1e-5 * static_cast<double>(c.r) * 4;
    EXPECT_LE(max_diff("decompress " + shape, host(dm2), want_m), tol) << shape;
    EXPECT_LE(max_diff("decompress error " + shape, host(derr), err), tol) << shape;
  }
}

// ---- whole reducers at world size 1 ---------------------------------------------------------------

// A bucket of several tensors: matrices PowerSGD compresses (two of one shape), ones it does not,
// and 1-D tensors.
BucketLayout mixed_bucket() {
  BucketLayout b;
  b.id = 0;
  const std::pair<std::size_t, std::size_t> shapes[] = {{64, 48}, {48, 1}, {64, 48}, {3, 2}, {200, 33}, {17, 1}};
  for (const auto& [rows, cols] : shapes) {
    b.tensors.push_back(TensorShape{b.size, rows, cols});
    b.size += rows * cols;
  }
  return b;
}

// Runs `steps` reduce() calls of the same reducer configuration on the CPU and on the device
// (world size 1) on the same gradients, and compares the outputs and every state tensor.
template <typename Make>
void compare_reducers(const std::string& what, Make make, int steps, double tol) {
  const BucketLayout bucket = mixed_bucket();
  const std::vector<BucketLayout> buckets{bucket};
  std::unique_ptr<Reducer> cpu = make(Device::cpu), gpu = make(Device::cuda);
  cpu->prepare(buckets);
  gpu->prepare(buckets);
  SoloCommunicator host_comm(Device::cpu), dev_comm(Device::cuda);
  for (int step = 0; step < steps; ++step) {
    std::vector<float> want = normal_values(bucket.size, 2000 + static_cast<std::uint64_t>(step), 0.01f);
    DeviceArray<float> data = dev(want);
    cpu->reduce(want, bucket, step, host_comm);
    gpu->reduce(data.span(), bucket, step, dev_comm);
    const std::string at = what + " step " + std::to_string(step);
    if (tol == 0) {
      EXPECT_EQ(bit_mismatches(at + " output", host(data), want), 0u);
    } else {
      EXPECT_LE(max_diff(at + " output", host(data), want), tol) << at;
    }
    const std::vector<StateTensor> cs = cpu->state(), gs = gpu->state();
    ASSERT_EQ(cs.size(), gs.size()) << at;
    for (std::size_t i = 0; i < cs.size(); ++i) {
      ASSERT_EQ(cs[i].name, gs[i].name);
      EXPECT_EQ(gs[i].device, Device::cuda) << gs[i].name;
      std::vector<float> g(gs[i].data.size());
      copy_bytes(g.data(), Device::cpu, gs[i].data.data(), Device::cuda, g.size() * sizeof(float));
      const std::vector<float> c(cs[i].data.begin(), cs[i].data.end());
      if (tol == 0) {
        EXPECT_EQ(bit_mismatches(at + " " + cs[i].name, g, c), 0u);
      } else {
        EXPECT_LE(max_diff(at + " " + cs[i].name, g, c), tol) << at << " " << cs[i].name;
      }
    }
    EXPECT_EQ(gpu->stats().payload_bytes(), cpu->stats().payload_bytes()) << at;
  }
}

TEST(CudaReducers, DenseReduceMatchesCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const DType wire : {DType::f32, DType::bf16, DType::f16})
    compare_reducers(std::string("dense ") + name_of(wire),
                     [&](Device d) { return std::make_unique<DenseReducer>(wire, d); }, 2, 0);
}

TEST(CudaReducers, TopKReduceMatchesCpuBitForBit) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const double ratio : {0.01, 0.3})
    for (const bool ef : {false, true})
      compare_reducers("topk " + std::to_string(ratio) + (ef ? " ef" : ""),
                       [&](Device d) {
                         return std::make_unique<TopKReducer>(
                             TopKOptions{.ratio = ratio, .error_feedback = ef, .warmup_steps = 1, .device = d});
                       },
                       4, 0);
}

TEST(CudaReducers, OneBitReduceMatchesCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const auto scale : {OneBitOptions::Scale::l2, OneBitOptions::Scale::mean_abs})
    for (const bool ef : {false, true})
      compare_reducers(std::string("onebit ") + name_of(scale) + (ef ? " ef" : ""),
                       [&](Device d) {
                         return std::make_unique<OneBitReducer>(
                             OneBitOptions{.warmup_steps = 1, .error_feedback = ef, .scale = scale, .device = d});
                       },
                       4, 1e-8);  // values ~1e-2: scales equal to float rounding
}

TEST(CudaReducers, PowerSgdReduceMatchesCpu) {
  LC_REQUIRE_CUDA_DEVICE();
  for (const int rank : {1, 2, 4})
    for (const bool warm : {true, false})
      compare_reducers("powersgd rank " + std::to_string(rank) + (warm ? " warm" : " cold"),
                       [&](Device d) {
                         return std::make_unique<PowerSgdReducer>(PowerSgdOptions{
                             .rank = rank, .start_iter = 1, .warm_start = warm, .seed = 3, .device = d});
                       },
                       4, 2e-6);  // gradients ~1e-2
}

// ---- refusals (no device needed: they fire before any device work) --------------------------------

TEST(CudaReducers, SampledTopKIsRejectedOnCuda) {
  EXPECT_THROW(TopKReducer(TopKOptions{.selection = TopKOptions::Selection::sampled, .device = Device::cuda}), Error);
}

TEST(CudaReducers, CommunicatorMemoryMustMatchTheReducer) {
  const BucketLayout bucket = flat_bucket(16);
  std::vector<float> data(16, 1.0f);
  SoloCommunicator host_comm(Device::cpu);
  TopKReducer topk(TopKOptions{.device = Device::cuda});
  try {
    topk.reduce(data, bucket, 0, host_comm);
    ADD_FAILURE() << "a cuda reducer accepted a host communicator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("takes cpu buffers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace laconic
