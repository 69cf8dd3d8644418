#include "core/ops/attention_cpu.h"

#include <algorithm>
#include <cstring>
#include <cstddef>
#if defined(_OPENMP)
#include <omp.h>

#include "core/ops/defer_signals.h"
#endif

#include "core/check.h"
#include "core/ops/vec_math.h"

namespace laconic::ops::cpu {

namespace {

constexpr int kBlock = 64;  // scores computed kBlock keys at a time, their sums held in registers

// 16 floats in one register (AVX-512; GCC splits it where the target has narrower ones).
// The products below are compiled with fp-contract=fast, so acc += a * b is one fused multiply-add
// as in the GEMM library's kernels (ISO C++ mode contracts nothing); the softmax (vec_math.h) is
// left as ops_cpu.cpp compiles it, so its bits are the unfused path's.
#define LACONIC_CONTRACT __attribute__((optimize("fp-contract=fast")))
using v16 = float __attribute__((vector_size(64)));
constexpr int kW = 16;

inline v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }

std::size_t padded(int seq) { return (static_cast<std::size_t>(seq) + kBlock - 1) / kBlock * kBlock; }

// xt[d, u] = x[u, d] for one head's [T, D], rows of xt padded with zeros to padded(T).
void transpose(float* xt, const float* x, int seq, int head_dim) {
  const std::size_t tp = padded(seq);
  for (int d = 0; d < head_dim; ++d) {
    float* row = xt + d * tp;
    for (int u = 0; u < seq; ++u) row[u] = x[static_cast<std::size_t>(u) * head_dim + d];
    std::fill(row + seq, row + tp, 0.0f);
  }
}

// Query rows go kRows at a time: one pass over a key or value row serves all of them, and their
// sums are independent chains (a single row's would wait on each multiply-add's latency).
constexpr int kRows = 4;

// out[i][u] = sum_d a[i][d] xt[d, u] for the kRows rows i and u < w (rounded up to kBlock), out's
// rows tp apart; each a chain of fused multiply-adds in d order: a GEMM's inner product over k.
LACONIC_CONTRACT void row_products(float* out, const float* const* a, const float* xt, int w, int head_dim,
                                   std::size_t tp) {
  for (int u0 = 0; u0 < w; u0 += kBlock) {
    v16 acc[kRows][4] = {};
    const float* x = xt + u0;
    for (int d = 0; d < head_dim; ++d, x += tp) {
      const v16 x0 = load(x), x1 = load(x + kW), x2 = load(x + 2 * kW), x3 = load(x + 3 * kW);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        const float ad = a[i][d];
        acc[i][0] += ad * x0;
        acc[i][1] += ad * x1;
        acc[i][2] += ad * x2;
        acc[i][3] += ad * x3;
      }
    }
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < 4; ++j) store(out + i * tp + u0 + j * kW, acc[i][j]);
  }
}

// y[i][:D] = sum_{u < w} c[i][u] x[u, :D] in u order, for the kRows rows i (c's rows tp apart).
// D a multiple of 16 fixed at compile time keeps y in registers; D = 0 takes head_dim at run time.
template <int D>
LACONIC_CONTRACT void weighted_rows(float* const* y, const float* c, std::size_t tp, const float* x, int w,
                                   int head_dim) {
  if constexpr (D > 0) {
    constexpr int n = D / kW;
    v16 acc[kRows][n] = {};
    for (int u = 0; u < w; ++u) {
      const float* xu = x + static_cast<std::size_t>(u) * D;
      v16 xv[n];
      for (int j = 0; j < n; ++j) xv[j] = load(xu + j * kW);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        const float cu = c[i * tp + u];
        for (int j = 0; j < n; ++j) acc[i][j] += cu * xv[j];
      }
    }
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < n; ++j) store(y[i] + j * kW, acc[i][j]);
  } else {
    for (int i = 0; i < kRows; ++i) {
      float* yi = y[i];
      std::fill(yi, yi + head_dim, 0.0f);
      for (int u = 0; u < w; ++u) {
        const float cu = c[i * tp + u];
        const float* xu = x + static_cast<std::size_t>(u) * head_dim;
        for (int j = 0; j < head_dim; ++j) yi[j] += cu * xu[j];
      }
    }
  }
}

