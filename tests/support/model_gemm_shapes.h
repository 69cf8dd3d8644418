// The CPU GEMMs one training step of each model issues through ops::gemm (row-major, packed): the
// GPT of gpt_fortunes, BERT-small (the cross_dc recipes' width) and the 784-512-256-10 MLP, at
// tests/bench/bert_step_bench.cpp's batch sizes, with how many calls of each one step makes. Used
// by the GEMM parity test (tests/ops/ops_test.cpp) and the GEMM library comparison
// (tests/bench/gemm_libraries_bench.cpp). Recorded by logging ops::gemm's arguments over one step
// of each model; a model whose layers change shape should be recorded anew.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace laconic::testing {

struct GemmShape {
  int m, n, k;
  bool ta, tb;  // A stored [k, m] (ta) or [m, k]; B stored [n, k] (tb) or [k, n]
  float beta;
  int per_step;  // calls in one training step
};

inline const std::vector<GemmShape> kGpt = {
    {128, 32, 128, true, false, 0, 768},  {128, 32, 128, false, false, 0, 768}, {128, 128, 32, false, true, 0, 768},
    {768, 192, 2048, true, false, 1, 4},  {576, 192, 2048, true, false, 1, 4},  {2048, 768, 192, false, true, 0, 4},
    {2048, 768, 192, false, false, 0, 4}, {2048, 576, 192, false, true, 0, 4},  {2048, 192, 768, false, true, 0, 4},
    {2048, 192, 768, false, false, 0, 4}, {2048, 192, 576, false, false, 0, 4}, {2048, 192, 192, false, true, 0, 4},
    {2048, 192, 192, false, false, 0, 4}, {192, 768, 2048, true, false, 1, 4},  {192, 192, 2048, true, false, 1, 4},
    {4000, 192, 2048, true, false, 1, 1}, {2048, 4000, 192, false, true, 0, 1}, {2048, 192, 4000, false, false, 0, 1},
};
inline const std::vector<GemmShape> kBert = {
    {128, 32, 128, true, false, 0, 512},  {128, 32, 128, false, false, 0, 512}, {128, 128, 32, false, true, 0, 512},
    {512, 128, 4096, true, false, 1, 2},  {4096, 512, 128, false, true, 0, 2},  {4096, 512, 128, false, false, 0, 2},
    {4096, 384, 128, false, true, 0, 2},  {4096, 128, 512, false, true, 0, 2},  {4096, 128, 512, false, false, 0, 2},
    {4096, 128, 384, false, false, 0, 2}, {4096, 128, 128, false, true, 0, 2},  {4096, 128, 128, false, false, 0, 2},
    {384, 128, 4096, true, false, 1, 2},  {128, 512, 4096, true, false, 1, 2},  {128, 128, 4096, true, false, 1, 2},
    {608, 4000, 128, false, true, 0, 1},  {608, 128, 4000, false, false, 0, 1}, {608, 128, 128, false, true, 0, 1},
    {608, 128, 128, false, false, 0, 1},  {4000, 128, 608, true, false, 1, 1},  {128, 128, 608, true, false, 1, 1},
};
inline const std::vector<GemmShape> kMlp = {
    {512, 784, 256, true, false, 1, 1},  {256, 512, 784, false, true, 0, 1}, {256, 512, 256, true, false, 1, 1},
    {256, 512, 256, false, false, 0, 1}, {256, 256, 512, false, true, 0, 1}, {256, 256, 10, false, false, 0, 1},
    {256, 10, 256, false, true, 0, 1},   {10, 256, 256, true, false, 1, 1},
};

// C = op(A) op(B) + beta C0 (alpha 1) against the same product in double: the largest
// |C - C_ref| / (sum_k |a b| + |beta c0|) over 64 rows spread over the output (the first and the
// last among them) and every column. Float GEMMs measured here stay below 5e-7 on every shape
// (tests/bench/gemm_libraries.sh prints it per library); the parity test holds them to 1e-5.
inline double gemm_error_against_double(const GemmShape& s, const std::vector<float>& a, const std::vector<float>& b,
                                        const std::vector<float>& c0, const std::vector<float>& c) {
  // op(B) as [k, n] rows, so each checked row of C is a sweep over contiguous rows of B.
  std::vector<float> bk(static_cast<std::size_t>(s.k) * s.n);
  for (int p = 0; p < s.k; ++p)
    for (int j = 0; j < s.n; ++j)
      bk[static_cast<std::size_t>(p) * s.n + j] =
          b[s.tb ? static_cast<std::size_t>(j) * s.k + p : static_cast<std::size_t>(p) * s.n + j];
  std::vector<double> sum(s.n), mag(s.n);
  double worst = 0;
  const int stride = std::max(1, (s.m - 1) / 63);
  for (int i = 0; i < s.m; i = (i + 1 == s.m || i + stride < s.m) ? i + stride : s.m - 1) {
    for (int j = 0; j < s.n; ++j) {
      sum[j] = s.beta * static_cast<double>(c0[static_cast<std::size_t>(i) * s.n + j]);
      mag[j] = std::fabs(sum[j]);
    }
    for (int p = 0; p < s.k; ++p) {
      const double x = a[s.ta ? static_cast<std::size_t>(p) * s.m + i : static_cast<std::size_t>(i) * s.k + p];
      const float* row = bk.data() + static_cast<std::size_t>(p) * s.n;
      for (int j = 0; j < s.n; ++j) {
        sum[j] += x * row[j];
        mag[j] += std::fabs(x * row[j]);
      }
    }
    for (int j = 0; j < s.n; ++j)
      worst = std::max(worst, std::fabs(c[static_cast<std::size_t>(i) * s.n + j] - sum[j]) / std::max(mag[j], 1e-30));
  }
  return worst;
}
}  // namespace laconic::testing
