// Chunked top-k (compression/sparse.h): the byte formula with compact indices, the exact top-k
// of every chunk, and SparseLoCo's reducer: its accumulator loses nothing (sent + residual = the
// decayed sum of inputs), every rank ends with the same average of what each sent, the wire
// carries (N - 1) encodings per rank, and its chunks never straddle two tensors of a bucket.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "collectives/threads/threads_communicator.h"
#include "compression/sparse.h"

namespace laconic {
namespace {

std::vector<float> wave(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = 1e-3f * std::sin(0.61f * static_cast<float>(i) + 0.9f * static_cast<float>(seed)) *
           (1.0f + std::cos(0.013f * static_cast<float>(i) * static_cast<float>(seed + 1)));
  return v;
}

TEST(ChunkTopK, BytesCountScalesCodesAndPackedIndices) {
  const ChunkTopK c{4096, 64, Codec::int2};
  EXPECT_EQ(c.index_bits(), 12);
  EXPECT_EQ(c.bytes(4096), 4u + 16u + 96u);  // scale, 64 x 2 bits, 64 x 12 bits
  EXPECT_EQ(c.kept(4096 * 3 + 10), 3u * 64 + 10);  // a short last chunk keeps what it has
  EXPECT_EQ(c.bytes(4096 * 3 + 10), 4u * 4 + (202 * 2 + 7) / 8 + (202 * 12 + 7) / 8);
  EXPECT_EQ((ChunkTopK{64, 4, Codec::fp32}).index_bits(), 6);
  EXPECT_EQ((ChunkTopK{100, 4, Codec::fp32}).index_bits(), 7);
  EXPECT_EQ((ChunkTopK{64, 4, Codec::fp32}).bytes(64), 4u * 4 + 3u);  // no scale for fp32
}

TEST(ChunkTopK, KeepsTheLargestOfEveryChunkAtTheirPositions) {
  const ChunkTopK c{50, 5, Codec::fp32};
  const std::vector<float> x = wave(230, 2);
  ChunkTopKScratch scratch;
  scratch.size_for(c, x.size());
  std::vector<std::uint8_t> wire(c.bytes(x.size()));
  std::vector<float> sent(x.size());
  chunk_topk_encode(x, c, wire, sent, scratch);
  std::vector<float> decoded(x.size(), 0.0f);
  chunk_topk_decode_add(wire, c, 1.0f, decoded, scratch);
  EXPECT_EQ(decoded, sent);
  for (std::size_t b = 0; b < x.size(); b += 50) {
    const std::size_t len = std::min<std::size_t>(50, x.size() - b);
    std::vector<std::size_t> order(len);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t i, std::size_t j) { return std::fabs(x[b + i]) > std::fabs(x[b + j]); });
    std::vector<bool> keep(len, false);
    for (std::size_t i = 0; i < std::min<std::size_t>(5, len); ++i) keep[order[i]] = true;
    for (std::size_t i = 0; i < len; ++i) EXPECT_EQ(sent[b + i], keep[i] ? x[b + i] : 0.0f) << b + i;
  }
}

TEST(SparseLocoReducer, TheAccumulatorLosesNothing) {
  // One rank: what it sends comes back as the average. With beta = 1,
  // sum_t out_t + e_T = sum_t x_t; with beta < 1, e_T = beta e_{T-1} + x_T - out_T at every step.
  for (const double beta : {1.0, 0.9}) {
    run_threads(1, [&](Communicator& comm) {
      const std::size_t n = 900;
      SparseLocoReducer red(SparseLocoOptions{{128, 4, Codec::int2}, beta});
      const BucketLayout layout = flat_bucket(n);
      red.prepare(std::span(&layout, 1));
      std::vector<double> sum_out(n, 0.0), sum_x(n, 0.0);
      std::vector<float> e_prev(n, 0.0f);
      for (int t = 0; t < 30; ++t) {
        const std::vector<float> x = wave(n, t);
        std::vector<float> data = x;
        red.reduce(data, layout, t, comm);
        const std::span<float> e = red.state().at(0).data;
        for (std::size_t i = 0; i < n; ++i) {
          sum_out[i] += data[i];
          sum_x[i] += x[i];
          ASSERT_NEAR(e[i], static_cast<float>(beta) * e_prev[i] + x[i] - data[i], 1e-9f) << "t " << t << ", " << i;
        }
        e_prev.assign(e.begin(), e.end());
      }
      if (beta == 1.0) {
        for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(sum_out[i] + e_prev[i], sum_x[i], 1e-7) << i;
      }
    });
  }
}

