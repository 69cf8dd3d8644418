// 1-bit compression with error feedback: the codec against its plain definition (bit order,
// scales, padding, exact round trips), error feedback losing nothing over time (worker and server
// stage), and the two-phase reducer on 1..8 thread ranks: bit-identical on every rank and equal to
// a plain single-process simulation of the two phases, with the documented byte counts, an exact
// dense warm-up, and running means that converge to the true average.
#include "compression/onebit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "core/check.h"

namespace laconic {
namespace {

using Scale = OneBitOptions::Scale;

// Deterministic inputs of varied sign and magnitude (zeros included) that differ per rank/step.
float wobbly(std::size_t seed, std::size_t i) {
  if ((i * 7 + seed) % 23 == 0) return 0.0f;
  const auto f = static_cast<float>(i);
  return std::sin(f * 0.37f + static_cast<float>(seed) * 1.7f) *
         std::exp2(static_cast<float>((i + seed) % 11) - 5);
}
std::vector<float> wobbly_vec(std::size_t seed, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = wobbly(seed, i);
  return v;
}

bool bit(std::span<const std::uint8_t> bits, std::size_t i) { return (bits[i / 8] >> (i % 8)) & 1u; }
float signed_value(float scale, bool negative) { return negative ? -scale : scale; }

bool same_bits(std::span<const float> x, std::span<const float> y) {
  // Empty spans may hold null pointers, which memcmp must not be given even for 0 bytes.
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size_bytes()) == 0);
}

// ---- codec ----

TEST(OneBitCodec, BitOrderIsLsbFirstAndOneMeansNegative) {
  // Positions 0, 3, 9 and 15 negative; 1 is +0 and 2 is -0, both sign +1.
  std::vector<float> x(16, 1.0f);
  x[0] = x[3] = x[9] = x[15] = -2.0f;
  x[1] = 0.0f;
  x[2] = -0.0f;
  std::vector<std::uint8_t> bits(2);
  onebit_encode(x, {}, bits, Scale::l2);
  EXPECT_EQ(bits[0], 0x09);  // bits 0 and 3
  EXPECT_EQ(bits[1], 0x82);  // elements 9 and 15: bits 1 and 7

  // The same through the vectorised body and the scalar tail: one negative at 33 of 40.
  std::vector<float> y(40, 0.5f);
  y[33] = -0.5f;
  std::vector<std::uint8_t> ybits(5);
  EXPECT_EQ(onebit_encode(y, {}, ybits, Scale::mean_abs), 0.5f);
  EXPECT_EQ(ybits, (std::vector<std::uint8_t>{0, 0, 0, 0, 0x02}));
}

TEST(OneBitCodec, ScalesAreRmsAndMeanAbs) {
  const std::vector<float> x{1, -2, 3, -4};
  EXPECT_EQ(onebit_scale(x, {}, Scale::l2), static_cast<float>(std::sqrt(7.5)));
  EXPECT_EQ(onebit_scale(x, {}, Scale::mean_abs), 2.5f);
  const std::vector<float> e{1, 2, -3, 4};  // x + e = {2, 0, 0, 0}
  EXPECT_EQ(onebit_scale(x, e, Scale::l2), 1.0f);
  EXPECT_EQ(onebit_scale(x, e, Scale::mean_abs), 0.5f);
  EXPECT_EQ(onebit_scale({}, {}, Scale::l2), 0.0f);
}

// Sizes around the 8-element bytes and 8-float vector bodies, and large ones.
const std::size_t kSizes[] = {0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 100, 1000, 4099};

