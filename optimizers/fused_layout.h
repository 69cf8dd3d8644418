// The per-tensor segment table the fused (multi-tensor) CUDA optimizer kernels work from: one
// launch covers the whole flat buffer, one thread block per chunk. The flat buffer is cut at
// every multiple of kChunk elements and at every tensor boundary, so a chunk is the part of one
// tensor inside one kChunk-aligned window: each chunk knows its tensor (for the decay group and
// the trust ratio), and every chunk boundary inside a tensor is 16-byte aligned (float4 loads).
// Per-tensor norms (LARS, LAMB) are block sums per chunk, written to partials(), then summed per
// tensor in a fixed order: deterministic, no atomics.
//
// Plain C++ (no CUDA headers): the table is built on the host and uploaded once, when the
// optimizer is prepared for a store on the device; it compiles (and is tested) in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/device.h"
#include "core/params.h"

namespace laconic {

namespace fused {

// Elements per window: 256 threads x 4 float4 each, so one block covers a chunk in one pass.
inline constexpr std::size_t kChunk = 4096;

// [begin, begin + numel) of the flat buffer, all in tensor `tensor`, inside one kChunk window.
// The tensor's group is repeated here so that a block needs one load (16 bytes) to start.
struct Chunk {
  std::uint64_t begin = 0;
  std::uint32_t tensor = 0;
  std::uint16_t numel = 0;  // 1..kChunk
  std::uint16_t decay = 0;  // 1 for ParamGroup::decay
};
static_assert(kChunk <= 0xffff, "Chunk::numel is 16 bits");

// One tensor: its chunks are [first_chunk, first_chunk + num_chunks) of the chunk table.
struct Segment {
  std::uint32_t first_chunk = 0;
  std::uint32_t num_chunks = 0;
  std::uint32_t decay = 0;  // 1 for ParamGroup::decay
  std::uint32_t unused = 0;
};

// The chunk and segment tables of `views` (host), in view order; every element of every view is
// in exactly one chunk.
void make_chunks(std::span<const ParamView> views, std::vector<Chunk>& chunks, std::vector<Segment>& segments);

}  // namespace fused

// The tables of one store's layout on its device, with the scratch of the per-tensor reductions
// (two doubles per chunk) and one float per tensor for the step scales (LARS, LAMB).
class FusedLayout {
 public:
  // Builds and uploads the tables for `store` unless they already describe its layout on its
  // device; only then allocates (so a step after the first allocates nothing).
  void prepare(const ParamStore& store) { prepare(store, store.views()); }
  // The same over some of its views (Muon's AdamW group): the other tensors' elements are in no
  // chunk, so a fused step leaves them alone.
  void prepare(const ParamStore& store, std::span<const ParamView> views);

  std::size_t num_chunks() const { return chunks_.size(); }
  std::size_t num_tensors() const { return segments_.size(); }
  const fused::Chunk* chunks() const { return chunks_.data(); }
  const fused::Segment* segments() const { return segments_.data(); }
  double* partials() { return partials_.data(); }  // [num_chunks][2]
  float* scales() { return scales_.data(); }       // [num_tensors]

 private:
  struct Key {
    std::size_t offset, numel;
    ParamGroup group;
  };
  bool describes(const ParamStore& store, std::span<const ParamView> views) const;

  std::vector<Key> key_;  // the layout the tables were built for (host), to notice a change
  DeviceArray<fused::Chunk> chunks_;
  DeviceArray<fused::Segment> segments_;
  DeviceArray<double> partials_;
  DeviceArray<float> scales_;
};

}  // namespace laconic
