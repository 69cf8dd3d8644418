// Which library should run Laconic's CPU GEMMs: every GEMM shape one training step of each model
// issues (the GPT of gpt_fortunes, BERT-small, the 784-512-256-10 MLP; shapes and counts per step
// as the models call ops::gemm: row-major, packed, the transposes they use, beta 0 and 1), timed
// on each library built in, at --threads threads, beside the measured arithmetic peak
// (core/ops/cpu_peak.h) in the same run. Each library's results are checked against a
// double-precision product (max |error| / sum |a||b| over the output, <= 1e-5): a library that
// computes wrong results on this CPU is reported WRONG beside its times.
//
//   gemm_libraries_bench [--threads N] [--reps N] [--model gpt|bert|mlp|all] [--library NAME] [--shapes]
//
// --library runs only the libraries whose name starts with NAME; --shapes adds a row per shape.
// Exit status 1 when a library's results are wrong (error above 1e-5), 2 for a bad flag.
//
// Libraries (each where this build found it; tests/bench/gemm_libraries.sh runs the comparison):
//   openblas  cblas_sgemm, with whatever kernel OPENBLAS_CORETYPE (or detection) selects
//   blis      bli_sgemm (Debian's libblis, OpenMP build)
//   onednn    dnnl_sgemm (oneDNN, the library behind PyTorch's and OpenVINO's CPU kernels)
//   libxsmm   libxsmm's JIT kernels (libxsmm_smmdispatch), on the shapes it generates code for
// Output: one row per library and model (ms of GEMM per step, GFLOP/s, % of the fp32 peak).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/ops/cpu_peak.h"
#include "core/timer.h"
#include "tests/support/model_gemm_shapes.h"
#if LACONIC_BENCH_BLIS
#include <blis.h>
#endif
#if LACONIC_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#if LACONIC_BENCH_XSMM
#include <libxsmm.h>
#endif
#include <omp.h>

namespace {

using Shape = laconic::testing::GemmShape;
using laconic::testing::kBert;
using laconic::testing::kGpt;
using laconic::testing::kMlp;

// C[m,n] = op(A) op(B) + beta C, row-major and packed: A stored [m,k] or (ta) [k,m]; B [k,n] or (tb) [n,k].
using Gemm = std::function<bool(const Shape&, const float*, const float*, float*)>;

struct Library {
  std::string name;
  Gemm gemm;  // false: the library has no kernel for this shape
};

std::vector<Library> libraries() {
  std::vector<Library> libs;
  libs.push_back({std::string("openblas ") + openblas_get_corename(),
                  [](const Shape& s, const float* a, const float* b, float* c) {
                    cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.m,
                                s.n, s.k, 1.0f, a, s.ta ? s.m : s.k, b, s.tb ? s.k : s.n, s.beta, c, s.n);
                    return true;
                  }});
#if LACONIC_BENCH_BLIS
  libs.push_back({"blis", [](const Shape& s, const float* a, const float* b, float* c) {
                    float one = 1.0f, beta = s.beta;
                    // Row-major: element (i, j) of a stored [r, cols] matrix at i * cols + j.
                    bli_sgemm(s.ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s.tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s.m,
                              s.n, s.k, &one, const_cast<float*>(a), s.ta ? s.m : s.k, 1, const_cast<float*>(b),
                              s.tb ? s.k : s.n, 1, &beta, c, s.n, 1);
                    return true;
                  }});
#endif
#if LACONIC_BENCH_DNNL
  libs.push_back({"onednn", [](const Shape& s, const float* a, const float* b, float* c) {
                    return dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, s.ta ? s.m : s.k, b,
                                      s.tb ? s.k : s.n, s.beta, c, s.n) == dnnl_success;
                  }});