TEST(OneBitCodec, EncodeMatchesThePlainDefinition) {
  for (const Scale scale : {Scale::l2, Scale::mean_abs}) {
    for (const bool feedback : {true, false}) {
      for (const std::size_t n : kSizes) {
        SCOPED_TRACE(::testing::Message() << name_of(scale) << " feedback " << feedback << " n " << n);
        const std::vector<float> x = wobbly_vec(1, n);
        std::vector<float> e = feedback ? wobbly_vec(2, n) : std::vector<float>{};
        // Plain: acc, its scale in double summed in order, signs.
        std::vector<float> acc(n);
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
          acc[i] = feedback ? x[i] + e[i] : x[i];
          sum += scale == Scale::l2 ? static_cast<double>(acc[i]) * acc[i] : std::fabs(acc[i]);
        }
        const double want = n == 0 ? 0.0 : scale == Scale::l2 ? std::sqrt(sum / n) : sum / n;

        std::vector<std::uint8_t> bits(onebit_packed_bytes(n) + 3, 0xff);  // the extra bytes must be zeroed
        const float s = onebit_encode(x, e, bits, scale);
        EXPECT_NEAR(s, want, 1e-6 * want);
        EXPECT_EQ(s, onebit_scale(x, feedback ? wobbly_vec(2, n) : std::vector<float>{}, scale));
        for (std::size_t i = 0; i < n; ++i) {
          ASSERT_EQ(bit(bits, i), acc[i] < 0.0f) << i;
          if (feedback) {
            ASSERT_EQ(e[i], acc[i] - signed_value(s, acc[i] < 0.0f)) << i;
          }
        }
        for (std::size_t i = n; i < 8 * bits.size(); ++i) ASSERT_FALSE(bit(bits, i)) << "padding bit " << i;
      }
    }
  }
}

TEST(OneBitCodec, DecodeAndDecodeAddMatchThePlainDefinition) {
  for (const std::size_t n : kSizes) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    std::vector<std::uint8_t> bits(onebit_packed_bytes(n) + 1);
    for (std::size_t b = 0; b < bits.size(); ++b) bits[b] = static_cast<std::uint8_t>(b * 73 + 29);
    const float s = 0.1234f;
    std::vector<float> out(n + 2, 99.0f), sum = wobbly_vec(3, n + 2);
    const std::vector<float> sum0 = sum;
    onebit_decode(bits, s, std::span(out).first(n));
    onebit_decode_add(bits, s, std::span(sum).first(n));
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same_bits(std::span(&out[i], 1), std::vector<float>{signed_value(s, bit(bits, i))})) << i;
      ASSERT_EQ(sum[i], sum0[i] + signed_value(s, bit(bits, i))) << i;
    }
    EXPECT_EQ(out[n], 99.0f);  // nothing written past n
    EXPECT_EQ(out[n + 1], 99.0f);
    EXPECT_EQ(sum[n], sum0[n]);
  }
}

TEST(OneBitCodec, SignVectorsRoundTripExactly) {
  // x = s * sign already: the scale comes back as s exactly, decoding gives x bit for bit, and
  // the residual is exactly zero.
  for (const Scale scale : {Scale::l2, Scale::mean_abs}) {
    for (const float s : {0.375f, 1.3e-3f, 7.123f, 3e-20f, 1.1e20f}) {
      for (const std::size_t n : {std::size_t{1}, std::size_t{13}, std::size_t{1000}, std::size_t{4096}}) {
        SCOPED_TRACE(::testing::Message() << name_of(scale) << " s " << s << " n " << n);
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) x[i] = (i * 2654435761u) % 7 < 3 ? -s : s;
        std::vector<float> e(n, 0.0f), back(n);
        std::vector<std::uint8_t> bits(onebit_packed_bytes(n));
        EXPECT_EQ(onebit_encode(x, e, bits, scale), s);
        onebit_decode(bits, s, back);
        EXPECT_TRUE(same_bits(back, x));
        EXPECT_TRUE(std::all_of(e.begin(), e.end(), [](float v) { return v == 0.0f; }));
      }
    }
  }
}

TEST(OneBitCodec, TooFewBytesThrow) {
  std::vector<float> x(9);
  std::vector<std::uint8_t> bits(1);
  EXPECT_THROW(onebit_encode(x, {}, bits, Scale::l2), Error);
  EXPECT_THROW(onebit_decode(bits, 1.0f, x), Error);
  std::vector<float> e(8);
  EXPECT_THROW(onebit_scale(x, e, Scale::l2), Error);
}