// dk[u, :] += s[i][u] q[i][:] and dv[u, :] += p[i][u] g[i][:] for u < w, rows i in order (the
// rank-1 updates of kRows query rows; s and p rows tp apart).
template <int D>
LACONIC_CONTRACT void rank1_updates(float* dk, float* dv, const float* s, const float* p, std::size_t tp,
                                    const float* const* q, const float* const* g, int w, int head_dim) {
  if constexpr (D > 0) {
    constexpr int n = D / kW;
    v16 qv[kRows][n], gv[kRows][n];  // in registers (a store to dk could alias q's memory)
    for (int i = 0; i < kRows; ++i)
      for (int j = 0; j < n; ++j) {
        qv[i][j] = load(q[i] + j * kW);
        gv[i][j] = load(g[i] + j * kW);
      }
    for (int u = 0; u < w; ++u) {
      float* dku = dk + static_cast<std::size_t>(u) * D;
      float* dvu = dv + static_cast<std::size_t>(u) * D;
      for (int j = 0; j < n; ++j) {
        v16 a = load(dku + j * kW), b = load(dvu + j * kW);
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
          a += s[i * tp + u] * qv[i][j];
          b += p[i * tp + u] * gv[i][j];
        }
        store(dku + j * kW, a);
        store(dvu + j * kW, b);
      }
    }
  } else {
    for (int u = 0; u < w; ++u) {
      float* dku = dk + static_cast<std::size_t>(u) * head_dim;
      float* dvu = dv + static_cast<std::size_t>(u) * head_dim;
      for (int i = 0; i < kRows; ++i) {
        const float su = s[i * tp + u], pu = p[i * tp + u];
        for (int j = 0; j < head_dim; ++j) dku[j] += su * q[i][j];
        for (int j = 0; j < head_dim; ++j) dvu[j] += pu * g[i][j];
      }
    }
  }
}

void check(const AttentionShape& s) {
  LC_CHECK(s.bh >= 0 && s.seq > 0 && s.head_dim > 0, "attention: bh=", s.bh, " seq=", s.seq, " head_dim=", s.head_dim);
}

// One head's [T, D] rows, grouped kRows at a time. A group past the last row takes a row of zeros
// as its input and a row of scratch as its output: with zero probabilities and score gradients it
// changes no key or value gradient (a multiply-add of 0 leaves a sum as it is).
struct Group {
  int t0 = 0, rows = 0;  // rows real ones from t0
  int w[kRows] = {};     // keys each row sees
  int wmax = 0;          // keys any row sees (columns computed)
  const float* in[kRows] = {};
  const float* in2[kRows] = {};
  float* out[kRows] = {};

  Group(int first, const AttentionShape& sh) : t0(first), rows(std::min(kRows, sh.seq - first)) {
    wmax = sh.causal ? t0 + rows : sh.seq;
    for (int i = 0; i < kRows; ++i) w[i] = sh.causal && i < rows ? t0 + i + 1 : wmax;
  }
  // in[i] = x + row (t0 + i) * dim, or `zeros`; likewise in2 from x2, out from y or `sink`.
  void rows_of(const float* x, const float* x2, float* y, int dim, const float* zeros, float* sink) {
    for (int i = 0; i < kRows; ++i) {
      const std::size_t at = static_cast<std::size_t>(t0 + i) * dim;
      in[i] = i < rows ? x + at : zeros;
      in2[i] = i < rows && x2 ? x2 + at : zeros;
      out[i] = i < rows ? y + at : sink;
    }
  }
};

