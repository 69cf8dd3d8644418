// The chunk table of the fused CUDA optimizer kernels (optimizers/fused_layout.h), checked on the
// host: every element of every tensor in exactly one chunk, no chunk crossing a kChunk window or
// a tensor boundary, chunks in tensor order. And the device bookkeeping that needs no GPU: state
// buffers live on the store's device and say so in state(); the device forms of clipping equal
// the CPU ones on cpu spans.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "optimizers/adamw.h"
#include "optimizers/clip.h"
#include "optimizers/fused_layout.h"
#include "optimizers/lamb.h"
#include "optimizers/lars.h"
#include "optimizers/sgd.h"

namespace laconic {
namespace {

using fused::kChunk;

ParamStore make_store(const std::vector<std::size_t>& sizes) {
  ParamStore s;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    s.add(std::to_string(i), {static_cast<std::int64_t>(sizes[i])},
          i % 3 == 1 ? ParamGroup::no_decay : ParamGroup::decay);
  s.finalize();
  return s;
}

TEST(FusedLayout, ChunksCoverEveryElementOnceInsideWindowsAndTensors) {
  const std::vector<std::size_t> sizes = {1, 3, kChunk - 1, 2, kChunk, 5 * kChunk + 7, 1, 8191, 4, 17, 2 * kChunk};
  const ParamStore s = make_store(sizes);
  std::vector<fused::Chunk> chunks;
  std::vector<fused::Segment> segments;
  fused::make_chunks(s.views(), chunks, segments);
  ASSERT_EQ(segments.size(), sizes.size());
  std::vector<int> covered(s.size(), 0);
  std::size_t next = 0;
  for (std::size_t t = 0; t < segments.size(); ++t) {
    const ParamView& v = s.view(t);
    const fused::Segment& seg = segments[t];
    EXPECT_EQ(seg.first_chunk, next) << t;
    EXPECT_EQ(seg.decay, v.group == ParamGroup::decay ? 1u : 0u) << t;
    // The fewest chunks that respect the windows: one per window the tensor touches.
    const std::size_t windows = (v.offset + v.numel - 1) / kChunk - v.offset / kChunk + 1;
    EXPECT_EQ(seg.num_chunks, windows) << t;
    for (std::uint32_t k = seg.first_chunk; k < seg.first_chunk + seg.num_chunks; ++k) {
      const fused::Chunk& c = chunks.at(k);
      EXPECT_EQ(c.tensor, t);
      EXPECT_EQ(c.decay, seg.decay);
      EXPECT_GT(c.numel, 0u);
      EXPECT_GE(c.begin, v.offset);
      EXPECT_LE(c.begin + c.numel, v.offset + v.numel);
      EXPECT_EQ(c.begin / kChunk, (c.begin + c.numel - 1) / kChunk) << "chunk " << k << " crosses a window";
      for (std::size_t i = c.begin; i < c.begin + c.numel; ++i) ++covered[i];
    }
    next += seg.num_chunks;
  }
  EXPECT_EQ(next, chunks.size());
  for (std::size_t i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "element " << i;
}

TEST(FusedLayout, EmptyStoreHasNoChunks) {
  ParamStore s;
  s.finalize();
  std::vector<fused::Chunk> chunks;
  std::vector<fused::Segment> segments;
  fused::make_chunks(s.views(), chunks, segments);
  EXPECT_TRUE(chunks.empty());
  EXPECT_TRUE(segments.empty());
}

TEST(OptimizerDevice, CpuStoreKeepsStateOnTheHost) {
  ParamStore s = make_store({7, 3, 12});
  Sgd sgd({0.9, false, 0.0});
  AdamW adamw({});
  Lars lars({});
  Lamb lamb({});
  for (Optimizer* opt : std::initializer_list<Optimizer*>{&sgd, &adamw, &lars, &lamb}) {
    opt->prepare(s);
    for (const StateTensor& st : opt->state()) {
      EXPECT_EQ(st.device, Device::cpu) << opt->describe() << " " << st.name;
      if (st.name != "step") {
        EXPECT_EQ(st.data.size(), s.size()) << opt->describe() << " " << st.name;
      }
    }
  }
}

TEST(ClipGradNorm, DeviceFormsOnCpuAreTheCpuFunctions) {
  std::vector<float> a(1001), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * i) * 3.0f;
  b = a;
  EXPECT_EQ(global_grad_norm(a, Device::cpu), global_grad_norm(a));
  const double na = clip_grad_norm(std::span<float>(a), 1.0, Device::cpu);
  const double nb = clip_grad_norm(std::span<float>(b), 1.0);
  EXPECT_EQ(na, nb);
  EXPECT_EQ(a, b);
}

TEST(ClipGradNorm, CudaSpanNeedsACudaBuild) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA (tests/cuda covers the device path)";
  std::vector<float> g(4, 1.0f);
  EXPECT_THROW(global_grad_norm(g, Device::cuda), Error);
  EXPECT_THROW(clip_to_norm(std::span<float>(g), 2.0, 1.0, Device::cuda), Error);
}

}  // namespace
}  // namespace laconic