TEST(OneBitCodec, ErrorFeedbackLosesNothing) {
  // Over T steps: sum of what was sent + the final residual == sum of the inputs.
  for (const Scale scale : {Scale::l2, Scale::mean_abs}) {
    const std::size_t n = 1003;
    const int steps = 50;
    std::vector<float> e(n, 0.0f), sent(n);
    std::vector<double> sum_in(n, 0.0), sum_sent(n, 0.0);
    std::vector<std::uint8_t> bits(onebit_packed_bytes(n));
    for (int t = 0; t < steps; ++t) {
      const std::vector<float> x = wobbly_vec(static_cast<std::size_t>(t) + 10, n);
      const float s = onebit_encode(x, e, bits, scale);
      onebit_decode(bits, s, sent);
      for (std::size_t i = 0; i < n; ++i) {
        sum_in[i] += x[i];
        sum_sent[i] += sent[i];
      }
    }
    for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(sum_sent[i] + e[i], sum_in[i], 1e-4) << i;
  }
}

// ---- chunks and padding ----

TEST(RankChunks, PadToAMultipleOf8NAndCoverTheBucketOnce) {
  for (int world = 1; world <= 9; ++world) {
    for (std::size_t n = 0; n <= 300; ++n) {
      const RankChunks c(n, world);
      const auto w = static_cast<std::size_t>(world);
      ASSERT_EQ(c.chunk % 8, 0u);
      ASSERT_GE(c.padded(), n);
      ASSERT_LT(c.padded() - n, 8 * w) << n << " on " << world;
      ASSERT_EQ(onebit_block_bytes(c), 4 + c.chunk / 8);
      std::size_t covered = 0;
      for (std::size_t j = 0; j < w; ++j) {
        ASSERT_EQ(c.begin(j), j * c.chunk);
        ASSERT_EQ(c.real(j), c.begin(j) >= n ? 0 : std::min(c.chunk, n - c.begin(j)));
        covered += c.real(j);
      }
      ASSERT_EQ(covered, n);
    }
  }
  EXPECT_EQ(RankChunks(1000, 3).chunk, 336u);  // ceil(1000 / 24) * 8
  EXPECT_EQ(RankChunks(5, 4).real(1), 0u);     // whole chunks of padding
}

// ---- the reducer against a plain simulation ----

// The two phases for `world` simulated ranks, plainly: per-chunk encode, decode and averaging
// element by element, no wire blocks, no collectives. Also sums, per stage, what went in, what
// came out, for the error-feedback invariants.
struct Reference {
  Reference(std::size_t n, int world, OneBitOptions opts)
      : n(n),
        world(world),
        opts(opts),
        c(n, world),
        worker(static_cast<std::size_t>(world), std::vector<float>(n, 0.0f)),
        server(static_cast<std::size_t>(world), std::vector<float>(n, 0.0f)),
        worker_in(static_cast<std::size_t>(world), std::vector<double>(n, 0.0)),
        worker_out(static_cast<std::size_t>(world), std::vector<double>(n, 0.0)),
        server_in(n, 0.0),
        server_out(n, 0.0) {}