// Scratch: kt, vt [D, tp]; the score (or probability) rows and their gradients [kRows, tp]; a row
// of zeros and a sink [D].
struct Scratch {
  float *kt, *vt, *s, *ds, *zeros, *sink;
  Scratch(float* base, const AttentionShape& sh) {
    const std::size_t tp = padded(sh.seq), d = static_cast<std::size_t>(sh.head_dim);
    kt = base;
    vt = kt + d * tp;
    s = vt + d * tp;
    ds = s + kRows * tp;
    zeros = ds + kRows * tp;
    sink = zeros + d;
    std::fill(zeros, zeros + d, 0.0f);
  }
  static std::size_t floats(const AttentionShape& sh) {
    return padded(sh.seq) * (2 * static_cast<std::size_t>(sh.head_dim) + 2 * kRows) + 2 * sh.head_dim;
  }
};

// The group's scores scale * q_i k^T into s (rows tp apart), every row over wmax keys.
void scores(float* s, const Group& g, const float* kt, const AttentionShape& sh, std::size_t tp) {
  row_products(s, g.in, kt, g.wmax, sh.head_dim, tp);
  const float scale = sh.scale;  // a local: s[u] could alias sh
  for (int i = 0; i < kRows; ++i)
    for (int u = 0; u < g.wmax; ++u) s[i * tp + u] *= scale;
}

// Calls f(first, last, scratch) on sh.threads threads, each with a contiguous share of the heads
// and its own slice of the scratch.
template <typename F>
void split_heads_over_threads(const AttentionShape& sh, float* scratch, F&& f) {
  const int threads = std::max(1, std::min(sh.threads, sh.bh));
#if defined(_OPENMP)
  if (threads > 1) {
    const DeferSignals deferred;  // the team may be oneDNN's, or become it
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      f(static_cast<int>(static_cast<long>(sh.bh) * t / n), static_cast<int>(static_cast<long>(sh.bh) * (t + 1) / n),
        scratch + t * Scratch::floats(sh));
    }
    return;
  }
#endif
  (void)threads;
  f(0, sh.bh, scratch);
}

template <int D>
void forward_heads(float* out, float* row_max, float* row_inv, const float* q, const float* k, const float* v,
                   const AttentionShape& sh, float* scratch, int first, int last) {
  const int dim = D ? D : sh.head_dim;
  const std::size_t tp = padded(sh.seq), td = static_cast<std::size_t>(sh.seq) * dim;
  Scratch sc(scratch, sh);
  for (int h = first; h < last; ++h) {
    const std::size_t o = h * td;
    transpose(sc.kt, k + o, sh.seq, dim);
    for (int t0 = 0; t0 < sh.seq; t0 += kRows) {
      Group g(t0, sh);
      g.rows_of(q + o, nullptr, out + o, dim, sc.zeros, sc.sink);
      scores(sc.s, g, sc.kt, sh, tp);
      for (int i = 0; i < kRows; ++i) {
        float* si = sc.s + i * tp;
        const vec::SoftmaxStats st = vec::softmax_row(si, si, g.w[i]);  // as the unfused softmax kernels
        if (i < g.rows) {
          const std::size_t r = h * static_cast<std::size_t>(sh.seq) + t0 + i;
          row_max[r] = st.max;
          row_inv[r] = st.inv;
        }
        std::fill(si + g.w[i], si + g.wmax, 0.0f);  // the masked keys: weight 0
      }
      weighted_rows<D>(g.out, sc.s, tp, v + o, g.wmax, dim);
    }
  }
}