TEST(SparseLocoReducer, EveryRankGetsTheAverageOfWhatEachSent) {
  const int world = 3;
  const std::size_t n = 1000;
  const ChunkTopK c{256, 8, Codec::int2};
  std::vector<std::vector<float>> got(world), sent(world);
  std::vector<std::uint64_t> wire(world);
  run_threads(world, [&](Communicator& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    SparseLocoReducer red(SparseLocoOptions{c, 0.95});
    const BucketLayout layout = flat_bucket(n);
    red.prepare(std::span(&layout, 1));
    std::vector<float> data = wave(n, comm.rank());
    // What this rank sends at the first call (zero accumulator): the codec of its input.
    ChunkTopKScratch scratch;
    scratch.size_for(c, n);
    std::vector<std::uint8_t> mine(c.bytes(n));
    sent[r].resize(n);
    chunk_topk_encode(data, c, mine, sent[r], scratch);
    const std::uint64_t before = comm.bytes().sent;
    red.reduce(data, layout, 0, comm);
    wire[r] = comm.bytes().sent - before;
    got[r] = data;
    EXPECT_EQ(red.stats().index_bytes + red.stats().value_bytes + red.stats().scale_bytes, c.bytes(n));
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(got[r], got[0]);
    EXPECT_EQ(wire[r], (world - 1) * c.bytes(n));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const float want = sent[0][i] * (1.0f / 3) + sent[1][i] * (1.0f / 3) + sent[2][i] * (1.0f / 3);
    EXPECT_FLOAT_EQ(got[0][i], want) << i;
  }
}


// A bucket of tensors of 5, 300 and 7 elements: chunks of 128 start at every tensor's first
// element, so each tensor keeps min(k, chunk length) values of every chunk of its own (5 and 7
// elements: 4 each; 300: 4, 4 and 4 of 128, 128, 44), and the encoding is the tensors' encodings
// back to back.
TEST(SparseLocoReducer, ChunksNeverStraddleTensors) {
  const ChunkTopK c{128, 4, Codec::fp32};
  BucketLayout layout;
  layout.size = 312;
  layout.tensors = {TensorShape{0, 5, 1}, TensorShape{5, 30, 10}, TensorShape{305, 7, 1}};
  std::vector<float> data(layout.size);
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = (i < 5 ? 1e-3f : 1.0f) * (1.5f + std::sin(0.61f * static_cast<float>(i)));  // all non-zero
  std::uint64_t wire = 0;
  run_threads(1, [&](Communicator& comm) {
    SparseLocoReducer red(SparseLocoOptions{c, 0.0});
    red.prepare(std::span(&layout, 1));
    red.reduce(data, layout, 0, comm);  // one rank: what it sent comes back
    wire = red.stats().payload_bytes();
  });
  EXPECT_EQ(wire, c.bytes(5) + c.bytes(300) + c.bytes(7));
  const auto kept = [&](std::size_t begin, std::size_t len) {
    return static_cast<std::size_t>(std::count_if(data.begin() + static_cast<std::ptrdiff_t>(begin),
                                                   data.begin() + static_cast<std::ptrdiff_t>(begin + len),
                                                   [](float v) { return v != 0.0f; }));
  };
  EXPECT_EQ(kept(0, 5), 4u);  // the small tensor keeps its own 4 beside values 1000 times larger
  EXPECT_EQ(kept(5, 128), 4u);
  EXPECT_EQ(kept(133, 128), 4u);
  EXPECT_EQ(kept(261, 44), 4u);
  EXPECT_EQ(kept(305, 7), 4u);
}

}  // namespace
}  // namespace laconic