  // x[i]: rank i's bucket. Returns what every rank ends with.
  std::vector<float> step(const std::vector<std::vector<float>>& x) {
    const auto w = static_cast<std::size_t>(world);
    // Phase 1: scales[i][j] and bits[i][j] are rank i's compressed chunk j.
    std::vector<std::vector<float>> scales(w, std::vector<float>(w));
    std::vector<std::vector<std::vector<std::uint8_t>>> bits(w);
    for (std::size_t i = 0; i < w; ++i) {
      for (std::size_t j = 0; j < w; ++j) {
        const std::size_t lo = std::min(c.begin(j), n), r = c.real(j);
        const std::vector<float> chunk(x[i].begin() + lo, x[i].begin() + lo + r);
        std::span<float> err = opts.error_feedback ? std::span(worker[i]).subspan(lo, r) : std::span<float>{};
        bits[i].emplace_back(c.chunk / 8);
        scales[i][j] = onebit_encode(chunk, err, bits[i][j], opts.scale);
        for (std::size_t k = 0; k < r; ++k) {
          worker_in[i][lo + k] += chunk[k];
          worker_out[i][lo + k] += signed_value(scales[i][j], bit(bits[i][j], k));
        }
      }
    }
    // Phase 2 at rank j: average of chunk j over the ranks (scale / N times the sign, summed in
    // rank order), compressed with rank j's server residual, decoded by everyone.
    std::vector<float> out(n);
    for (std::size_t j = 0; j < w; ++j) {
      const std::size_t lo = std::min(c.begin(j), n), r = c.real(j);
      std::vector<float> avg(r);
      for (std::size_t k = 0; k < r; ++k) {
        avg[k] = signed_value(scales[0][j] / static_cast<float>(world), bit(bits[0][j], k));
        for (std::size_t i = 1; i < w; ++i)
          avg[k] += signed_value(scales[i][j] / static_cast<float>(world), bit(bits[i][j], k));
      }
      std::span<float> err = opts.error_feedback ? std::span(server[j]).subspan(lo, r) : std::span<float>{};
      std::vector<std::uint8_t> sbits(c.chunk / 8);
      const float s = onebit_encode(avg, err, sbits, opts.scale);
      for (std::size_t k = 0; k < r; ++k) {
        out[lo + k] = signed_value(s, bit(sbits, k));
        server_in[lo + k] += avg[k];
        server_out[lo + k] += out[lo + k];
      }
    }
    return out;
  }

  std::size_t n;
  int world;
  OneBitOptions opts;
  RankChunks c;
  std::vector<std::vector<float>> worker, server;  // per rank, like the reducer's state
  std::vector<std::vector<double>> worker_in, worker_out;
  std::vector<double> server_in, server_out;
};

// Rank r's bucket b at step t.
std::vector<float> input(int r, std::size_t b, std::int64_t t, std::size_t n) {
  return wobbly_vec(static_cast<std::size_t>(r) * 1000 + b * 100 + static_cast<std::size_t>(t), n);
}

class OneBitRanks : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(OneBitWorldSizes, OneBitRanks, ::testing::Values(1, 2, 3, 4, 8));

OneBitOptions options(Scale scale, bool feedback, std::int64_t warmup = 0) {
  OneBitOptions o;
  o.scale = scale;
  o.error_feedback = feedback;
  o.warmup_steps = warmup;
  return o;
}

TEST_P(OneBitRanks, EveryRankGetsTheReferenceBitForBit) {
  const int world = GetParam();
  const auto w = static_cast<std::size_t>(world);
  // Padding in most chunks; 5 elements leave whole chunks empty from 2 ranks on, 0 all of them.
  const std::vector<std::size_t> sizes{1000, 37, 4099, 5, 64, 0};
  std::vector<BucketLayout> layouts;
  for (std::size_t b = 0; b < sizes.size(); ++b)
    layouts.push_back(flat_bucket(sizes[b], static_cast<int>(b)));
  const int steps = 4;
  for (const OneBitOptions opts :
       {options(Scale::l2, true), options(Scale::mean_abs, true), options(Scale::l2, false)}) {
    SCOPED_TRACE(OneBitReducer(opts).describe());
    // got[r][t][b], state[r]: what each rank ended with.
    std::vector<std::vector<std::vector<std::vector<float>>>> got(w);
    std::vector<std::vector<std::vector<float>>> state(w);
    run_threads(world, [&](Communicator& comm) {
      const auto r = static_cast<std::size_t>(comm.rank());
      OneBitReducer red(opts);
      red.prepare(layouts);
      for (int t = 0; t < steps; ++t) {
        got[r].emplace_back();
        for (std::size_t b = 0; b < sizes.size(); ++b) {
          std::vector<float> data = input(comm.rank(), b, t, sizes[b]);
          red.reduce(data, layouts[b], t, comm);
          got[r].back().push_back(std::move(data));
        }
      }
      for (const StateTensor& s : red.state()) state[r].emplace_back(s.data.begin(), s.data.end());
    });
    for (std::size_t b = 0; b < sizes.size(); ++b) {
      Reference ref(sizes[b], world, opts);
      for (int t = 0; t < steps; ++t) {
        std::vector<std::vector<float>> x;
        for (int r = 0; r < world; ++r) x.push_back(input(r, b, t, sizes[b]));
        const std::vector<float> want = ref.step(x);
        for (std::size_t r = 0; r < w; ++r)
          ASSERT_TRUE(same_bits(got[r][static_cast<std::size_t>(t)][b], want))
              << "bucket " << b << " step " << t << " rank " << r;
      }
      for (std::size_t r = 0; r < w; ++r) {
        EXPECT_TRUE(same_bits(state[r][2 * b], ref.worker[r]))
            << "worker residual, bucket " << b << " rank " << r;
        EXPECT_TRUE(same_bits(state[r][2 * b + 1], ref.server[r]))
            << "server residual, bucket " << b << " rank " << r;
      }
    }
  }
}