template <int D>
void backward_heads(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                    const float* v, const float* row_max, const float* row_inv, const AttentionShape& sh,
                    float* scratch, int first, int last) {
  const int seq = sh.seq, dim = D ? D : sh.head_dim;
  const float scale = sh.scale;
  const std::size_t tp = padded(seq), td = static_cast<std::size_t>(seq) * dim;
  Scratch sc(scratch, sh);
  const int full = seq / vec::kLanes * vec::kLanes;
  for (int h = first; h < last; ++h) {
    const std::size_t o = h * td;
    transpose(sc.kt, k + o, seq, dim);
    transpose(sc.vt, v + o, seq, dim);
    float* dkh = dk + o;
    float* dvh = dv + o;
    std::fill(dkh, dkh + td, 0.0f);
    std::fill(dvh, dvh + td, 0.0f);
    for (int t0 = 0; t0 < seq; t0 += kRows) {
      Group g(t0, sh);
      g.rows_of(q + o, dout + o, dq + o, dim, sc.zeros, sc.sink);
      scores(sc.s, g, sc.kt, sh, tp);
      row_products(sc.ds, g.in2, sc.vt, g.wmax, dim, tp);  // dP[t, u] = dout_t . v_u
      for (int i = 0; i < kRows; ++i) {
        float* p = sc.s + i * tp;
        float* ds = sc.ds + i * tp;
        const int w = g.w[i];
        if (i >= g.rows) {  // no row: no probabilities, no gradient
          std::fill(p, p + g.wmax, 0.0f);
          std::fill(ds, ds + g.wmax, 0.0f);
          continue;
        }
        const std::size_t r = h * static_cast<std::size_t>(seq) + t0 + i;
        const float mx = row_max[r], inv = row_inv[r];
        for (int u = 0; u < w; ++u) p[u] = vec::exp_nonpositive(p[u] - mx) * inv;
        // <dP_t, P_t> as softmax_rows_backward's row_dot over all T columns: the masked ones are
        // zeros, so the same lanes over a zero-padded prefix give the same bits.
        const int rounded = (w + vec::kLanes - 1) / vec::kLanes * vec::kLanes;
        const int n = rounded <= full ? rounded : seq;
        std::fill(p + w, p + std::max(n, g.wmax), 0.0f);
        std::fill(ds + w, ds + std::max(n, g.wmax), 0.0f);
        const float dot = vec::row_dot(ds, p, n);
        for (int u = 0; u < w; ++u) ds[u] = p[u] * (ds[u] - dot);  // dS
      }
      weighted_rows<D>(g.out, sc.ds, tp, k + o, g.wmax, dim);  // dQ / scale
      for (int i = 0; i < g.rows; ++i)
        for (int j = 0; j < dim; ++j) g.out[i][j] *= scale;
      rank1_updates<D>(dkh, dvh, sc.ds, sc.s, tp, g.in, g.in2, g.wmax, dim);
    }
    for (std::size_t i = 0; i < td; ++i) dkh[i] *= scale;
  }
}

}  // namespace

std::size_t attention_scratch_floats(const AttentionShape& s) {
  return Scratch::floats(s) * static_cast<std::size_t>(std::max(1, s.threads));
}

void attention_forward(float* out, float* row_max, float* row_inv, const float* q, const float* k, const float* v,
                       const AttentionShape& s, float* scratch) {
  check(s);
  split_heads_over_threads(s, scratch, [&](int first, int last, float* own) {
    if (s.head_dim == 32) return forward_heads<32>(out, row_max, row_inv, q, k, v, s, own, first, last);
    if (s.head_dim == 64) return forward_heads<64>(out, row_max, row_inv, q, k, v, s, own, first, last);
    forward_heads<0>(out, row_max, row_inv, q, k, v, s, own, first, last);
  });
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                        const float* v, const float* row_max, const float* row_inv, const AttentionShape& s,
                        float* scratch) {
  check(s);
  split_heads_over_threads(s, scratch, [&](int first, int last, float* own) {
    if (s.head_dim == 32) return backward_heads<32>(dq, dk, dv, dout, q, k, v, row_max, row_inv, s, own, first, last);
    if (s.head_dim == 64) return backward_heads<64>(dq, dk, dv, dout, q, k, v, row_max, row_inv, s, own, first, last);
    backward_heads<0>(dq, dk, dv, dout, q, k, v, row_max, row_inv, s, own, first, last);
  });
}

}  // namespace laconic::ops::cpu