#endif
#if LACONIC_BENCH_XSMM
  libs.push_back({"libxsmm", [](const Shape& s, const float* a, const float* b, float* c) {
                    // Column-major: row-major C = op(A) op(B) is column-major C' = op(B)' op(A)', so B plays A.
                    const int flags = (s.tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (s.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
                    const float alpha = 1.0f, beta = s.beta;
                    const libxsmm_blasint lda = s.tb ? s.k : s.n, ldb = s.ta ? s.m : s.k, ldc = s.n;
                    const auto kernel =
                        libxsmm_smmdispatch(s.n, s.m, s.k, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
                    if (!kernel) return false;
                    kernel(b, a, c);
                    return true;
                  }});
#endif
  return libs;
}

constexpr double kMaxError = 1e-5;  // as the parity test (tests/ops/ops_test.cpp)

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 20;
  std::string model = "all", only;
  bool per_shape = false;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "error: %s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--threads")
      threads = std::atoi(value().c_str());
    else if (s == "--reps")
      reps = std::atoi(value().c_str());
    else if (s == "--model")
      model = value();
    else if (s == "--shapes")
      per_shape = true;
    else if (s == "--library")
      only = value();
    else {
      std::fprintf(stderr,
                   "usage: gemm_libraries_bench [--threads N] [--reps N] [--model gpt|bert|mlp|all] [--library NAME] "
                   "[--shapes]\n");
      return 2;
    }
  }
  if (threads < 1 || reps < 1 || (model != "all" && model != "gpt" && model != "bert" && model != "mlp")) {
    std::fprintf(stderr, "error: expected --threads >= 1, --reps >= 1, --model gpt|bert|mlp|all\n");
    return 2;
  }
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
#if LACONIC_BENCH_BLIS
  bli_thread_set_num_threads(threads);
#endif
  const auto peak = laconic::ops::cpu::measure_cpu_peak(threads, 0.3);
  std::printf("# peak (%s, %d threads): fp32 %.1f GFLOP/s, bf16 dot %.1f GFLOP/s\n", peak.isa.c_str(), threads,
              peak.fp32_total_gflops, peak.bf16_total_gflops);
  std::printf("# library model threads gemm_ms_per_step GFLOP/s pct_of_fp32_peak max_error shapes_without_kernel\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const std::vector<std::pair<std::string, const std::vector<Shape>*>> models = {
      {"gpt", &kGpt}, {"bert", &kBert}, {"mlp", &kMlp}};
  bool all_right = true;
  for (const auto& lib : libraries()) {
    if (!only.empty() && lib.name.rfind(only, 0) != 0) continue;
    for (const auto& [name, shapes] : models) {
      if (model != "all" && model != name) continue;
      double step_s = 0, step_flops = 0, worst = 0;
      int missing = 0;
      std::vector<std::string> rows;
      for (const Shape& s : *shapes) {
        std::vector<float> a(static_cast<std::size_t>(s.m) * s.k), b(static_cast<std::size_t>(s.k) * s.n),
            c0(static_cast<std::size_t>(s.m) * s.n), c;
        for (auto* v : {&a, &b, &c0})
          for (float& x : *v) x = u(rng);
        c = c0;
        if (!lib.gemm(s, a.data(), b.data(), c.data())) {
          ++missing;
          continue;
        }
        worst = std::max(worst, laconic::testing::gemm_error_against_double(s, a, b, c0, c));
        // Time enough calls for ~20 ms per repetition; the best repetition's mean per call.
        const double flops = 2.0 * s.m * s.n * s.k;
        const int calls = std::max(1, static_cast<int>(2e-2 * peak.fp32_total_gflops * 1e9 / flops));
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const laconic::Stopwatch clock;
          for (int i = 0; i < calls; ++i) lib.gemm(s, a.data(), b.data(), c.data());
          best = std::min(best, clock.seconds() / calls);
        }
        step_s += best * s.per_step;
        step_flops += flops * s.per_step;
        char row[200];
        std::snprintf(row, sizeof row, "#   %s %s %dx%dx%d %c%c beta=%g: %.1f GFLOP/s (%.0f%%)", lib.name.c_str(),
                      name.c_str(), s.m, s.n, s.k, s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.beta, flops / best / 1e9,
                      100.0 * flops / best / 1e9 / peak.fp32_total_gflops);
        rows.emplace_back(row);
      }
      const double gflops = step_flops / step_s / 1e9;
      std::printf("%s\t%s\t%d\t%.2f\t%.1f\t%.1f\t%.1e\t%d\n", lib.name.c_str(), name.c_str(), threads, step_s * 1e3,
                  gflops, 100.0 * gflops / peak.fp32_total_gflops, worst, missing);
      if (per_shape)
        for (const auto& r : rows) std::printf("%s\n", r.c_str());
      if (!(worst <= kMaxError)) {
        std::printf("# WRONG: %s computes %s's GEMMs with error %.1e (> %.0e) on this CPU\n", lib.name.c_str(),
                    name.c_str(), worst, kMaxError);
        all_right = false;
      }
    }
  }
  return all_right ? 0 : 1;
}