TEST_P(OneBitRanks, ErrorFeedbackLosesNothingInEitherStage) {
  // In the plain simulation (which the reducer matches bit for bit), over many steps:
  // worker: sum sent + final residual == sum of inputs, per rank;
  // server: sum of the averages received == sum sent back + final residual, per owned element.
  const int world = GetParam();
  const std::size_t n = 1001;
  for (const Scale scale : {Scale::l2, Scale::mean_abs}) {
    Reference ref(n, world, options(scale, true));
    for (int t = 0; t < 60; ++t) {
      std::vector<std::vector<float>> x;
      for (int r = 0; r < world; ++r) x.push_back(input(r, 0, t, n));
      ref.step(x);
    }
    for (std::size_t i = 0; i < n; ++i) {
      double server_residual = 0;
      for (int r = 0; r < world; ++r) {
        const auto ur = static_cast<std::size_t>(r);
        ASSERT_NEAR(ref.worker_out[ur][i] + ref.worker[ur][i], ref.worker_in[ur][i], 1e-4)
            << "rank " << r << " i " << i;
        server_residual += ref.server[ur][i];  // one owner per element, zeros elsewhere
      }
      ASSERT_NEAR(ref.server_out[i] + server_residual, ref.server_in[i], 1e-4) << i;
    }
  }
}

TEST_P(OneBitRanks, BytesMatchTheFormula) {
  const int world = GetParam();
  const auto w = static_cast<std::uint64_t>(world);
  const std::size_t n = 1003;
  const RankChunks c(n, world);
  const std::uint64_t block = 4 + c.chunk / 8;
  run_threads(world, [&](Communicator& comm) {
    OneBitReducer red(options(Scale::l2, true, 1));
    const BucketLayout layout = flat_bucket(n);
    red.prepare(std::span(&layout, 1));
    std::vector<float> data = input(comm.rank(), 0, 0, n);
    red.reduce(data, layout, 0, comm);  // warm-up: dense
    EXPECT_EQ(red.stats().value_bytes, 4 * n);
    EXPECT_EQ(red.stats().scale_bytes, 0u);

    const ByteCounters before = comm.bytes();
    red.reduce(data, layout, 1, comm);
    const ByteCounters after = comm.bytes();
    // all_to_all and the ring all_gather: N - 1 blocks out and in, one message each.
    EXPECT_EQ(after.sent - before.sent, 2 * (w - 1) * block);
    EXPECT_EQ(after.recv - before.recv, 2 * (w - 1) * block);
    EXPECT_EQ(after.messages_sent - before.messages_sent, 2 * (w - 1));
    const ReducerStats& s = red.stats();
    EXPECT_EQ(s.calls, 2u);
    EXPECT_EQ(s.input_bytes, 2 * 4 * n);
    EXPECT_EQ(s.value_bytes, 4 * n + w * c.chunk / 8 + c.chunk / 8);
    EXPECT_EQ(s.scale_bytes, 4 * (w + 1));
    EXPECT_EQ(s.index_bytes + s.meta_bytes, 0u);
  });
}

TEST_P(OneBitRanks, WarmUpIsExactDenseAveraging) {
  const int world = GetParam();
  const std::size_t n = 777;
  run_threads(world, [&](Communicator& comm) {
    OneBitReducer red(options(Scale::l2, true, 2));
    const BucketLayout layout = flat_bucket(n);
    red.prepare(std::span(&layout, 1));
    for (int t = 0; t < 3; ++t) {
      std::vector<float> data = input(comm.rank(), 0, t, n), dense = data;
      comm.all_reduce(dense, ReduceOp::avg);
      red.reduce(data, layout, t, comm);
      bool untouched = true;
      for (const StateTensor& s : red.state())
        untouched = untouched && std::all_of(s.data.begin(), s.data.end(), [](float v) { return v == 0.0f; });
      if (t < 2) {
        EXPECT_TRUE(same_bits(data, dense)) << "step " << t;
        EXPECT_TRUE(untouched) << "step " << t;
      } else {
        EXPECT_FALSE(same_bits(data, dense));  // compressed from step 2 on
        EXPECT_FALSE(untouched);
      }
    }
  });
}

TEST_P(OneBitRanks, RunningMeanOfAConstantGradientConvergesToTheAverage) {
  // Each rank sends the same gradient every step. With error feedback nothing is lost, only
  // delayed, so the mean of the outputs approaches the true average (the residuals grow far more
  // slowly than T); without it each output is +-scale of the same signs forever. Also checked on
  // the reducer itself: sum of outputs + the server residuals (over ranks) == average over ranks
  // of (sum of inputs - worker residual).
  const int world = GetParam();
  const std::size_t n = 1001;
  const int steps = 400;
  const auto gradient = [&](int r, std::size_t i) {
    return std::sin(static_cast<float>(i) * 0.37f + static_cast<float>(r) * 0.3f) + 0.2f;
  };
  double truth_rms = 0;
  std::vector<double> truth(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (int r = 0; r < world; ++r) truth[i] += gradient(r, i) / static_cast<double>(world);
    truth_rms += truth[i] * truth[i] / static_cast<double>(n);
  }
  truth_rms = std::sqrt(truth_rms);
  for (const Scale scale : {Scale::l2, Scale::mean_abs}) {
    SCOPED_TRACE(name_of(scale));
    double err_quarter = 0, err_ef = 0, err_plain = 0;
    for (const bool feedback : {true, false}) {
      // Rank 0's sums of outputs after steps / 4 and after all steps; every rank's residuals.
      std::vector<double> quarter(n, 0.0), sum(n, 0.0);
      std::vector<std::vector<float>> worker(static_cast<std::size_t>(world)), server(worker.size());
      run_threads(world, [&](Communicator& comm) {
        const auto r = static_cast<std::size_t>(comm.rank());
        OneBitReducer red(options(scale, feedback));
        const BucketLayout layout = flat_bucket(n);
        red.prepare(std::span(&layout, 1));
        std::vector<float> data(n);
        for (int t = 0; t < steps; ++t) {
          for (std::size_t i = 0; i < n; ++i) data[i] = gradient(comm.rank(), i);
          red.reduce(data, layout, t, comm);
          if (r != 0) continue;
          for (std::size_t i = 0; i < n; ++i) sum[i] += data[i];
          if (t + 1 == steps / 4) quarter = sum;
        }
        const auto st = red.state();
        worker[r].assign(st[0].data.begin(), st[0].data.end());
        server[r].assign(st[1].data.begin(), st[1].data.end());
      });
      double err = 0;
      for (std::size_t i = 0; i < n; ++i) {
        err = std::max(err, std::fabs(sum[i] / steps - truth[i]));
        if (!feedback) continue;
        err_quarter = std::max(err_quarter, std::fabs(quarter[i] / (steps / 4) - truth[i]));
        double through_worker = 0, server_residual = 0;
        for (int r = 0; r < world; ++r) {
          const auto ur = static_cast<std::size_t>(r);
          through_worker += (steps * static_cast<double>(gradient(r, i)) - worker[ur][i]) / world;
          server_residual += server[ur][i];
        }
        ASSERT_NEAR(sum[i] + server_residual, through_worker, 1e-5 * steps) << i;
      }
      (feedback ? err_ef : err_plain) = err;
    }
    EXPECT_LT(err_ef, 0.05 * truth_rms) << "after " << steps / 4 << " steps: " << err_quarter;
    EXPECT_LT(err_ef, 0.5 * err_quarter);
    EXPECT_GT(err_plain, 10 * err_ef);
  }
}

// ---- the reducer's surface ----

TEST(OneBitReducer, StateIsNamedSizedAndUpdatedInPlace) {
  const std::vector<BucketLayout> layouts{flat_bucket(100, 0), flat_bucket(7, 1)};
  OneBitReducer red;
  red.prepare(layouts);
  auto st = red.state();
  ASSERT_EQ(st.size(), 4u);
  EXPECT_EQ(st[0].name, "onebit.worker_error.0");
  EXPECT_EQ(st[1].name, "onebit.server_error.0");
  EXPECT_EQ(st[2].name, "onebit.worker_error.1");
  EXPECT_EQ(st[3].name, "onebit.server_error.1");
  EXPECT_EQ(st[0].data.size(), 100u);
  EXPECT_EQ(st[1].data.size(), 100u);
  EXPECT_EQ(st[3].data.size(), 7u);
  run_threads(2, [&](Communicator& comm) {
    OneBitReducer mine;
    mine.prepare(layouts);
    const auto before = mine.state();
    std::vector<float> data = input(comm.rank(), 0, 0, 100);
    mine.reduce(data, layouts[0], 0, comm);
    const auto after = mine.state();
    for (std::size_t k = 0; k < after.size(); ++k) EXPECT_EQ(after[k].data.data(), before[k].data.data());
    // The server residual lives at the owned chunk's positions (chunk 56: rank 0 owns 0..55).
    const auto server = after[1].data;
    const std::size_t lo = comm.rank() == 0 ? 0 : 56, hi = comm.rank() == 0 ? 56 : 100;
    for (std::size_t i = 0; i < 100; ++i) EXPECT_TRUE((i >= lo && i < hi) || server[i] == 0.0f) << i;
    EXPECT_TRUE(std::any_of(server.begin() + static_cast<std::ptrdiff_t>(lo),
                            server.begin() + static_cast<std::ptrdiff_t>(hi),
                            [](float v) { return v != 0.0f; }));
  });
}

TEST(OneBitReducer, DescribesItselfAndRejectsMismatchedBuckets) {
  EXPECT_EQ(OneBitReducer().describe(), "1-bit (l2 scale, error feedback, two-phase)");
  EXPECT_EQ(OneBitReducer(options(Scale::mean_abs, false, 100)).describe(),
            "1-bit (mean_abs scale, no error feedback, two-phase, dense for the first 100 steps)");
  run_threads(1, [&](Communicator& comm) {
    OneBitReducer red;
    const BucketLayout layout = flat_bucket(10);
    red.prepare(std::span(&layout, 1));
    std::vector<float> data(9);
    EXPECT_THROW(red.reduce(data, layout, 0, comm), Error);
    EXPECT_THROW(red.reduce(data, flat_bucket(9), 0, comm), Error);  // id 0 was prepared with 10
    // A bucket prepare() did not see gets its residuals on first use.
    red.reduce(data, flat_bucket(9, 1), 0, comm);
    EXPECT_EQ(red.state().size(), 4u);
  });
}

}  // namespace
}  // namespace laconic
